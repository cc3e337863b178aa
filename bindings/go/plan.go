// SPDX-License-Identifier: Apache-2.0

package reshard

import (
	"runtime"

	"libreshard.dev/reshard/internal/rsw"
)

// Plan is what moves from where to where, in which rounds: computed once
// from two layouts, executed as often as the source changes. It keeps its
// Context, and every Buffer bound to it, alive.
type Plan struct {
	s        *ctxState
	ctx      *Context
	h        rsw.Struct_SS_rs_plan // nil once closed
	bound    map[binding]*Buffer   // the Buffers bound, kept from Close
	inFlight bool                  // ExecuteAsync started, Test/Wait not done
}

type binding struct{ side, rank, buffer int }

// NewPlan computes the plan that turns layout src into layout dst (of the
// same context). The plan copies what it needs: the layouts may be closed
// afterwards.
func NewPlan(src, dst *Layout) (*Plan, error) {
	const op = "NewPlan"
	if src == nil || dst == nil {
		return nil, newError(op, StatusNullPointer, "a layout is nil")
	}
	if src.s != dst.s {
		return nil, newError(op, StatusWrongContext,
			"the layouts belong to different contexts")
	}
	var p *Plan
	_, err := src.do(op, func(r rsw.Rsw_result, hs rsw.Struct_SS_rs_layout) error {
		if dst.h == nil {
			return closedError(op, "destination layout")
		}
		rsw.Rsw_plan_create(r, hs, dst.h)
		if r.GetStatus() == 0 {
			live.plans.Add(1)
			p = &Plan{s: src.s, ctx: src.ctx,
				h: rsw.Rsw_result_plan(r), bound: map[binding]*Buffer{}}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	runtime.SetFinalizer(p, (*Plan).finalize)
	return p, nil
}

// Context is the context the plan was made on.
func (p *Plan) Context() *Context { return p.ctx }

func (p *Plan) do(op string, f func(r rsw.Rsw_result, h rsw.Struct_SS_rs_plan) error) (int64, error) {
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	if p.h == nil {
		return 0, closedError(op, "plan")
	}
	return withResult(op, func(r rsw.Rsw_result) error { return f(r, p.h) })
}

// Stat reads one figure of rank; rank AllRanks sums over ranks (Rounds and
// StagingBytes: the maximum).
func (p *Plan) Stat(rank int, s Stat) (int64, error) {
	const op = "Plan.Stat"
	if err := cInts(op, []string{"rank", "figure"}, rank, int(s)); err != nil {
		return 0, err
	}
	return p.do(op, func(r rsw.Rsw_result, h rsw.Struct_SS_rs_plan) error {
		rsw.Rsw_plan_stat(r, h, rank, int(s))
		return nil
	})
}

// Stats reads every figure of rank, or of all ranks with AllRanks.
func (p *Plan) Stats(rank int) (Stats, error) {
	var st Stats
	fields := []struct {
		s Stat
		v *int64
	}{
		{StatBytesSentIntra, &st.BytesSentIntra}, {StatBytesSentInter, &st.BytesSentInter},
		{StatBytesRecvIntra, &st.BytesRecvIntra}, {StatBytesRecvInter, &st.BytesRecvInter},
		{StatBytesLocal, &st.BytesLocal}, {StatMessagesSent, &st.MessagesSent},
		{StatMessagesRecv, &st.MessagesRecv}, {StatRounds, &st.Rounds},
		{StatStagingBytes, &st.StagingBytes}, {StatMoves, &st.Moves},
		{StatConvertedSending, &st.ConvertedSending},
		{StatConvertedReceiving, &st.ConvertedReceiving},
		{StatBytesCopiedFromRelay, &st.BytesCopiedFromRelay},
		{StatBytesPacked, &st.BytesPacked},
		{StatBytesUnpacked, &st.BytesUnpacked},
	}
	for _, f := range fields {
		v, err := p.Stat(rank, f.s)
		if err != nil {
			if e, ok := err.(*Error); ok {
				e.Op = "Plan.Stats"
			}
			return Stats{}, err
		}
		*f.v = v
	}
	return st, nil
}

// NumMoves is the number of moves (box copies) of the plan.
func (p *Plan) NumMoves() (int64, error) {
	return p.do("Plan.NumMoves", func(r rsw.Rsw_result, h rsw.Struct_SS_rs_plan) error {
		rsw.Rsw_plan_num_moves(r, h)
		return nil
	})
}

// NumTensors is the number of tensors the plan moves.
func (p *Plan) NumTensors() (int, error) {
	n, err := p.do("Plan.NumTensors", func(r rsw.Rsw_result, h rsw.Struct_SS_rs_plan) error {
		rsw.Rsw_plan_num_tensors(r, h)
		return nil
	})
	return int(n), err
}

// Fingerprint is a 64-bit fingerprint of everything the plan was computed
// from; ranks that agree on it compute the same plan.
func (p *Plan) Fingerprint() (uint64, error) {
	v, err := p.do("Plan.Fingerprint", func(r rsw.Rsw_result, h rsw.Struct_SS_rs_plan) error {
		rsw.Rsw_plan_fingerprint(r, h)
		return nil
	})
	return uint64(v), err
}

// JSON is the whole plan as JSON: tensors, per-rank figures, every move
// with its box, ranks, route and round.
func (p *Plan) JSON() (string, error) {
	var s string
	_, err := p.do("Plan.JSON", func(r rsw.Rsw_result, h rsw.Struct_SS_rs_plan) error {
		s = rsw.Rsw_plan_to_json(r, h)
		return nil
	})
	if err != nil {
		return "", err
	}
	return s, nil
}

// Bind tells the plan that buffer number buffer of rank on side lives in
// b. A later bind of the same (side, rank, buffer) replaces this one. The
// plan keeps b (and its memory) until then, or until the plan is closed.
func (p *Plan) Bind(side Side, rank, buffer int, b *Buffer) error {
	const op = "Plan.Bind"
	if err := cInts(op, []string{"side", "rank", "buffer"}, int(side), rank, buffer); err != nil {
		return err
	}
	if b == nil {
		return newError(op, StatusNullPointer, "no buffer")
	}
	if !b.pin() {
		return closedError(op, "buffer")
	}
	key := binding{int(side), rank, buffer}
	_, err := p.do(op, func(r rsw.Rsw_result, h rsw.Struct_SS_rs_plan) error {
		rsw.Rsw_plan_bind_buffer(r, h, int(side), rank, buffer, b.h)
		if r.GetStatus() == 0 {
			p.rebind(key, b)
			b = nil // kept by the plan
		}
		return nil
	})
	if b != nil {
		b.unpin()
	}
	return err
}

// BindAddress binds memory the caller manages, by address: bytes bytes at
// addr, of the given kind (MemoryCUDA on device for GPU contexts), for
// memory of a framework such as CUDA device memory. The memory must stay
// valid while the plan is bound to it and executes, and must not be Go
// memory (cgo pointer rules): use Bind with a Buffer for host memory.
func (p *Plan) BindAddress(side Side, rank, buffer int, addr uintptr, bytes int64, memory Memory, device int) error {
	const op = "Plan.BindAddress"
	if err := cInts(op, []string{"side", "rank", "buffer", "memory kind", "device"},
		int(side), rank, buffer, int(memory), device); err != nil {
		return err
	}
	if bytes < 0 {
		return newError(op, StatusInvalidArgument, "%d bytes", bytes)
	}
	key := binding{int(side), rank, buffer}
	_, err := p.do(op, func(r rsw.Rsw_result, h rsw.Struct_SS_rs_plan) error {
		rsw.Rsw_plan_bind(r, h, int(side), rank, buffer, uint64(addr), uint64(bytes), int(memory), device)
		if r.GetStatus() == 0 {
			p.rebind(key, nil)
		}
		return nil
	})
	return err
}

// rebind records what is bound at key, letting go of what was; s.mu held.
func (p *Plan) rebind(key binding, b *Buffer) {
	if old := p.bound[key]; old != nil {
		old.unpin()
	}
	if b == nil {
		delete(p.bound, key)
	} else {
		p.bound[key] = b
	}
}

// Execute moves the bytes: afterwards every destination shard holds its
// box of the source tensors, bit-exact. It may run again after the source
// changed, without planning again.
func (p *Plan) Execute() error {
	_, err := p.do("Plan.Execute", func(r rsw.Rsw_result, h rsw.Struct_SS_rs_plan) error {
		rsw.Rsw_plan_execute(r, h)
		return nil
	})
	return err
}

// ExecuteAsync starts an execution and returns without waiting for it:
// queue is where a GPU transport orders the work (a cudaStream_t; 0 for
// host contexts). Then call Test or Wait until it ended; the bound buffers
// must not change until then.
func (p *Plan) ExecuteAsync(queue uintptr) error {
	_, err := p.do("Plan.ExecuteAsync", func(r rsw.Rsw_result, h rsw.Struct_SS_rs_plan) error {
		rsw.Rsw_plan_execute_async(r, h, uint64(queue))
		p.inFlight = r.GetStatus() == 0
		return nil
	})
	return err
}

// Test advances the execution in flight without waiting: true once it
// ended, with its error; false while it goes on.
func (p *Plan) Test() (bool, error) {
	done := true
	_, err := p.do("Plan.Test", func(r rsw.Rsw_result, h rsw.Struct_SS_rs_plan) error {
		rsw.Rsw_plan_test(r, h)
		done = r.GetStatus() != 0 || r.GetValue() != 0
		if done {
			p.inFlight = false
		}
		return nil
	})
	return done, err
}

// Wait advances the execution in flight until it ended, and returns its
// error; with none in flight, the error of the last one.
func (p *Plan) Wait() error {
	_, err := p.do("Plan.Wait", func(r rsw.Rsw_result, h rsw.Struct_SS_rs_plan) error {
		rsw.Rsw_plan_wait(r, h)
		p.inFlight = false
		return nil
	})
	return err
}

// Close frees the plan, first waiting for an execution in flight, and lets
// go of its Buffers. Closing twice does nothing.
func (p *Plan) Close() error {
	if p == nil {
		return nil
	}
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	if p.h == nil {
		return nil
	}
	runtime.SetFinalizer(p, nil)
	var err error
	if p.inFlight {
		if r, e := newResult("Plan.Close"); e != nil {
			err = e
		} else {
			rsw.Rsw_plan_wait(r, p.h)
			err = resultError("Plan.Close", r)
			rsw.Rsw_result_free(r)
		}
		p.inFlight = false
	}
	rsw.Rsw_plan_destroy(p.h)
	p.h = nil
	live.plans.Add(-1)
	for k, b := range p.bound {
		b.unpin()
		delete(p.bound, k)
	}
	return err
}

func (p *Plan) finalize() {
	if !p.s.mpi {
		go p.Close()
	}
}
