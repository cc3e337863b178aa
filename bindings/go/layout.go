// SPDX-License-Identifier: Apache-2.0

package reshard

import (
	"runtime"

	"libreshard.dev/reshard/internal/rsw"
)

// Layout says which rank holds which boxes of which tensors, and where in
// its buffers. It keeps its Context (and the C context) alive.
type Layout struct {
	s    *ctxState
	ctx  *Context
	h    rsw.Struct_SS_rs_layout // nil once closed
	ndim map[string]int          // tensors declared through AddTensor
}

// Context is the context the layout was made on.
func (l *Layout) Context() *Context { return l.ctx }

// do runs f with the context's lock held and a fresh result; it returns
// f's own error, else the one the result records.
func (l *Layout) do(op string, f func(r rsw.Rsw_result, h rsw.Struct_SS_rs_layout) error) (int64, error) {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if l.h == nil {
		return 0, closedError(op, "layout")
	}
	return withResult(op, func(r rsw.Rsw_result) error { return f(r, l.h) })
}

// AddTensor declares a tensor: a unique non-empty UTF-8 name, a dtype and a
// shape of 1 to MaxDims sizes, each at least 1.
func (l *Layout) AddTensor(name string, dtype DType, shape []int64) error {
	const op = "Layout.AddTensor"
	if err := cName(op, name); err != nil {
		return err
	}
	if err := cInts(op, []string{"dtype"}, int(dtype)); err != nil {
		return err
	}
	v, err := newIntsList(op, shape)
	if err != nil {
		return err
	}
	defer freeInts(v...)
	_, err = l.do(op, func(r rsw.Rsw_result, h rsw.Struct_SS_rs_layout) error {
		rsw.Rsw_layout_add_tensor(r, h, name, int(dtype), v[0])
		if r.GetStatus() == 0 {
			l.ndim[name] = len(shape)
		}
		return nil
	})
	return err
}

// AddShard says that rank holds the box [offset, offset+extent) of tensor
// name, in its buffer number buffer, byteOffset bytes in, with element
// strides per dimension (nil: dense row-major). A rank may hold several
// boxes of a tensor; one buffer may hold shards of several tensors (a
// fused qkv_proj is three shards in one buffer).
func (l *Layout) AddShard(name string, rank int, offset, extent []int64, buffer int, byteOffset int64, strides []int64) error {
	const op = "Layout.AddShard"
	if err := cName(op, name); err != nil {
		return err
	}
	if err := cInts(op, []string{"rank", "buffer"}, rank, buffer); err != nil {
		return err
	}
	if len(offset) != len(extent) || (strides != nil && len(strides) != len(offset)) {
		return newError(op, StatusInvalidArgument,
			"offset, extent and strides have %d, %d and %d entries",
			len(offset), len(extent), len(strides))
	}
	if len(offset) > MaxDims {
		return newError(op, StatusTooManyDims, "%d dimensions, at most %d",
			len(offset), MaxDims)
	}
	// libreshard reads as many entries as the tensor has dimensions: give
	// it MaxDims, zero-padded, so that a short list fails (an extent of 0
	// is a bad shape) instead of reading past its end.
	pad := func(xs []int64) []int64 {
		if xs == nil {
			return nil
		}
		return append(append(make([]int64, 0, MaxDims), xs...), make([]int64, MaxDims-len(xs))...)
	}
	vs, err := newIntsList(op, pad(offset), pad(extent))
	if err != nil {
		return err
	}
	defer freeInts(vs...)
	vstr, err := newInts(op, pad(strides))
	if err != nil {
		return err
	}
	defer freeInts(vstr)
	_, err = l.do(op, func(r rsw.Rsw_result, h rsw.Struct_SS_rs_layout) error {
		if n, ok := l.ndim[name]; ok && n != len(offset) {
			return newError(op, StatusInvalidArgument,
				"tensor %q has %d dimensions, the box %d", name, n, len(offset))
		}
		rsw.Rsw_layout_add_shard(r, h, name, rank, vs[0], vs[1], buffer, byteOffset, vstr)
		return nil
	})
	return err
}

// AddDTensor adds the shards of tensor name laid out DTensor style over
// mesh: one placement per mesh axis (Shard(d), Replicate() or
// StridedShard(d, f)); each rank's local shard lies dense in its buffer
// number buffer at byteOffset. With a StridedShard it is
// AddDTensorStrided with StridedAuto.
func (l *Layout) AddDTensor(name string, mesh Mesh, placements []Placement, buffer int, byteOffset int64) error {
	return l.addDTensor("Layout.AddDTensor", name, mesh, placements, StridedAuto, buffer, byteOffset)
}

// AddDTensorStrided is AddDTensor with the order a tensor with
// StridedShard placements was made in: StridedFSDP2 (FSDP2 over TP),
// StridedDistribute (distribute_tensor) or StridedAuto (refused where the
// two keep different elements). A rank whose elements are several boxes
// gets each as a shard of its one dense local tensor (with its strides).
// Since 0.6.
func (l *Layout) AddDTensorStrided(name string, mesh Mesh, placements []Placement, order StridedOrder, buffer int, byteOffset int64) error {
	return l.addDTensor("Layout.AddDTensorStrided", name, mesh, placements, order, buffer, byteOffset)
}

func (l *Layout) addDTensor(op, name string, mesh Mesh, placements []Placement, order StridedOrder, buffer int, byteOffset int64) error {
	if err := cName(op, name); err != nil {
		return err
	}
	if err := cInts(op, []string{"buffer", "order"}, buffer, int(order)); err != nil {
		return err
	}
	if n := mesh.Size(); n < 0 || int64(len(mesh.Ranks)) != n {
		return newError(op, StatusInvalidArgument,
			"a mesh of shape %v needs %d ranks, not %d", mesh.Shape, n, len(mesh.Ranks))
	}
	ranks := make([]int64, len(mesh.Ranks))
	for i, x := range mesh.Ranks {
		ranks[i] = int64(x)
	}
	place, split, strided := placementCodes(placements)
	plain := !strided // the 0.1 call, as before 0.6
	if plain {
		split = nil
	}
	vs, err := newIntsList(op, mesh.Shape, ranks, place, split)
	if err != nil {
		return err
	}
	defer freeInts(vs...)
	_, err = l.do(op, func(r rsw.Rsw_result, h rsw.Struct_SS_rs_layout) error {
		if plain {
			rsw.Rsw_layout_add_dtensor(r, h, name, vs[0], vs[1], vs[2], buffer, byteOffset)
		} else {
			rsw.Rsw_layout_add_dtensor_strided(r, h, name, vs[0], vs[1], vs[2], vs[3], int(order), buffer, byteOffset)
		}
		return nil
	})
	return err
}

// SetBlockScales declares that tensor values (F8E4M3, in the destination
// layout) is quantized in blocks of blockRows x blockCols elements over its
// last two dimensions (a 1-D tensor: blockRows 1), with one f32 scale per
// block in tensor scales, whose shape is the values' with the last two
// dimensions divided by the block, rounded up. Declare both tensors first;
// the scales are placed with shards like any tensor and are not in the
// source layout. The plan converts from the source's F32, BF16 or F16 on
// the way; a reader takes value * scale. Declaring the same thing again
// does nothing. Since 0.4.
func (l *Layout) SetBlockScales(values, scales string, blockRows, blockCols int64, rule ScaleRule) error {
	const op = "Layout.SetBlockScales"
	if err := cName(op, values); err != nil {
		return err
	}
	if err := cName(op, scales); err != nil {
		return err
	}
	if err := cInts(op, []string{"rule"}, int(rule)); err != nil {
		return err
	}
	_, err := l.do(op, func(r rsw.Rsw_result, h rsw.Struct_SS_rs_layout) error {
		rsw.Rsw_layout_set_block_scales(r, h, values, scales, blockRows, blockCols, int(rule))
		return nil
	})
	return err
}

// Allgather shares the shards of every rank (MPI and NCCL contexts, one
// rank per process): before, each rank holds only its own shards; after,
// every rank holds all of them and computes the same plan. Collective.
func (l *Layout) Allgather() error {
	_, err := l.do("Layout.Allgather", func(r rsw.Rsw_result, h rsw.Struct_SS_rs_layout) error {
		rsw.Rsw_layout_allgather(r, h)
		return nil
	})
	return err
}

// NumTensors is the number of tensors declared.
func (l *Layout) NumTensors() (int, error) {
	n, err := l.do("Layout.NumTensors", func(r rsw.Rsw_result, h rsw.Struct_SS_rs_layout) error {
		rsw.Rsw_layout_num_tensors(r, h)
		return nil
	})
	return int(n), err
}

// NumShards is the number of shards added.
func (l *Layout) NumShards() (int64, error) {
	return l.do("Layout.NumShards", func(r rsw.Rsw_result, h rsw.Struct_SS_rs_layout) error {
		rsw.Rsw_layout_num_shards(r, h)
		return nil
	})
}

// Serialize encodes every tensor and shard in libreshard's layout wire
// format, to exchange layouts over a channel of your own.
func (l *Layout) Serialize() ([]byte, error) {
	var out []byte
	_, err := l.do("Layout.Serialize", func(r rsw.Rsw_result, h rsw.Struct_SS_rs_layout) error {
		rsw.Rsw_layout_serialize(r, h)
		if r.GetStatus() == 0 {
			b := rsw.Rsw_result_buffer(r)
			out = append([]byte(nil), cBytes(b)...)
			rsw.Rsw_buffer_free(b)
		}
		return nil
	})
	return out, err
}

// Deserialize adds what bytes made by Serialize hold; on failure the layout
// is unchanged.
func (l *Layout) Deserialize(data []byte) error {
	const op = "Layout.Deserialize"
	b := rsw.Rsw_buffer_new(int64(len(data)))
	if b.Swigcptr() == 0 {
		return newError(op, StatusNoMemory, "out of memory")
	}
	defer rsw.Rsw_buffer_free(b)
	copy(cBytes(b), data)
	_, err := l.do(op, func(r rsw.Rsw_result, h rsw.Struct_SS_rs_layout) error {
		rsw.Rsw_layout_deserialize(r, h, b)
		return nil
	})
	return err
}

// Close frees the layout; plans made from it stay valid. Closing twice does
// nothing.
func (l *Layout) Close() error {
	if l == nil {
		return nil
	}
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if l.h == nil {
		return nil
	}
	runtime.SetFinalizer(l, nil)
	rsw.Rsw_layout_destroy(l.h)
	l.h = nil
	live.layouts.Add(-1)
	return nil
}

func (l *Layout) finalize() {
	if !l.s.mpi {
		go l.Close()
	}
}
