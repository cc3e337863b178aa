// SPDX-License-Identifier: Apache-2.0

package reshard

import (
	"fmt"

	"libreshard.dev/reshard/internal/rsw"
)

// Status is a libreshard status code (rs_status). Its values are pinned by
// the C ABI: 1xx the caller's arguments, 2xx layouts that do not fit
// together, 3xx unsupported, 4xx resources, 5xx the transport and the other
// ranks, 9xx bugs in libreshard.
type Status int

// The status codes, with the values of reshard.h.
const (
	StatusOK              = Status(rsw.RS_OK)
	StatusInvalidArgument = Status(rsw.RS_ERR_INVALID_ARGUMENT)
	StatusNullPointer     = Status(rsw.RS_ERR_NULL_POINTER)
	StatusBadShape        = Status(rsw.RS_ERR_BAD_SHAPE)
	StatusTooManyDims     = Status(rsw.RS_ERR_TOO_MANY_DIMS)
	StatusOutOfBounds     = Status(rsw.RS_ERR_OUT_OF_BOUNDS)
	StatusOverflow        = Status(rsw.RS_ERR_OVERFLOW)
	StatusOverlap         = Status(rsw.RS_ERR_OVERLAP)
	StatusDuplicateName   = Status(rsw.RS_ERR_DUPLICATE_NAME)
	StatusUnknownTensor   = Status(rsw.RS_ERR_UNKNOWN_TENSOR)
	StatusUnknownRank     = Status(rsw.RS_ERR_UNKNOWN_RANK)
	StatusUnknownBuffer   = Status(rsw.RS_ERR_UNKNOWN_BUFFER)
	StatusBufferTooSmall  = Status(rsw.RS_ERR_BUFFER_TOO_SMALL)
	StatusBadParam        = Status(rsw.RS_ERR_BAD_PARAM)
	StatusWrongContext    = Status(rsw.RS_ERR_WRONG_CONTEXT)
	StatusWrongMemory     = Status(rsw.RS_ERR_WRONG_MEMORY)
	StatusIncompatible    = Status(rsw.RS_ERR_INCOMPATIBLE)
	StatusNotCovered      = Status(rsw.RS_ERR_NOT_COVERED)
	StatusUnsupported     = Status(rsw.RS_ERR_UNSUPPORTED)
	StatusNoMemory        = Status(rsw.RS_ERR_NO_MEMORY)
	StatusTransport       = Status(rsw.RS_ERR_TRANSPORT)
	StatusTimeout         = Status(rsw.RS_ERR_TIMEOUT)
	StatusMismatch        = Status(rsw.RS_ERR_MISMATCH)
	StatusCorrupt         = Status(rsw.RS_ERR_CORRUPT)
	// StatusInternal (RS_ERR_INTERNAL) is a bug in libreshard; please
	// report it. Not among reshard.i's constants, hence written here.
	StatusInternal Status = 900
)

// String gives the enumerator's name, "RS_ERR_TIMEOUT".
func (s Status) String() string { return rsw.Rsw_status_name(int(s)) }

// Error is the error every fallible call of the package returns: the
// status, its name and libreshard's detailed message (what was wrong, with
// the offending values), copied in the same C call that failed. Op names
// the Go method ("Plan.Execute").
//
// Match a kind of failure with errors.Is and the Err* values, or read the
// fields with errors.As:
//
//	if errors.Is(err, reshard.ErrTimeout) { ... }
//	var re *reshard.Error
//	if errors.As(err, &re) { log.Print(re.Status, re.Message) }
type Error struct {
	Op      string // the Go call that failed, "Plan.Execute"
	Status  Status // the rs_status
	Name    string // its name, "RS_ERR_TIMEOUT"
	Message string // libreshard's detail, "" for the Err* values
	err     error  // what it wraps (ErrClosed), or nil
}

func (e *Error) Error() string {
	s := "reshard: "
	if e.Op != "" {
		s += e.Op + ": "
	}
	s += e.Name
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// Is reports whether target is an *Error of the same status, so that
// errors.Is(err, reshard.ErrTimeout) matches every timeout.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t != nil && t.Status == e.Status
}

// Unwrap gives ErrClosed for a call on a closed object, else nil.
func (e *Error) Unwrap() error { return e.err }

func sentinel(s Status) *Error { return &Error{Status: s, Name: s.String()} }

// One value per status, to compare with errors.Is (only the status is
// compared).
var (
	ErrInvalidArgument = sentinel(StatusInvalidArgument)
	ErrNullPointer     = sentinel(StatusNullPointer)
	ErrBadShape        = sentinel(StatusBadShape)
	ErrTooManyDims     = sentinel(StatusTooManyDims)
	ErrOutOfBounds     = sentinel(StatusOutOfBounds)
	ErrOverflow        = sentinel(StatusOverflow)
	ErrOverlap         = sentinel(StatusOverlap)
	ErrDuplicateName   = sentinel(StatusDuplicateName)
	ErrUnknownTensor   = sentinel(StatusUnknownTensor)
	ErrUnknownRank     = sentinel(StatusUnknownRank)
	ErrUnknownBuffer   = sentinel(StatusUnknownBuffer)
	ErrBufferTooSmall  = sentinel(StatusBufferTooSmall)
	ErrBadParam        = sentinel(StatusBadParam)
	ErrWrongContext    = sentinel(StatusWrongContext)
	ErrWrongMemory     = sentinel(StatusWrongMemory)
	ErrIncompatible    = sentinel(StatusIncompatible)
	ErrNotCovered      = sentinel(StatusNotCovered)
	ErrUnsupported     = sentinel(StatusUnsupported)
	ErrNoMemory        = sentinel(StatusNoMemory)
	ErrTransport       = sentinel(StatusTransport)
	ErrTimeout         = sentinel(StatusTimeout)
	ErrMismatch        = sentinel(StatusMismatch)
	ErrCorrupt         = sentinel(StatusCorrupt)
	ErrInternal        = sentinel(StatusInternal)
)

// ErrClosed is wrapped by the *Error (status StatusNullPointer) of a call
// on a Context, Layout, Plan or Buffer after its Close.
var ErrClosed = fmt.Errorf("reshard: use of a closed object")

// newError makes an *Error of the Go layer itself (arguments it refuses
// before calling C).
func newError(op string, s Status, format string, args ...interface{}) *Error {
	return &Error{Op: op, Status: s, Name: s.String(),
		Message: fmt.Sprintf(format, args...)}
}

func closedError(op, what string) *Error {
	e := newError(op, StatusNullPointer, "%s is closed", what)
	e.err = ErrClosed
	return e
}
