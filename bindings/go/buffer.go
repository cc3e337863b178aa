// SPDX-License-Identifier: Apache-2.0

package reshard

import (
	"runtime"
	"sync"
	"unsafe"

	"libreshard.dev/reshard/internal/rsw"
)

// Buffer is host memory allocated by C (64-byte aligned, zeroed), the
// memory a plan may be bound to: cgo forbids C to keep Go pointers after a
// call, and a plan keeps the address of what it is bound to.
//
// Bytes and View give slices over the C memory itself. They are valid until
// Close, and only while the Buffer is reachable: if the Buffer is garbage
// collected, its finalizer frees the memory. Close it (or call
// runtime.KeepAlive on it) after the last use of a slice.
//
// A plan keeps every Buffer bound to it: Close on a bound Buffer invalidates
// its slices at once but frees the memory only when no plan is bound to it
// any more (the plan closed, or the binding replaced).
type Buffer struct {
	mu     sync.Mutex
	h      rsw.Struct_SS_rsw_buffer // nil once the memory is freed
	p      unsafe.Pointer
	n      int64
	closed bool // Close was called
	pins   int  // bindings of plans to this buffer
}

// cPointer turns the address of C memory into a pointer. The memory is
// never Go's, so the conversion is safe; it is written as a reinterpretation
// because vet cannot tell a C address from a Go one.
func cPointer(addr uint64) unsafe.Pointer {
	a := uintptr(addr)
	return *(*unsafe.Pointer)(unsafe.Pointer(&a))
}

// cBytes is a view of the bytes of an rsw_buffer.
func cBytes(b rsw.Struct_SS_rsw_buffer) []byte {
	n := rsw.Rsw_buffer_size(b)
	if n == 0 {
		return []byte{}
	}
	return unsafe.Slice((*byte)(cPointer(rsw.Rsw_buffer_address(b))), n)
}

// NewBuffer allocates n zeroed bytes of C memory.
func NewBuffer(n int64) (*Buffer, error) {
	const op = "NewBuffer"
	if n < 0 || uint64(n) > uint64(^uintptr(0)>>1) {
		return nil, newError(op, StatusInvalidArgument, "buffer of %d bytes", n)
	}
	h := rsw.Rsw_buffer_new(n)
	if h.Swigcptr() == 0 {
		return nil, newError(op, StatusNoMemory, "cannot allocate %d bytes", n)
	}
	live.buffers.Add(1)
	b := &Buffer{h: h, p: cPointer(rsw.Rsw_buffer_address(h)), n: n}
	runtime.SetFinalizer(b, (*Buffer).Close)
	return b, nil
}

// Len is the size of the buffer in bytes.
func (b *Buffer) Len() int64 { return b.n }

// Bytes is the buffer's memory as a byte slice (nil after Close).
func (b *Buffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	return unsafe.Slice((*byte)(b.p), b.n)
}

// Address is the address of the buffer's memory (0 after Close).
func (b *Buffer) Address() uintptr {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0
	}
	return uintptr(b.p)
}

// Element is the type of an element of a View.
type Element interface {
	~uint8 | ~int8 | ~uint16 | ~int16 | ~uint32 | ~int32 | ~uint64 | ~int64 |
		~float32 | ~float64
}

// View is the buffer's memory as a slice of T, of Len()/sizeof(T) elements
// (nil after Close), with the host's byte order: View[float32](b) for f32
// weights, View[uint16](b) for the bits of bf16 or f16 ones.
func View[T Element](b *Buffer) []T {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	var zero T
	return unsafe.Slice((*T)(b.p), b.n/int64(unsafe.Sizeof(zero)))
}

// Fill sets every byte to c.
func (b *Buffer) Fill(c byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.closed {
		rsw.Rsw_buffer_fill(b.h, int(c))
	}
}

func (b *Buffer) element(op string, dtype DType, f func(r rsw.Rsw_result)) (rsw.Rsw_result, error) {
	if !fitsInt32(int64(dtype)) {
		return nil, newError(op, StatusInvalidArgument, "unknown dtype %d", int(dtype))
	}
	r, err := newResult(op)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		rsw.Rsw_result_free(r)
		return nil, closedError(op, "buffer")
	}
	f(r)
	if err := resultError(op, r); err != nil {
		rsw.Rsw_result_free(r)
		return nil, err
	}
	return r, nil
}

// Float reads element index of an array of dtype (f16, bf16, f32, f64)
// laid over the buffer, widened exactly to float64.
func (b *Buffer) Float(dtype DType, index int64) (float64, error) {
	r, err := b.element("Buffer.Float", dtype, func(r rsw.Rsw_result) {
		rsw.Rsw_buffer_get_float(r, b.h, int(dtype), index)
	})
	if err != nil {
		return 0, err
	}
	defer rsw.Rsw_result_free(r)
	return r.GetReal(), nil
}

// SetFloat writes element index of an array of dtype (f16, bf16, f32, f64),
// rounding to nearest even.
func (b *Buffer) SetFloat(dtype DType, index int64, value float64) error {
	r, err := b.element("Buffer.SetFloat", dtype, func(r rsw.Rsw_result) {
		rsw.Rsw_buffer_set_float(r, b.h, int(dtype), index, value)
	})
	if err == nil {
		rsw.Rsw_result_free(r)
	}
	return err
}

// Int reads element index of an array of an integer or bool dtype (u64 as
// its bit pattern).
func (b *Buffer) Int(dtype DType, index int64) (int64, error) {
	r, err := b.element("Buffer.Int", dtype, func(r rsw.Rsw_result) {
		rsw.Rsw_buffer_get_int(r, b.h, int(dtype), index)
	})
	if err != nil {
		return 0, err
	}
	defer rsw.Rsw_result_free(r)
	return r.GetValue(), nil
}

// SetInt writes element index of an array of an integer or bool dtype,
// truncated to the element's size.
func (b *Buffer) SetInt(dtype DType, index int64, value int64) error {
	r, err := b.element("Buffer.SetInt", dtype, func(r rsw.Rsw_result) {
		rsw.Rsw_buffer_set_int(r, b.h, int(dtype), index, value)
	})
	if err == nil {
		rsw.Rsw_result_free(r)
	}
	return err
}

// Close ends the buffer's use by the program: its slices must not be used
// any more. The memory is freed now, or when the last plan bound to it lets
// it go. Closing twice does nothing.
func (b *Buffer) Close() error {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	runtime.SetFinalizer(b, nil)
	b.release()
	return nil
}

// pin records a binding of a plan to the buffer; false if it was closed.
func (b *Buffer) pin() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.pins++
	return true
}

func (b *Buffer) unpin() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.pins--
	b.release()
}

// release frees the memory once closed and unbound; b.mu held.
func (b *Buffer) release() {
	if b.closed && b.pins == 0 && b.h != nil {
		rsw.Rsw_buffer_free(b.h)
		b.h = nil
		b.p = nil
		live.buffers.Add(-1)
	}
}
