/* SPDX-License-Identifier: Apache-2.0 */
/* Dtypes of a weight sync: the options, and which tensors are quantized. */
#include "dtypes.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void rt_dtype_spec_default(rt_dtype_spec *s) {
  s->train = RS_DTYPE_BF16;
  s->infer = RS_DTYPE_BF16;
  s->block_rows = s->block_cols = 128;
  s->rule = RS_SCALE_AMAX;
}

const char *rt_dtype_word(rs_dtype d) {
  switch (d) {
  case RS_DTYPE_BF16: return "bf16";
  case RS_DTYPE_F32: return "fp32";
  case RS_DTYPE_F8_E4M3: return "fp8";
  default: return rs_dtype_name(d);
  }
}

const char *rt_scale_rule_word(rs_scale_rule rule) {
  return rule == RS_SCALE_UE8M0 ? "ue8m0" : "amax";
}

int rt_dtype_parse_train(const char *val, rt_dtype_spec *s, rt_err *e) {
  if (val && !strcmp(val, "bf16"))
    s->train = RS_DTYPE_BF16;
  else if (val && !strcmp(val, "fp32"))
    s->train = RS_DTYPE_F32;
  else
    return rt_fail(e, "--train-dtype: '%s' is not bf16 or fp32",
                   val ? val : "");
  return 0;
}

int rt_dtype_parse_infer(const char *val, rt_dtype_spec *s, rt_err *e) {
  if (val && !strcmp(val, "bf16"))
    s->infer = RS_DTYPE_BF16;
  else if (val && !strcmp(val, "fp32"))
    s->infer = RS_DTYPE_F32;
  else if (val && !strcmp(val, "fp8"))
    s->infer = RS_DTYPE_F8_E4M3;
  else
    return rt_fail(e, "--infer-dtype: '%s' is not bf16, fp32 or fp8",
                   val ? val : "");
  return 0;
}

static bool block_dim(const char *p, const char *end, int64_t *out) {
  if (end == p || end - p > 7) return false;
  char num[8];
  memcpy(num, p, (size_t)(end - p));
  num[end - p] = '\0';
  errno = 0;
  char *stop = NULL;
  long v = strtol(num, &stop, 10);
  if (*stop || errno || v < 1 || v > 1 << 16) return false;
  *out = v;
  return true;
}

int rt_dtype_parse_block(const char *val, rt_dtype_spec *s, rt_err *e) {
  const char *comma = val ? strchr(val, ',') : NULL;
  int64_t r = 0, c = 0;
  if (!comma || !block_dim(val, comma, &r) ||
      !block_dim(comma + 1, comma + 1 + strlen(comma + 1), &c))
    return rt_fail(e, "--fp8-block: '%s' is not ROWS,COLS (two integers in "
                      "[1, 65536], e.g. 128,128)",
                   val ? val : "");
  s->block_rows = r;
  s->block_cols = c;
  return 0;
}

int rt_dtype_parse_scales(const char *val, rt_dtype_spec *s, rt_err *e) {
  if (val && !strcmp(val, "amax"))
    s->rule = RS_SCALE_AMAX;
  else if (val && !strcmp(val, "ue8m0"))
    s->rule = RS_SCALE_UE8M0;
  else
    return rt_fail(e, "--fp8-scales: '%s' is not amax or ue8m0",
                   val ? val : "");
  return 0;
}

void rt_dtypes_read(const rs_recipe *r, int ntensors, rt_tensor_dtype *td,
                    rt_dtype_summary *sum) {
  memset(sum, 0, sizeof *sum);
  sum->first_kept = -1;
  for (int t = 0; t < ntensors; t++) {
    rt_tensor_dtype *d = &td[t];
    int scaled = 0;
    rs_fp8_kept kept = RS_FP8_QUANTIZED_OR_PLAIN;
    int64_t cut[3];
    memset(d, 0, sizeof *d);
    rs_recipe_tensor_dtypes(r, t, &d->src, &d->dst, &scaled, &kept, cut);
    d->scaled = scaled;
    d->kept = (rt_keep)kept;
    d->cut_dim = cut[0];
    d->cut_off = cut[1];
    d->cut_ext = cut[2];
    if (d->scaled) {
      sum->quantized++;
    } else if (d->kept == RT_KEEP_BLOCKS_CUT) {
      sum->kept_cut++;
      if (sum->first_kept < 0) sum->first_kept = t;
    } else if (d->kept == RT_KEEP_FUSED) {
      sum->kept_fused++;
    } else {
      sum->plain++;
    }
    sum->converts |= d->src != d->dst;
  }
}

double rt_tensor_dst_bytes(const rt_tensor *t, const rt_tensor_dtype *td,
                           const rt_dtype_spec *spec) {
  double bytes = (double)rt_tensor_numel(t) * (double)rs_dtype_size(td->dst);
  if (td->scaled) { /* one f32 scale per block of the last two dims */
    double n = 1;
    for (int d = 0; d < t->ndim; d++) {
      int64_t b = d == t->ndim - 1   ? spec->block_cols
                  : d == t->ndim - 2 ? spec->block_rows
                                     : 1;
      n *= (double)((t->shape[d] + b - 1) / b);
    }
    bytes += n * (double)rs_dtype_size(RS_DTYPE_F32);
  }
  return bytes;
}
