// SPDX-License-Identifier: Apache-2.0

package reshard

import (
	"fmt"
	"math"

	"libreshard.dev/reshard/internal/rsw"
)

// Version is the version of the loaded libreshard, "0.6.0".
func Version() string { return rsw.Rsw_version() }

// DType is an element type (rs_dtype).
type DType int

// The element types, with the values of reshard.h.
const (
	U8     = DType(rsw.RS_DTYPE_U8)
	I8     = DType(rsw.RS_DTYPE_I8)
	U16    = DType(rsw.RS_DTYPE_U16)
	I16    = DType(rsw.RS_DTYPE_I16)
	U32    = DType(rsw.RS_DTYPE_U32)
	I32    = DType(rsw.RS_DTYPE_I32)
	U64    = DType(rsw.RS_DTYPE_U64)
	I64    = DType(rsw.RS_DTYPE_I64)
	F16    = DType(rsw.RS_DTYPE_F16)
	BF16   = DType(rsw.RS_DTYPE_BF16)
	F32    = DType(rsw.RS_DTYPE_F32)
	F64    = DType(rsw.RS_DTYPE_F64)
	F8E4M3 = DType(rsw.RS_DTYPE_F8_E4M3)
	F8E5M2 = DType(rsw.RS_DTYPE_F8_E5M2)
	Bool   = DType(rsw.RS_DTYPE_BOOL)
)

// Size is the size of one element in bytes; 0 for an unknown dtype.
func (d DType) Size() int64 {
	if !fitsInt32(int64(d)) {
		return 0
	}
	return rsw.Rsw_dtype_size(int(d))
}

// String gives the lower-case name, "bf16"; "unknown" for an unknown dtype.
func (d DType) String() string {
	if !fitsInt32(int64(d)) {
		return "unknown"
	}
	return rsw.Rsw_dtype_name(int(d))
}

// Side says which layout of a plan a buffer belongs to.
type Side int

// The two sides of a plan.
const (
	Src = Side(rsw.RS_SIDE_SRC)
	Dst = Side(rsw.RS_SIDE_DST)
)

func (s Side) String() string {
	switch s {
	case Src:
		return "src"
	case Dst:
		return "dst"
	}
	return fmt.Sprintf("Side(%d)", int(s))
}

// Memory is where a bound buffer lives.
type Memory int

// The memory kinds.
const (
	MemoryHost = Memory(rsw.RS_MEMORY_HOST) // ordinary host memory
	MemoryCUDA = Memory(rsw.RS_MEMORY_CUDA) // memory of a CUDA device
)

// Transport is what a context drives.
type Transport int

// The transports.
const (
	TransportLocal = Transport(rsw.RS_TRANSPORT_LOCAL) // every rank in this process
	TransportMPI   = Transport(rsw.RS_TRANSPORT_MPI)   // one rank per MPI process
	TransportNCCL  = Transport(rsw.RS_TRANSPORT_NCCL)  // one GPU per rank
)

func (t Transport) String() string {
	switch t {
	case TransportLocal:
		return "local"
	case TransportMPI:
		return "mpi"
	case TransportNCCL:
		return "nccl"
	}
	return fmt.Sprintf("Transport(%d)", int(t))
}

// Param names a setting of a context (rs_param).
type Param int

// The settings; reshard.h gives their bounds and defaults.
const (
	ParamStagingBytes   = Param(rsw.RS_PARAM_STAGING_BYTES)
	ParamSliceBytes     = Param(rsw.RS_PARAM_SLICE_BYTES)     // deprecated, no effect
	ParamCopyThreads    = Param(rsw.RS_PARAM_COPY_THREADS)    // host copies over threads; 0: one a CPU; since 0.5
	ParamProgressThread = Param(rsw.RS_PARAM_PROGRESS_THREAD) // 1: execute_async hands host executions to a thread; since 0.6
	ParamTimeoutMS      = Param(rsw.RS_PARAM_TIMEOUT_MS)
	ParamIntegrity      = Param(rsw.RS_PARAM_INTEGRITY)
	ParamPlanPart       = Param(rsw.RS_PARAM_PLAN_PART)  // -1 whole plan, else one rank's part
	ParamPlanBoxes      = Param(rsw.RS_PARAM_PLAN_BOXES) // 0: plans to inspect, not to run
	ParamRounds         = Param(rsw.RS_PARAM_ROUNDS)     // a Rounds; since 0.5
)

// Rounds says how a plan is cut into rounds (rs_rounds, ParamRounds).
// Since 0.5.
type Rounds int

// The ways to cut rounds.
const (
	RoundsPacked       = Rounds(rsw.RS_ROUNDS_PACKED)         // few rounds of many peers (the default)
	RoundsByDomainPair = Rounds(rsw.RS_ROUNDS_BY_DOMAIN_PAIR) // each round decided by two domains
)

// Stat names one per-rank figure of a plan (rs_stat).
type Stat int

// The figures of a plan.
const (
	StatBytesSentIntra = Stat(rsw.RS_STAT_BYTES_SENT_INTRA)
	StatBytesSentInter = Stat(rsw.RS_STAT_BYTES_SENT_INTER)
	StatBytesRecvIntra = Stat(rsw.RS_STAT_BYTES_RECV_INTRA)
	StatBytesRecvInter = Stat(rsw.RS_STAT_BYTES_RECV_INTER)
	StatBytesLocal     = Stat(rsw.RS_STAT_BYTES_LOCAL)
	StatMessagesSent   = Stat(rsw.RS_STAT_MESSAGES_SENT)
	StatMessagesRecv   = Stat(rsw.RS_STAT_MESSAGES_RECV)
	StatRounds         = Stat(rsw.RS_STAT_ROUNDS)
	StatStagingBytes   = Stat(rsw.RS_STAT_STAGING_BYTES)
	StatMoves          = Stat(rsw.RS_STAT_MOVES)
	// StatConvertedSending counts the elements the rank converts to
	// another dtype before sending them (an fp8 block's scale counts one).
	// Since 0.4.
	StatConvertedSending = Stat(rsw.RS_STAT_CONVERTED_SENDING)
	// StatConvertedReceiving counts the elements the rank converts once
	// they arrived, or in a copy inside the rank. Since 0.4.
	StatConvertedReceiving = Stat(rsw.RS_STAT_CONVERTED_RECEIVING)
	// StatBytesCopiedFromRelay counts the bytes the rank copies out of a
	// relay slot: it received them once, forwards them to others of its
	// domain and needs them itself. Not in StatBytesLocal. Since 0.5.
	StatBytesCopiedFromRelay = Stat(rsw.RS_STAT_BYTES_COPIED_FROM_RELAY)
	// StatBytesPacked counts, of the bytes the rank sends, those it
	// copies into staging first as they are (not converted); the rest go
	// straight from contiguous memory. What a transport that stages (MPI,
	// NCCL) copies. Since 0.5.
	StatBytesPacked = Stat(rsw.RS_STAT_BYTES_PACKED)
	// StatBytesUnpacked counts, of the bytes the rank receives, those it
	// copies out of staging as they are. Since 0.5.
	StatBytesUnpacked = Stat(rsw.RS_STAT_BYTES_UNPACKED)
)

// ScaleRule says how the scale of a block of an fp8 tensor is chosen
// (rs_scale_rule, Layout.SetBlockScales). Since 0.4.
type ScaleRule int

// The scale rules.
const (
	ScaleAMAX  = ScaleRule(rsw.RS_SCALE_AMAX)  // scale = amax / 448
	ScaleUE8M0 = ScaleRule(rsw.RS_SCALE_UE8M0) // 2^ceil(log2(amax / 448)), a power of two
)

func (s ScaleRule) String() string {
	switch s {
	case ScaleAMAX:
		return "amax"
	case ScaleUE8M0:
		return "ue8m0"
	}
	return fmt.Sprintf("ScaleRule(%d)", int(s))
}

// Limits and special values of the C API.
const (
	// AllRanks is Context.Rank of a context that drives every rank itself,
	// and the rank that sums a plan's figures over ranks.
	AllRanks = rsw.RS_ALL_RANKS
	// MaxDims is the largest number of tensor dimensions.
	MaxDims = rsw.RS_MAX_DIMS
	// NCCLUniqueIDBytes is the size of an NCCL unique id.
	NCCLUniqueIDBytes = rsw.RS_NCCL_UNIQUE_ID_BYTES
)

// Placement is what one axis of a device mesh does with a tensor, as in
// PyTorch's DTensor: Shard(d) splits tensor dimension d over the axis
// (uneven sizes as torch.chunk), Replicate() copies it, and
// StridedShard(d, f) is torch's _StridedShard, what FSDP2 over TP stores.
// Placements compare with ==; the zero value is Shard(0).
type Placement struct {
	code  int // RS_REPLICATE or the dimension (math.MinInt32: refused)
	extra int // split factor - 1: 0 for Shard and Replicate
}

// Shard splits tensor dimension dim over a mesh axis.
func Shard(dim int) Placement {
	if dim < 0 {
		return Placement{code: math.MinInt32} // refused by AddDTensor
	}
	return Placement{code: dim}
}

// Replicate copies the tensor over a mesh axis.
func Replicate() Placement { return Placement{code: rsw.RS_REPLICATE} }

// StridedShard is torch's _StridedShard(dim, splitFactor): dimension dim
// is cut into splitFactor pieces, each piece split over the mesh axis
// (torch.chunk rule), and a coordinate holds its chunk of every piece, so
// a rank's shard may be several boxes of its dense local tensor. A split
// factor of 1 is Shard(dim); below 1 is refused by AddDTensor. Since 0.6.
func StridedShard(dim, splitFactor int) Placement {
	p := Shard(dim)
	p.extra = splitFactor - 1
	return p
}

// IsShard reports whether p shards a dimension (Shard or StridedShard);
// Dim says which.
func (p Placement) IsShard() bool { return p.code >= 0 }

// IsStrided reports whether p is a StridedShard with a split factor other
// than 1. Since 0.6.
func (p Placement) IsStrided() bool { return p.extra != 0 }

// Dim is the tensor dimension p shards, or -1 for Replicate.
func (p Placement) Dim() int {
	if p.code < 0 {
		return -1
	}
	return p.code
}

// SplitFactor is a StridedShard's split factor, 1 for other placements.
// Since 0.6.
func (p Placement) SplitFactor() int { return p.extra + 1 }

func (p Placement) String() string {
	switch {
	case p == Replicate():
		return "Replicate()"
	case p.code < 0 && p.code != rsw.RS_REPLICATE:
		return fmt.Sprintf("Placement(%d)", p.code)
	case p.extra != 0:
		return fmt.Sprintf("StridedShard(%d, %d)", p.code, p.SplitFactor())
	}
	return fmt.Sprintf("Shard(%d)", p.code)
}

// placementCodes gives the C API's placement codes and split factors.
func placementCodes(placements []Placement) (codes, split []int64, strided bool) {
	codes = make([]int64, len(placements))
	split = make([]int64, len(placements))
	for i, p := range placements {
		codes[i] = int64(p.code)
		split[i] = int64(p.SplitFactor())
		strided = strided || p.IsStrided()
	}
	return codes, split, strided
}

// StridedOrder says which memory order a tensor with StridedShard
// placements was made in (rs_strided_order). The two keep different
// elements where the sizes along a strided dimension are uneven. Since
// 0.6.
type StridedOrder int

// The orders.
const (
	// StridedAuto: either, where the two agree; refused where they do not.
	StridedAuto = StridedOrder(rsw.RS_STRIDED_AUTO)
	// StridedDistribute: distribute_tensor's (placements left to right).
	StridedDistribute = StridedOrder(rsw.RS_STRIDED_DISTRIBUTE)
	// StridedFSDP2: FSDP2 over TP's (fully_shard).
	StridedFSDP2 = StridedOrder(rsw.RS_STRIDED_FSDP2)
)

func (o StridedOrder) String() string {
	switch o {
	case StridedAuto:
		return "auto"
	case StridedDistribute:
		return "distribute"
	case StridedFSDP2:
		return "fsdp2"
	}
	return fmt.Sprintf("StridedOrder(%d)", int(o))
}

// Mesh is a device mesh: its axis sizes, its ranks in row-major mesh order
// (len(Ranks) is the product of Shape), and optionally a name per axis. A
// trainer with DP 2 and TP 2 on ranks 0..3 is
//
//	reshard.Mesh{Shape: []int64{2, 2}, Ranks: []int{0, 1, 2, 3}, Names: []string{"dp", "tp"}}
type Mesh struct {
	Shape []int64
	Ranks []int
	Names []string // optional: one name per axis, for Placements
}

// NewMesh makes the mesh of the given shape over the consecutive ranks
// first, first+1, ...
func NewMesh(first int, shape ...int64) Mesh {
	n := Mesh{Shape: shape}.Size()
	if n < 0 || n > math.MaxInt32 {
		n = 0
	}
	m := Mesh{Shape: append([]int64(nil), shape...), Ranks: make([]int, n)}
	for i := range m.Ranks {
		m.Ranks[i] = first + i
	}
	return m
}

// Size is the number of ranks of the mesh (the product of Shape), or -1
// when the shape has a size below 1 or the product overflows.
func (m Mesh) Size() int64 {
	n := int64(1)
	for _, s := range m.Shape {
		if s < 1 || n > math.MaxInt64/s {
			return -1
		}
		n *= s
	}
	return n
}

// Placements gives one placement per axis: those byName names (by the
// mesh's Names), Replicate() for the others.
//
//	trainer.Placements(map[string]reshard.Placement{"tp": reshard.Shard(0)})
func (m Mesh) Placements(byName map[string]Placement) ([]Placement, error) {
	if len(m.Names) != len(m.Shape) {
		return nil, newError("Mesh.Placements", StatusInvalidArgument,
			"the mesh has %d axes and %d names", len(m.Shape), len(m.Names))
	}
	out := make([]Placement, len(m.Shape))
	found := 0
	for i, name := range m.Names {
		out[i] = Replicate()
		if p, ok := byName[name]; ok {
			out[i] = p
			found++
		}
	}
	if found != len(byName) {
		return nil, newError("Mesh.Placements", StatusInvalidArgument,
			"%v names an axis the mesh (axes %v) lacks", byName, m.Names)
	}
	return out, nil
}

// Coord is the mesh coordinate of rank, or false when the mesh lacks it.
func (m Mesh) Coord(rank int) ([]int64, bool) {
	for i, r := range m.Ranks {
		if r == rank {
			c := make([]int64, len(m.Shape))
			at := int64(i)
			for a := len(m.Shape) - 1; a >= 0; a-- {
				if m.Shape[a] < 1 {
					return nil, false
				}
				c[a] = at % m.Shape[a]
				at /= m.Shape[a]
			}
			return c, true
		}
	}
	return nil, false
}

// LocalBox is the box of a tensor of the given shape that rank holds under
// placements on this mesh: offset and extent, one entry per dimension (an
// empty shard has extent 0 in its sharded dimension).
func (m Mesh) LocalBox(shape []int64, placements []Placement, rank int) (offset, extent []int64, err error) {
	coord, ok := m.Coord(rank)
	if !ok {
		return nil, nil, newError("Mesh.LocalBox", StatusInvalidArgument,
			"rank %d is not in the mesh", rank)
	}
	return DTensorLocalBox(shape, m.Shape, placements, coord)
}

// LocalNumel is the number of elements of rank's shard.
func (m Mesh) LocalNumel(shape []int64, placements []Placement, rank int) (int64, error) {
	_, extent, err := m.LocalBox(shape, placements, rank)
	if err != nil {
		return 0, err
	}
	n := int64(1)
	for _, e := range extent {
		n *= e
	}
	return n, nil
}

// DTensorLocalBox is the box that mesh coordinate coord holds of a tensor
// of the given shape laid out by placements over a mesh of meshShape.
func DTensorLocalBox(shape, meshShape []int64, placements []Placement, coord []int64) (offset, extent []int64, err error) {
	const op = "DTensorLocalBox"
	r, err := newResult(op)
	if err != nil {
		return nil, nil, err
	}
	defer rsw.Rsw_result_free(r)
	place, _, strided := placementCodes(placements)
	if strided {
		return nil, nil, newError(op, StatusUnsupported,
			"%v: a StridedShard may hold several boxes; DTensorLocalBoxes gives them", placements)
	}
	vs, err := newIntsList(op, shape, meshShape, place, coord, nil, nil)
	if err != nil {
		return nil, nil, err
	}
	defer freeInts(vs...)
	rsw.Rsw_dtensor_local_box(r, vs[0], vs[1], vs[2], vs[3], vs[4], vs[5])
	if err := resultError(op, r); err != nil {
		return nil, nil, err
	}
	return intsSlice(vs[4]), intsSlice(vs[5]), nil
}

// LocalBox is one box of a rank's dense local tensor: its global Offset
// and Extent, and where it starts in the local tensor (Local). Since 0.6.
type LocalBox struct {
	Offset, Extent, Local []int64
}

// DTensorLocalBoxes is what mesh coordinate coord holds of a tensor of the
// given shape laid out by placements (StridedShard included) over a mesh
// of meshShape, in the given order: its dense local shape and its boxes,
// row-major over the dimensions' runs (none for an empty shard). Since
// 0.6.
func DTensorLocalBoxes(shape, meshShape []int64, placements []Placement, order StridedOrder, coord []int64) (localShape []int64, boxes []LocalBox, err error) {
	const op = "DTensorLocalBoxes"
	if err := cInts(op, []string{"order"}, int(order)); err != nil {
		return nil, nil, err
	}
	r, err := newResult(op)
	if err != nil {
		return nil, nil, err
	}
	defer rsw.Rsw_result_free(r)
	place, split, _ := placementCodes(placements)
	vs, err := newIntsList(op, shape, meshShape, place, split, coord, nil, nil, nil, nil)
	if err != nil {
		return nil, nil, err
	}
	defer freeInts(vs...)
	rsw.Rsw_dtensor_local_boxes(r, vs[0], vs[1], vs[2], vs[3], int(order), vs[4], vs[5], vs[6], vs[7], vs[8])
	if err := resultError(op, r); err != nil {
		return nil, nil, err
	}
	localShape = intsSlice(vs[5])
	off, ext, loc := intsSlice(vs[6]), intsSlice(vs[7]), intsSlice(vs[8])
	nd := len(shape)
	for i := 0; i < int(r.GetValue()); i++ {
		at := i * nd
		boxes = append(boxes, LocalBox{off[at : at+nd : at+nd], ext[at : at+nd : at+nd], loc[at : at+nd : at+nd]})
	}
	return localShape, boxes, nil
}

// LocalBoxes is DTensorLocalBoxes for the coordinate of rank. Since 0.6.
func (m Mesh) LocalBoxes(shape []int64, placements []Placement, order StridedOrder, rank int) (localShape []int64, boxes []LocalBox, err error) {
	coord, ok := m.Coord(rank)
	if !ok {
		return nil, nil, newError("Mesh.LocalBoxes", StatusInvalidArgument,
			"rank %d is not in the mesh", rank)
	}
	return DTensorLocalBoxes(shape, m.Shape, placements, order, coord)
}

// Stats are the figures of one rank of a plan, or of all ranks (summed;
// Rounds and StagingBytes: the maximum).
type Stats struct {
	BytesSentIntra int64 // to other ranks of the same domain
	BytesSentInter int64 // to ranks of other domains
	BytesRecvIntra int64
	BytesRecvInter int64
	BytesLocal     int64 // copied inside the rank itself, from what it holds
	MessagesSent   int64
	MessagesRecv   int64
	Rounds         int64 // rounds of the whole plan
	StagingBytes   int64 // staging the rank allocates to execute the plan
	Moves          int64 // moves the rank takes part in
	// elements converted to another dtype before sending (since 0.4)
	ConvertedSending int64
	// elements converted once they arrived, or in a local copy (since 0.4)
	ConvertedReceiving int64
	// bytes copied out of a relay slot: received once, forwarded, and
	// needed by the rank itself; not in BytesLocal (since 0.5)
	BytesCopiedFromRelay int64
	// of the bytes sent or received, those copied into or out of staging
	// as they are, by a transport that stages (since 0.5)
	BytesPacked   int64
	BytesUnpacked int64
}
