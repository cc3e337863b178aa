/* SPDX-License-Identifier: Apache-2.0 */
/* The CLI's copies of a recipe's sizes and meshes, and mesh geometry. */
#include "frameworks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void rt_train_read(const rs_recipe *r, rt_train *t) {
  int64_t v[9];
  static const rs_recipe_param p[9] = {
      RS_RECIPE_TRAIN_TP,  RS_RECIPE_TRAIN_CP,   RS_RECIPE_TRAIN_EP,
      RS_RECIPE_TRAIN_ETP, RS_RECIPE_TRAIN_PP,   RS_RECIPE_TRAIN_DP,
      RS_RECIPE_TRAIN_EDP, RS_RECIPE_TRAIN_FSDP, RS_RECIPE_TRAIN_WORLD};
  for (int k = 0; k < 9; k++) rs_recipe_get(r, p[k], &v[k]);
  memset(t, 0, sizeof *t);
  t->tp = (int)v[0];
  t->cp = (int)v[1];
  t->ep = (int)v[2];
  t->etp = (int)v[3];
  t->pp = (int)v[4];
  t->dp = (int)v[5];
  t->edp = (int)v[6];
  t->fsdp = (int)v[7];
  t->world = (int)v[8];
}

void rt_infer_read(const rs_recipe *r, rt_infer *t) {
  int64_t v[4];
  static const rs_recipe_param p[4] = {RS_RECIPE_INFER_TP, RS_RECIPE_INFER_DP,
                                       RS_RECIPE_INFER_EP,
                                       RS_RECIPE_INFER_WORLD};
  for (int k = 0; k < 4; k++) rs_recipe_get(r, p[k], &v[k]);
  memset(t, 0, sizeof *t);
  t->tp = (int)v[0];
  t->dp = (int)v[1];
  t->ep = (int)v[2];
  t->world = (int)v[3];
}

void rt_train_describe(const rt_train *t, bool moe, char *buf, size_t n) {
  if (moe)
    snprintf(buf, n, "TP%d CP%d EP%d PP%d (DP%d, expert-DP%d%s)", t->tp,
             t->cp, t->ep, t->pp, t->dp, t->edp,
             t->fsdp ? ", FSDP dim-0 sharding" : "");
  else
    snprintf(buf, n, "TP%d CP%d PP%d (DP%d%s)", t->tp, t->cp, t->pp, t->dp,
             t->fsdp ? ", FSDP dim-0 sharding" : "");
  if (moe && t->etp > 1) {
    size_t l = strlen(buf);
    snprintf(buf + l, n > l ? n - l : 0, ", expert-TP%d", t->etp);
  }
}

void rt_infer_describe(const rt_infer *t, bool moe, char *buf, size_t n) {
  if (moe && t->ep > 1)
    snprintf(buf, n, "TP%d DP%d EP%d", t->tp, t->dp, t->ep);
  else
    snprintf(buf, n, "TP%d DP%d", t->tp, t->dp);
}

/* ---- meshes --------------------------------------------------------------- */

int rt_train_stage_size(const rt_train *t) { return t->world / t->pp; }

void rt_recipe_mesh(const rs_recipe *r, rs_side side, int tensor,
                    rt_mesh *out) {
  memset(out, 0, sizeof *out);
  int64_t first = 0;
  rs_recipe_mesh(r, side, tensor, &out->nax, &first);
  out->rank0 = (int)first;
  for (int a = 0; a < out->nax && a < RT_MAX_AX; a++) {
    const char *name = NULL;
    int64_t size = 0, stride = 0;
    rs_recipe_mesh_axis(r, side, tensor, a, &name, &size, &out->place[a],
                        &stride);
    out->size[a] = (int)size;
    out->stride[a] = (int)stride;
    snprintf(out->axis[a], sizeof out->axis[a], "%s", name ? name : "?");
  }
}

int rt_mesh_size(const rt_mesh *mesh) {
  int n = 1;
  for (int a = 0; a < mesh->nax; a++) n *= mesh->size[a];
  return n;
}

void rt_mesh_coord(const rt_mesh *mesh, int idx, int coord[RT_MAX_AX]) {
  for (int a = mesh->nax - 1; a >= 0; a--) {
    coord[a] = idx % mesh->size[a];
    idx /= mesh->size[a];
  }
}

int rt_mesh_rank(const rt_mesh *mesh, const int coord[RT_MAX_AX]) {
  int r = mesh->rank0;
  for (int a = 0; a < mesh->nax; a++) r += coord[a] * mesh->stride[a];
  return r;
}

bool rt_mesh_axis_sharded(const rt_mesh *mesh, int a) {
  return mesh->place[a] != RS_REPLICATE && mesh->size[a] > 1;
}

int rt_mesh_box(const rt_mesh *mesh, const rt_tensor *t,
                const int coord[RT_MAX_AX], rt_box *out) {
  /* libreshard's own DTensor box (torch.chunk: chunk = ceil(size / n),
   * trailing shards short or empty), the one rs_layout_add_dtensor uses. */
  int64_t msize[RT_MAX_AX], mcoord[RT_MAX_AX];
  for (int a = 0; a < mesh->nax; a++) {
    msize[a] = mesh->size[a];
    mcoord[a] = coord[a];
  }
  out->ndim = t->ndim;
  if (rs_dtensor_local_box(t->ndim, t->shape, mesh->nax, msize, mesh->place,
                           mcoord, out->off, out->ext) != RS_OK) {
    /* the meshes and models are checked when built: a bug if it happens */
    fprintf(stderr, "reshard: box of %s: %s\n", t->name, rs_last_error());
    abort();
  }
  for (int d = 0; d < t->ndim; d++)
    if (out->ext[d] == 0) return 0;
  return 1;
}

int rt_mesh_shard_axes(const rt_mesh *mesh) {
  int n = 0;
  for (int a = 0; a < mesh->nax; a++)
    n += rt_mesh_axis_sharded(mesh, a);
  return n;
}

bool rt_mesh_even(const rt_mesh *mesh, const rt_tensor *t) {
  int64_t ext[RT_MAXD];
  for (int d = 0; d < t->ndim; d++) ext[d] = t->shape[d];
  for (int a = 0; a < mesh->nax; a++) {
    if (!rt_mesh_axis_sharded(mesh, a)) continue;
    int d = mesh->place[a];
    if (ext[d] % mesh->size[a]) return false;
    ext[d] /= mesh->size[a];
  }
  return true;
}
