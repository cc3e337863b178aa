/* SPDX-License-Identifier: Apache-2.0 */
/* The bindings' shim, swig/rsw.c, compiled into this package (found through
 * the -I of cgo.go). */
#include "rsw.c"
