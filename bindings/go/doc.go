// SPDX-License-Identifier: Apache-2.0

// Package reshard is the Go binding of libreshard, which moves model weights
// from one distributed layout straight into another (trainer TP/PP/DP
// shards into inference TP/DP shards, say), sending every destination shard
// exactly the boxes it needs.
//
// The flow is the C API's, with Go types, (value, error) results and Close
// methods:
//
//	ctx, err := reshard.NewLocalContext(5) // or NewMPIContext, NewNCCLContextFromID, ...
//	defer ctx.Close()
//	src, _ := ctx.NewLayout()
//	dst, _ := ctx.NewLayout()
//	src.AddTensor("w", reshard.F32, []int64{6, 9})
//	dst.AddTensor("w", reshard.F32, []int64{6, 9})
//	src.AddDTensor("w", reshard.NewMesh(0, 2), []reshard.Placement{reshard.Shard(0)}, 0, 0)
//	dst.AddDTensor("w", reshard.NewMesh(2, 3), []reshard.Placement{reshard.Shard(1)}, 0, 0)
//	plan, err := reshard.NewPlan(src, dst)
//	defer plan.Close()
//	buf, _ := reshard.NewBuffer(3 * 9 * 4) // C memory
//	plan.Bind(reshard.Src, 0, 0, buf)      // ... one per rank and side
//	err = plan.Execute()
//
// # Errors
//
// Every fallible call returns an error that is an *Error: the status
// (StatusTimeout, ...), its name ("RS_ERR_TIMEOUT") and libreshard's
// detailed message, copied in the C call that failed. Use errors.Is with
// the Err* values (ErrTimeout, ErrNotCovered, ...) to test the kind, and
// errors.As to read the fields. A call on a closed object gives an *Error
// of status StatusNullPointer that wraps ErrClosed.
//
// # Memory and cgo
//
// cgo forbids C to keep a pointer to Go memory after a call returns, and a
// plan keeps the address of every buffer bound to it. So the memory a plan
// is bound to is C memory: NewBuffer allocates it, Bytes and View[T] give
// slices over it, and Plan.Bind binds it. The plan keeps every Buffer bound
// to it: closing a bound Buffer frees its memory only once no plan is bound
// to it. Memory the program gets elsewhere (CUDA device memory, memory of a
// framework) is bound by address with Plan.BindAddress; it must never be Go
// memory.
//
// The slices of a Buffer do not keep the Buffer alive: keep the Buffer
// reachable while you use them (Close it, or call runtime.KeepAlive, after
// the last use).
//
// # Lifetimes
//
// Close frees what an object holds; closing twice, or a nil object, does
// nothing. Objects may be closed in any order: a Layout or Plan keeps its
// Context's C object alive (libreshard counts references), and the Go
// objects keep references to what they use. A finalizer closes what the program forgot to close,
// as a safety net: it frees each C object once, never twice. Close
// explicitly all the same. On MPI contexts finalizers free nothing (freeing
// may call MPI, which must happen on the MPI thread, in step with the other
// ranks): Close each Plan, Layout and Context of an MPI context yourself,
// from the goroutine that makes the MPI calls, before MPI_Finalize.
//
// # Goroutines
//
// A Context and the Layouts and Plans made from it share one lock: their
// methods may be called from several goroutines, and run one at a time
// (as the C API requires). Context.Abort is the exception: it does not
// take the lock, so it ends a Plan.Wait or Plan.Execute running on another
// goroutine. Distinct contexts are independent. MPI is called only from
// the goroutine making the call: with MPI_THREAD_FUNNELED or less, lock
// that goroutine to its thread (runtime.LockOSThread) and make every call
// from it.
//
// # Building
//
// The package is built by cgo against libreshard, and `go build` runs SWIG
// (4.0 or later) itself on internal/rsw/rsw.swig, which includes the one
// interface of every language binding, swig/reshard.i. Point cgo at a
// build or an installation of libreshard:
//
//	CGO_LDFLAGS="-L$BUILD/lib -Wl,-rpath,$BUILD/lib" go test ./...
//
// or, with the library installed where pkg-config finds reshard.pc, build
// with -tags reshard_pkgconfig. See README.md.
package reshard
