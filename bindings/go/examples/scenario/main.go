// SPDX-License-Identifier: Apache-2.0

// The shared scenario of the bindings: a weight sync from trainer TP2 x DP2
// to inference TP4, every rank in this process.
//
// A small transformer (2 layers of q/k/v/o, gate/up/down and two norms)
// lives on trainer ranks 0..3, a [2, 2] mesh [DP, TP] (Megatron: q, k, v,
// gate and up split by rows, o and down by columns, norms replicated), each
// rank's shards one after another in one buffer. Inference ranks 4..7, a
// [4] mesh [TP], want them in one fused buffer per rank, vLLM style
// (qkv_proj = q, k, v shards back to back; gate_up_proj = gate, up).
// Domains of 4 ranks: the trainers are one, the inference ranks another.
// Plan, print what crosses, execute, check every element; change the
// weights, execute the same plan again, check again.
//
//	cd bindings/go && CGO_LDFLAGS="-L$BUILD/lib -Wl,-rpath,$BUILD/lib" go run ./examples/scenario
package main

import (
	"fmt"
	"io"
	"os"

	"libreshard.dev/reshard"
)

const (
	hidden = 64
	qDim   = 64
	kvDim  = 32
	ffn    = 128
	layers = 2
)

// tensor is one weight: its name, dtype, shape, and the dimension tensor
// parallelism splits (-1: replicated), the same for trainer and inference.
type tensor struct {
	name  string
	dtype reshard.DType
	shape []int64
	split int
}

func model() []tensor {
	var ts []tensor
	for l := 0; l < layers; l++ {
		p := fmt.Sprintf("model.layers.%d.", l)
		add := func(name string, dtype reshard.DType, split int, shape ...int64) {
			ts = append(ts, tensor{p + name, dtype, shape, split})
		}
		add("self_attn.q_proj.weight", reshard.F32, 0, qDim, hidden)  // qkv_proj
		add("self_attn.k_proj.weight", reshard.F32, 0, kvDim, hidden) // qkv_proj
		add("self_attn.v_proj.weight", reshard.F32, 0, kvDim, hidden) // qkv_proj
		add("self_attn.o_proj.weight", reshard.F32, 1, hidden, qDim)
		add("mlp.gate_proj.weight", reshard.F32, 0, ffn, hidden) // gate_up_proj
		add("mlp.up_proj.weight", reshard.F32, 0, ffn, hidden)   // gate_up_proj
		add("mlp.down_proj.weight", reshard.F32, 1, hidden, ffn)
		add("input_layernorm.weight", reshard.BF16, -1, hidden)
		add("post_attention_layernorm.weight", reshard.BF16, -1, hidden)
	}
	return ts
}

// value is element g (row-major index in the whole tensor) of tensor number
// t (from 1) in generation gen: exact in f32, and in bf16 for the norms.
func value(t int, g int64, gen int, dtype reshard.DType) float64 {
	if dtype == reshard.BF16 {
		return float64((g + int64(7*gen+t)) % 256)
	}
	return float64(int64(gen)*1048576 + int64(t)*16384 + g)
}

// eachElement calls f(local, global) for every element of the box (offset,
// extent) of a tensor of shape, both row-major indices from 0.
func eachElement(shape, offset, extent []int64, f func(local, global int64)) {
	idx := make([]int64, len(shape))
	for _, e := range extent {
		if e == 0 {
			return
		}
	}
	for n := int64(0); ; n++ {
		g := int64(0)
		for d := range shape {
			g = g*shape[d] + offset[d] + idx[d]
		}
		f(n, g)
		d := len(shape) - 1
		for ; d >= 0; d-- {
			idx[d]++
			if idx[d] < extent[d] {
				break
			}
			idx[d] = 0
		}
		if d < 0 {
			return
		}
	}
}

// side is one mesh and how it places each tensor, its tensors packed back
// to back in one buffer per rank.
type side struct {
	mesh    reshard.Mesh
	place   [][]reshard.Placement // per tensor
	offsets []int64               // byte offset of each tensor in the buffer
	bytes   int64                 // bytes of the buffer of each rank
}

func newSide(mesh reshard.Mesh, ts []tensor) (*side, error) {
	s := &side{mesh: mesh}
	for _, t := range ts {
		byName := map[string]reshard.Placement{}
		if t.split >= 0 {
			byName["tp"] = reshard.Shard(t.split)
		}
		pl, err := mesh.Placements(byName)
		if err != nil {
			return nil, err
		}
		numel := int64(-1)
		for _, rank := range mesh.Ranks { // the same on every rank (even splits)
			n, err := mesh.LocalNumel(t.shape, pl, rank)
			if err != nil {
				return nil, err
			}
			if numel >= 0 && n != numel {
				return nil, fmt.Errorf("uneven shards in %s", t.name)
			}
			numel = n
		}
		s.place = append(s.place, pl)
		s.offsets = append(s.offsets, s.bytes)
		s.bytes += numel * t.dtype.Size()
	}
	return s, nil
}

// Result is what run found.
type Result struct {
	All     reshard.Stats // the plan's figures over all ranks
	DstSize int64         // destination bytes over all inference ranks
	Checked []int64       // elements checked, per execution
	Wrong   []int64       // elements wrong, per execution
}

func run(w io.Writer) (res Result, err error) {
	ts := model()
	ctx, err := reshard.NewLocalContext(8)
	if err != nil {
		return res, err
	}
	defer ctx.Close()
	if err := ctx.SetDomainSize(4); err != nil { // {0..3} trainers, {4..7} inference
		return res, err
	}

	trainer := reshard.Mesh{Shape: []int64{2, 2}, Ranks: []int{0, 1, 2, 3}, Names: []string{"dp", "tp"}}
	infer := reshard.Mesh{Shape: []int64{4}, Ranks: []int{4, 5, 6, 7}, Names: []string{"tp"}}
	tr, err := newSide(trainer, ts)
	if err != nil {
		return res, err
	}
	in, err := newSide(infer, ts)
	if err != nil {
		return res, err
	}

	src, err := ctx.NewLayout()
	if err != nil {
		return res, err
	}
	defer src.Close()
	dst, err := ctx.NewLayout()
	if err != nil {
		return res, err
	}
	defer dst.Close()
	for i, t := range ts {
		for _, l := range []*reshard.Layout{src, dst} {
			if err := l.AddTensor(t.name, t.dtype, t.shape); err != nil {
				return res, err
			}
		}
		if err := src.AddDTensor(t.name, trainer, tr.place[i], 0, tr.offsets[i]); err != nil {
			return res, err
		}
		if err := dst.AddDTensor(t.name, infer, in.place[i], 0, in.offsets[i]); err != nil {
			return res, err
		}
	}

	plan, err := reshard.NewPlan(src, dst)
	if err != nil {
		return res, err
	}
	defer plan.Close()
	if res.All, err = plan.Stats(reshard.AllRanks); err != nil {
		return res, err
	}
	res.DstSize = in.bytes * int64(len(infer.Ranks))
	fmt.Fprintf(w, "libreshard %s, Go binding: %d tensors, %d moves, %d round(s)\n",
		reshard.Version(), len(ts), res.All.Moves, res.All.Rounds)
	fmt.Fprintf(w, "  bytes inside domains: %d, across domains: %d, local: %d; %d destination bytes\n",
		res.All.BytesSentIntra, res.All.BytesSentInter, res.All.BytesLocal, res.DstSize)
	for _, rank := range infer.Ranks {
		s, err := plan.Stats(rank)
		if err != nil {
			return res, err
		}
		fmt.Fprintf(w, "  rank %d receives %d bytes across domains, %d inside\n",
			rank, s.BytesRecvInter, s.BytesRecvIntra)
	}

	sbuf := map[int]*reshard.Buffer{}
	dbuf := map[int]*reshard.Buffer{}
	for _, rank := range trainer.Ranks {
		if sbuf[rank], err = reshard.NewBuffer(tr.bytes); err != nil {
			return res, err
		}
		defer sbuf[rank].Close()
		if err := plan.Bind(reshard.Src, rank, 0, sbuf[rank]); err != nil {
			return res, err
		}
	}
	for _, rank := range infer.Ranks {
		if dbuf[rank], err = reshard.NewBuffer(in.bytes); err != nil {
			return res, err
		}
		defer dbuf[rank].Close()
		if err := plan.Bind(reshard.Dst, rank, 0, dbuf[rank]); err != nil {
			return res, err
		}
	}

	// fill writes generation gen of the weights into the trainer buffers:
	// f32 through a []float32 view, bf16 element by element (rounded by
	// libreshard's converter).
	fill := func(gen int) error {
		for _, rank := range trainer.Ranks {
			b := sbuf[rank]
			f32 := reshard.View[float32](b)
			for i, t := range ts {
				off, ext, err := trainer.LocalBox(t.shape, tr.place[i], rank)
				if err != nil {
					return err
				}
				base := tr.offsets[i] / t.dtype.Size()
				eachElement(t.shape, off, ext, func(n, g int64) {
					v := value(i+1, g, gen, t.dtype)
					if t.dtype == reshard.F32 {
						f32[base+n] = float32(v)
					} else if e := b.SetFloat(t.dtype, base+n, v); e != nil && err == nil {
						err = e
					}
				})
				if err != nil {
					return err
				}
			}
		}
		return nil
	}

	verify := func(gen int) (checked, bad int64, err error) {
		for _, rank := range infer.Ranks {
			b := dbuf[rank]
			f32 := reshard.View[float32](b)
			for i, t := range ts {
				off, ext, err := infer.LocalBox(t.shape, in.place[i], rank)
				if err != nil {
					return 0, 0, err
				}
				base := in.offsets[i] / t.dtype.Size()
				eachElement(t.shape, off, ext, func(n, g int64) {
					checked++
					var got float64
					if t.dtype == reshard.F32 {
						got = float64(f32[base+n])
					} else if got, err = b.Float(t.dtype, base+n); err != nil {
						return
					}
					if got != value(i+1, g, gen, t.dtype) {
						if bad < 5 {
							fmt.Fprintf(w, "  WRONG: rank %d %s element %d\n", rank, t.name, g)
						}
						bad++
					}
				})
				if err != nil {
					return 0, 0, err
				}
			}
		}
		return checked, bad, nil
	}

	for gen := 0; gen < 2; gen++ {
		for _, rank := range infer.Ranks {
			dbuf[rank].Fill(0xff)
		}
		if err := fill(gen); err != nil {
			return res, err
		}
		if err := plan.Execute(); err != nil {
			return res, err
		}
		checked, bad, err := verify(gen)
		if err != nil {
			return res, err
		}
		res.Checked = append(res.Checked, checked)
		res.Wrong = append(res.Wrong, bad)
		verdict := "bit-exact"
		if bad != 0 {
			verdict = fmt.Sprintf("%d WRONG", bad)
		}
		fmt.Fprintf(w, "  execution %d: %d elements checked, %s\n", gen+1, checked, verdict)
	}
	return res, nil
}

func main() {
	res, err := run(os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for i := range res.Checked {
		if res.Wrong[i] != 0 || res.Checked[i] == 0 {
			os.Exit(1)
		}
	}
}
