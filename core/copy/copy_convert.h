/* SPDX-License-Identifier: Apache-2.0 */
/* Host copies that convert on the way (rsi_copy ops CAST, QUANTIZE and
 * SCALES, engine.h): the walks of copy.c's runs and of a box's rows,
 * calling convert.h's row loops on contiguous runs. */
#ifndef RS_CORE_COPY_CONVERT_H
#define RS_CORE_COPY_CONVERT_H

#include "copy/engine.h"

/* Perform one copy whose op is not RSI_COPY_PLAIN. RS_ERR_UNSUPPORTED for
 * dtypes the op does not take, RS_ERR_INVALID_ARGUMENT for blocks that do
 * not fit the box, RS_ERR_NO_MEMORY. */
rs_status rsi_copy_convert(const rsi_copy *c, rsi_err *err);

#endif
