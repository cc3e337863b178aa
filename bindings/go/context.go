// SPDX-License-Identifier: Apache-2.0

package reshard

import (
	"runtime"

	"libreshard.dev/reshard/internal/rsw"
)

// Context says who takes part (world size, domains), holds the settings and
// drives a transport. Layouts and plans made from it keep the C context
// alive, so Close may come before theirs.
//
// A Context, its Layouts and its Plans serialize their calls on one lock:
// they may be used from several goroutines, one call at a time; Abort alone
// does not wait for that lock.
type Context struct {
	s         *ctxState
	h         rsw.Struct_SS_rs_context // nil once closed
	world     int
	rank      int
	transport Transport
}

type contextMaker func(r rsw.Rsw_result)

func newContext(op string, create contextMaker) (*Context, error) {
	r, err := newResult(op)
	if err != nil {
		return nil, err
	}
	defer rsw.Rsw_result_free(r)
	create(r)
	if err := resultError(op, r); err != nil {
		return nil, err
	}
	h := rsw.Rsw_result_context(r)
	live.contexts.Add(1)
	c := &Context{s: &ctxState{ctx: h.Swigcptr()}, h: h}
	runtime.SetFinalizer(c, (*Context).finalize)
	rsw.Rsw_context_world_size(r, h)
	c.world = int(r.GetValue())
	rsw.Rsw_context_rank(r, h)
	c.rank = int(r.GetValue())
	rsw.Rsw_context_transport(r, h)
	c.transport = Transport(r.GetValue())
	c.s.mpi = c.transport == TransportMPI
	return c, nil
}

// NewLocalContext makes a context whose world ranks all live in this
// process (the in-process transport); each rank starts in its own domain.
func NewLocalContext(world int) (*Context, error) {
	const op = "NewLocalContext"
	if err := cInts(op, []string{"world size"}, world); err != nil {
		return nil, err
	}
	return newContext(op, func(r rsw.Rsw_result) {
		rsw.Rsw_context_create_local(r, world)
	})
}

// NewMPIContext makes a context over an MPI communicator given by its
// Fortran handle (MPI_Comm_c2f; mpi4py's comm.py2f()). libreshard never
// calls MPI_Init; it calls MPI from the calling thread only, so with
// MPI_THREAD_FUNNELED or less call runtime.LockOSThread first and make
// every call on this context from that goroutine. Close the context and
// its layouts and plans explicitly, before MPI_Finalize: on an MPI context
// finalizers free nothing, since freeing may call MPI.
func NewMPIContext(fcomm int64) (*Context, error) {
	return newContext("NewMPIContext", func(r rsw.Rsw_result) {
		rsw.Rsw_context_create_mpi(r, fcomm)
	})
}

// NCCLUniqueID makes an NCCL unique id (NCCLUniqueIDBytes bytes) on one
// rank, to be sent to the others by any means for NewNCCLContextFromID.
func NCCLUniqueID() ([]byte, error) {
	const op = "NCCLUniqueID"
	b, err := NewBuffer(int64(NCCLUniqueIDBytes))
	if err != nil {
		return nil, err
	}
	defer b.Close()
	r, err := newResult(op)
	if err != nil {
		return nil, err
	}
	defer rsw.Rsw_result_free(r)
	rsw.Rsw_nccl_unique_id(r, b.h)
	if err := resultError(op, r); err != nil {
		return nil, err
	}
	return append([]byte(nil), b.Bytes()...), nil
}

// NewNCCLContextFromID makes an NCCL context from a unique id, on every
// rank of world, this one being rank, on CUDA device device; the context
// owns the communicators it makes.
func NewNCCLContextFromID(id []byte, rank, world, device int) (*Context, error) {
	const op = "NewNCCLContextFromID"
	if err := cInts(op, []string{"rank", "world size", "device"}, rank, world, device); err != nil {
		return nil, err
	}
	b, err := NewBuffer(int64(len(id)))
	if err != nil {
		return nil, err
	}
	defer b.Close()
	copy(b.Bytes(), id)
	return newContext(op, func(r rsw.Rsw_result) {
		rsw.Rsw_context_create_nccl_id(r, b.h, rank, world, device)
	})
}

// NewNCCLContextFromComm makes an NCCL context from an ncclComm_t the
// caller already has (its address): the context splits its own
// communicators from it and never destroys comm.
func NewNCCLContextFromComm(comm uintptr) (*Context, error) {
	return newContext("NewNCCLContextFromComm", func(r rsw.Rsw_result) {
		rsw.Rsw_context_create_nccl_comm(r, uint64(comm))
	})
}

// NewNCCLContextDevices makes an NCCL context whose ranks all live in this
// process, rank i on CUDA device devices[i].
func NewNCCLContextDevices(devices []int) (*Context, error) {
	const op = "NewNCCLContextDevices"
	ds := make([]int64, len(devices))
	for i, d := range devices {
		ds[i] = int64(d)
	}
	v, err := newInts(op, ds)
	if err != nil {
		return nil, err
	}
	if v.Swigcptr() == 0 { // nil devices: an empty list
		if v, err = newInts(op, []int64{}); err != nil {
			return nil, err
		}
	}
	defer freeInts(v)
	return newContext(op, func(r rsw.Rsw_result) {
		rsw.Rsw_context_create_nccl_devices(r, v)
	})
}

// WorldSize is the number of ranks.
func (c *Context) WorldSize() int { return c.world }

// Rank is this process's rank, or AllRanks for a context that drives every
// rank itself.
func (c *Context) Rank() int { return c.rank }

// Transport is what the context drives.
func (c *Context) Transport() Transport { return c.transport }

// do runs f with the context's lock held and a fresh result, and returns
// the error the result records.
func (c *Context) do(op string, f func(r rsw.Rsw_result, h rsw.Struct_SS_rs_context)) (int64, error) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	if c.h == nil {
		return 0, closedError(op, "context")
	}
	return withResult(op, func(r rsw.Rsw_result) error {
		f(r, c.h)
		return nil
	})
}

// SetDomain puts rank in domain (any integer >= 0 naming a set of ranks
// with a fast fabric between them). Plans made afterwards use it.
func (c *Context) SetDomain(rank, domain int) error {
	const op = "Context.SetDomain"
	if err := cInts(op, []string{"rank", "domain"}, rank, domain); err != nil {
		return err
	}
	_, err := c.do(op, func(r rsw.Rsw_result, h rsw.Struct_SS_rs_context) {
		rsw.Rsw_context_set_domain(r, h, rank, domain)
	})
	return err
}

// Domain is the domain of rank.
func (c *Context) Domain(rank int) (int, error) {
	const op = "Context.Domain"
	if err := cInts(op, []string{"rank"}, rank); err != nil {
		return 0, err
	}
	v, err := c.do(op, func(r rsw.Rsw_result, h rsw.Struct_SS_rs_context) {
		rsw.Rsw_context_get_domain(r, h, rank)
	})
	return int(v), err
}

// SetDomainSize groups consecutive ranks into domains of ranksPerDomain
// (rank r in domain r / ranksPerDomain), as launchers place ranks on hosts.
func (c *Context) SetDomainSize(ranksPerDomain int) error {
	const op = "Context.SetDomainSize"
	if err := cInts(op, []string{"domain size"}, ranksPerDomain); err != nil {
		return err
	}
	_, err := c.do(op, func(r rsw.Rsw_result, h rsw.Struct_SS_rs_context) {
		rsw.Rsw_context_set_domain_size(r, h, ranksPerDomain)
	})
	return err
}

// SetParam sets a parameter; a value outside its bounds gives
// ErrBadParam and leaves it unchanged.
func (c *Context) SetParam(p Param, value int64) error {
	const op = "Context.SetParam"
	if err := cInts(op, []string{"parameter"}, int(p)); err != nil {
		return err
	}
	_, err := c.do(op, func(r rsw.Rsw_result, h rsw.Struct_SS_rs_context) {
		rsw.Rsw_context_set_param(r, h, int(p), value)
	})
	return err
}

// Param reads a parameter.
func (c *Context) Param(p Param) (int64, error) {
	const op = "Context.Param"
	if err := cInts(op, []string{"parameter"}, int(p)); err != nil {
		return 0, err
	}
	return c.do(op, func(r rsw.Rsw_result, h rsw.Struct_SS_rs_context) {
		rsw.Rsw_context_get_param(r, h, int(p))
	})
}

// NewLayout makes an empty layout on the context.
func (c *Context) NewLayout() (*Layout, error) {
	const op = "Context.NewLayout"
	var l *Layout
	_, err := c.do(op, func(r rsw.Rsw_result, h rsw.Struct_SS_rs_context) {
		rsw.Rsw_layout_create(r, h)
		if r.GetStatus() == 0 {
			live.layouts.Add(1)
			l = &Layout{s: c.s, ctx: c,
				h: rsw.Rsw_result_layout(r), ndim: map[string]int{}}
		}
	})
	if err != nil {
		return nil, err
	}
	runtime.SetFinalizer(l, (*Layout).finalize)
	return l, nil
}

// Abort makes the execution in flight on the context (or the next one)
// fail at once with ErrTransport; the context is then done. It may be
// called from any goroutine, while another waits in Plan.Wait or
// Plan.Execute. After Close it does nothing.
func (c *Context) Abort() {
	c.s.abortMu.Lock()
	defer c.s.abortMu.Unlock()
	if c.s.ctx != 0 {
		rsw.Rsw_context_abort(rsw.SwigcptrStruct_SS_rs_context(c.s.ctx))
	}
}

// Close drops the context; its C object is freed once no layout or plan
// made from it remains. Closing twice does nothing.
func (c *Context) Close() error {
	if c == nil {
		return nil
	}
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	if c.h == nil {
		return nil
	}
	runtime.SetFinalizer(c, nil)
	c.s.abortMu.Lock()
	c.s.ctx = 0
	rsw.Rsw_context_destroy(c.h)
	c.s.abortMu.Unlock()
	c.h = nil
	live.contexts.Add(-1)
	return nil
}

// finalize closes a context the program dropped, on a goroutine of its own
// so that the finalizer goroutine never waits for the context's lock (MPI
// contexts: see ctxState.mpi).
func (c *Context) finalize() {
	if !c.s.mpi {
		go c.Close()
	}
}
