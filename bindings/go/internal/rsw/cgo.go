// SPDX-License-Identifier: Apache-2.0

// Package rsw is the SWIG-generated layer of the Go binding: the functions
// of swig/rsw.h, one to one. Package reshard turns it into Go.
package rsw

/*
#cgo CFLAGS: -I${SRCDIR}/../../../../swig -I${SRCDIR}/../../../../capi/include
#cgo !reshard_pkgconfig LDFLAGS: -lreshard
#cgo reshard_pkgconfig pkg-config: reshard
*/
import "C"
