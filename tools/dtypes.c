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

bool rt_dtype_quantizable(const rt_tensor *t) {
  switch (t->role) {
  case RT_ROLE_COL:
  case RT_ROLE_ROW:
  case RT_ROLE_REPL:
  case RT_ROLE_EXPERT_COL:
  case RT_ROLE_EXPERT_ROW:
    return t->ndim >= 2;
  default:
    return false;
  }
}

static int64_t block_of(const rt_dtype_spec *spec, int ndim, int d) {
  if (d == ndim - 1) return spec->block_cols;
  return d == ndim - 2 ? spec->block_rows : 1;
}

/* Whether every inference shard of t holds whole blocks; if not, the
 * first shard that cuts one goes to td. */
static bool whole_blocks(const rt_tensor *t, const rt_mesh *mesh,
                         const rt_dtype_spec *spec, rt_tensor_dtype *td) {
  int coord[RT_MAX_AX];
  for (int i = 0, n = rt_mesh_size(mesh); i < n; i++) {
    rt_box b;
    rt_mesh_coord(mesh, i, coord);
    if (!rt_mesh_box(mesh, t, coord, &b)) continue;
    for (int d = t->ndim - 2; d < t->ndim; d++) {
      int64_t bs = block_of(spec, t->ndim, d);
      bool at_end = b.off[d] + b.ext[d] == t->shape[d];
      if (b.off[d] % bs || (!at_end && b.ext[d] % bs)) {
        td->cut_dim = d;
        td->cut_off = b.off[d];
        td->cut_ext = b.ext[d];
        return false;
      }
    }
  }
  return true;
}

void rt_dtypes_decide(const rt_model *model, const rt_mesh *dmesh,
                      const rt_dtype_spec *spec, rt_tensor_dtype *td,
                      rt_dtype_summary *sum) {
  memset(sum, 0, sizeof *sum);
  sum->first_kept = -1;
  bool fp8 = spec->infer == RS_DTYPE_F8_E4M3;
  /* fused groups with a member whose blocks are cut */
  char *group_cut = rt_xcalloc((size_t)model->nfuse + 1, 1);
  for (int t = 0; t < model->n; t++) {
    const rt_tensor *x = &model->t[t];
    rt_tensor_dtype *d = &td[t];
    memset(d, 0, sizeof *d);
    d->src = spec->train == RS_DTYPE_F32 ? RS_DTYPE_F32 : x->dtype;
    d->dst = spec->infer == RS_DTYPE_F32 ? RS_DTYPE_F32 : x->dtype;
    if (!fp8 || !rt_dtype_quantizable(x)) continue;
    if (whole_blocks(x, &dmesh[t], spec, d)) {
      d->scaled = true;
    } else {
      d->kept = RT_KEEP_BLOCKS_CUT;
      if (x->fuse_group >= 0) group_cut[x->fuse_group] = 1;
    }
  }
  for (int t = 0; t < model->n; t++) {
    const rt_tensor *x = &model->t[t];
    rt_tensor_dtype *d = &td[t];
    if (d->scaled && x->fuse_group >= 0 && group_cut[x->fuse_group]) {
      d->scaled = false;
      d->kept = RT_KEEP_FUSED;
    }
    if (d->scaled) {
      d->dst = RS_DTYPE_F8_E4M3;
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
  free(group_cut);
}

void rt_scale_name(const char *values, char *out, size_t n) {
  snprintf(out, n, "%s_scale_inv", values);
}

void rt_scale_box(const rt_box *v, const rt_dtype_spec *spec, rt_box *out) {
  *out = *v;
  for (int d = v->ndim >= 2 ? v->ndim - 2 : 0; d < v->ndim; d++) {
    int64_t bs = block_of(spec, v->ndim, d);
    int64_t first = v->off[d] / bs;
    int64_t end = (v->off[d] + v->ext[d] + bs - 1) / bs;
    out->off[d] = first;
    out->ext[d] = end - first;
  }
}

void rt_scale_shape(const rt_tensor *t, const rt_dtype_spec *spec,
                    int64_t *shape) {
  rt_box whole = {.ndim = t->ndim}, s;
  for (int d = 0; d < t->ndim; d++) whole.ext[d] = t->shape[d];
  rt_scale_box(&whole, spec, &s);
  for (int d = 0; d < t->ndim; d++) shape[d] = s.ext[d];
}

double rt_tensor_dst_bytes(const rt_tensor *t, const rt_tensor_dtype *td,
                           const rt_dtype_spec *spec) {
  double bytes = (double)rt_tensor_numel(t) * (double)rs_dtype_size(td->dst);
  if (td->scaled) {
    int64_t shape[RT_MAXD];
    rt_scale_shape(t, spec, shape);
    double n = 1;
    for (int d = 0; d < t->ndim; d++) n *= (double)shape[d];
    bytes += n * (double)rs_dtype_size(RS_DTYPE_F32);
  }
  return bytes;
}
