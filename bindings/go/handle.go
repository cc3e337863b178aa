// SPDX-License-Identifier: Apache-2.0

package reshard

import (
	"math"
	"strings"
	"sync"
	"sync/atomic"

	"libreshard.dev/reshard/internal/rsw"
)

// ctxState is what a Context and every Layout and Plan made from it share:
// the lock that serializes their C calls (the C API lets one thread at a
// time use a context and its handles; finalizers run on another
// goroutine), and the context handle for Abort.
type ctxState struct {
	mu sync.Mutex // held during every C call on the context's handles

	abortMu sync.Mutex // guards ctx against Close racing Abort
	ctx     uintptr    // the rs_context of the Context; 0 once it is closed

	// mpi: finalizers leave the C objects alone. Freeing them may call MPI
	// (MPI_Comm_free, MPI_Request_free), which must not happen on the
	// finalizer's thread at a moment no rank agreed on.
	mpi bool
}

// live counts the C objects this package holds, by kind (tests read it to
// see that finalizers free each once).
var live struct {
	contexts, layouts, plans, buffers atomic.Int64
	models, recipes                   atomic.Int64 // recipes.h, since 0.6
}

// newResult allocates the rsw_result of one call.
func newResult(op string) (rsw.Rsw_result, error) {
	r := rsw.Rsw_result_new()
	if r.Swigcptr() == 0 {
		return nil, newError(op, StatusNoMemory, "out of memory")
	}
	return r, nil
}

// withResult runs f with a fresh result and returns the value the result
// holds, or f's own error, else the one the result records.
func withResult(op string, f func(r rsw.Rsw_result) error) (int64, error) {
	r, err := newResult(op)
	if err != nil {
		return 0, err
	}
	defer rsw.Rsw_result_free(r)
	if err := f(r); err != nil {
		return 0, err
	}
	if err := resultError(op, r); err != nil {
		return 0, err
	}
	return r.GetValue(), nil
}

// resultError is nil when r holds RS_OK, else the *Error it records.
func resultError(op string, r rsw.Rsw_result) error {
	st := r.GetStatus()
	if st == 0 {
		return nil
	}
	return &Error{Op: op, Status: Status(st), Name: r.GetName(),
		Message: r.GetMessage()}
}

// newInts copies xs into a C vector; nil xs gives a NULL vector.
func newInts(op string, xs []int64) (rsw.Struct_SS_rsw_ints, error) {
	if xs == nil {
		return rsw.SwigcptrStruct_SS_rsw_ints(0), nil
	}
	v := rsw.Rsw_ints_new()
	if v.Swigcptr() == 0 {
		return nil, newError(op, StatusNoMemory, "out of memory")
	}
	for _, x := range xs {
		if rsw.Rsw_ints_push(v, x) != 0 {
			rsw.Rsw_ints_free(v)
			return nil, newError(op, StatusNoMemory, "out of memory")
		}
	}
	return v, nil
}

// newIntsList makes one vector per list; a nil list makes an empty vector.
func newIntsList(op string, lists ...[]int64) ([]rsw.Struct_SS_rsw_ints, error) {
	vs := make([]rsw.Struct_SS_rsw_ints, 0, len(lists))
	for _, l := range lists {
		if l == nil {
			l = []int64{}
		}
		v, err := newInts(op, l)
		if err != nil {
			freeInts(vs...)
			return nil, err
		}
		vs = append(vs, v)
	}
	return vs, nil
}

func freeInts(vs ...rsw.Struct_SS_rsw_ints) {
	for _, v := range vs {
		if v != nil && v.Swigcptr() != 0 {
			rsw.Rsw_ints_free(v)
		}
	}
}

func intsSlice(v rsw.Struct_SS_rsw_ints) []int64 {
	out := make([]int64, rsw.Rsw_ints_len(v))
	for i := range out {
		out[i] = rsw.Rsw_ints_get(v, int64(i))
	}
	return out
}

func fitsInt32(x int64) bool { return x >= math.MinInt32 && x <= math.MaxInt32 }

// cInts checks that each value fits a C int (SWIG would truncate it).
func cInts(op string, what []string, xs ...int) error {
	for i, x := range xs {
		if !fitsInt32(int64(x)) {
			return newError(op, StatusInvalidArgument,
				"%s %d does not fit a C int", what[i], x)
		}
	}
	return nil
}

// cName refuses names C would cut short.
func cName(op, name string) error {
	if i := strings.IndexByte(name, 0); i >= 0 {
		return newError(op, StatusInvalidArgument,
			"name %q holds a NUL byte at byte %d", name, i)
	}
	return nil
}
