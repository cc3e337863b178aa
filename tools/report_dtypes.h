/* SPDX-License-Identifier: Apache-2.0 */
/* The parts of a report about dtypes changing on the way: which tensors
 * are quantized and why some are not, what each rank converts, and what
 * the conversion saves against the same sync without it; as table lines
 * and as JSON. */
#ifndef RT_REPORT_DTYPES_H
#define RT_REPORT_DTYPES_H

#include <json-c/json.h>
#include <stdio.h>

#include "report.h"

/* "dtypes :", "convert:" and "compare:" lines; nothing when both sides
 * hold the model's dtype. */
void rt_report_print_dtypes(const rt_report *r, FILE *f);

/* Why tensor t kept an unquantized dtype ("" when it did not). */
void rt_dtype_kept_reason(const rt_job *job, int t, char *buf, size_t n);

/* Adds to root "dtypes" and "without_conversion", and to plan the
 * conversion totals and "conversion_ranks" (every rank that converts). */
void rt_report_dtypes_json(const rt_report *r, json_object *root,
                           json_object *plan);

#endif
