/* SPDX-License-Identifier: Apache-2.0 */
/* Dtypes changing on the way (--train-dtype, --infer-dtype, --fp8-*):
 * which tensors are quantized and why some are not, the bytes and the
 * conversion work the plan really does, the comparison rows, the JSON, and
 * an fp8 reshard of tiny models executed in process, every value and
 * scale checked. */
#include <criterion/criterion.h>
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab_cluster.h"
#include "report.h"
#include "tiny_models.h"

static rt_dtype_spec fp8_blocks(int64_t rows, int64_t cols) {
  rt_dtype_spec s;
  rt_dtype_spec_default(&s);
  s.infer = RS_DTYPE_F8_E4M3;
  s.block_rows = rows;
  s.block_cols = cols;
  return s;
}

static void job_with(rt_job *job, const rt_model_info *info,
                     const char *train, const char *infer,
                     const rt_cluster *c, const rt_dtype_spec *dt) {
  rt_err e;
  rt_job_spec spec = {NULL, info, train, infer, c, RT_PLACE_SPLIT, 0};
  cr_assert_eq(rt_job_init(job, &spec, &e), 0, "%s", e.msg);
  if (dt) cr_assert_eq(rt_job_set_dtypes(job, dt, &e), 0, "%s", e.msg);
}

static void report_of(const rt_job *job, rt_report *r) {
  rt_options opt = {0};
  rt_err e;
  cr_assert_eq(rt_report_run(job, &opt, r, &e), 0, "%s", e.msg);
}

static double wire(const rt_report *r) {
  return r->bytes_local + r->bytes_intra + r->bytes_inter;
}

static int tensor_named(const rt_job *job, const char *name) {
  for (int t = 0; t < job->model.n; t++)
    if (!strcmp(job->model.t[t].name, name)) return t;
  cr_assert_fail("no tensor %s", name);
  return -1;
}

/* TP2 -> TP2 with 4x4 blocks (the tiny model is 32 wide): every linear
 * weight quantized, converted by the sender, which holds whole blocks; fp8
 * on the wire, 1 byte an element plus 4 bytes a block, against 2 for
 * bf16. */
Test(dtypes, fp8_sends_about_half_the_bytes) {
  rt_cluster c = lab();
  rt_dtype_spec dt = fp8_blocks(4, 4);
  rt_job plain, fp8;
  job_with(&plain, &tiny_dense, "tp=2", "tp=2,dp=2", &c, NULL);
  job_with(&fp8, &tiny_dense, "tp=2", "tp=2,dp=2", &c, &dt);
  cr_expect_eq(fp8.dsum.quantized, 4 * 7, "q k v o gate up down, 4 layers");
  cr_expect_eq(fp8.dsum.kept_cut + fp8.dsum.kept_fused, 0);
  cr_expect(fp8.dsum.converts);
  int q = tensor_named(&fp8, "model.layers.0.self_attn.q_proj.weight");
  int n = tensor_named(&fp8, "model.layers.0.input_layernorm.weight");
  int emb = tensor_named(&fp8, "model.embed_tokens.weight");
  cr_expect_eq(fp8.td[q].dst, RS_DTYPE_F8_E4M3);
  cr_expect(fp8.td[q].scaled);
  cr_expect_eq(fp8.td[n].dst, RS_DTYPE_BF16, "norms stay bf16");
  cr_expect_eq(fp8.td[emb].dst, RS_DTYPE_BF16, "embeddings stay bf16");

  rt_report a, b;
  report_of(&plain, &a);
  report_of(&fp8, &b);
  cr_expect(!a.converts);
  cr_expect(b.converts);
  /* what is quantized travels in fp8, with its scales: each TP shard to
   * two inference replicas (dp=2) */
  double quant = 0, scales = 0;
  for (int t = 0; t < fp8.model.n; t++)
    if (fp8.td[t].scaled) {
      quant += (double)rt_tensor_numel(&fp8.model.t[t]);
      scales += (double)rt_tensor_numel(&fp8.model.t[t]) / 16 * 4;
    }
  cr_expect_float_eq(a.bytes_needed - b.bytes_needed,
                     2 * (2 * quant - quant - scales), 0.5);
  cr_expect_float_eq(wire(&a), a.bytes_needed, 0.5);
  cr_expect_float_eq(wire(&b), b.bytes_needed, 0.5,
                     "the sender quantizes: fp8 and scales on the wire");
  double ratio = wire(&b) / wire(&a);
  cr_expect(ratio > 0.5 && ratio < 0.75, "fp8 / bf16 wire bytes %.3f", ratio);

  /* the conversion: every quantized element once, by the senders */
  /* the second inference domain may get it from the first, already fp8 */
  double once = quant + scales / 4; /* values, and one per block */
  cr_expect_geq(b.converted_sending_all, once);
  cr_expect_leq(b.converted_sending_all, 2 * once);
  cr_expect_float_eq(b.converted_receiving_all, 0, 0.5);
  double conv = 0;
  for (int r = 0; r < fp8.world; r++) conv += b.ours_load.convert[r];
  cr_expect_float_eq(conv, b.converted_sending_all * 2, 0.5,
                     "bytes of bf16 input");
  /* the comparison rows */
  cr_expect_float_eq(b.ours_plain.time, a.ours.time, 1e-12,
                     "the same sync without conversion is the bf16 plan");
  cr_expect_float_eq(b.plain_bytes_inter + b.plain_bytes_intra +
                         b.plain_bytes_local,
                     wire(&a), 0.5);
  cr_expect_lt(b.ours.time, a.ours.time);
  cr_expect_str_eq(b.gb_convert.key, "gb_convert");
  cr_expect(strstr(b.gb_convert.label, "quantize") != NULL);
  cr_expect_lt(b.gb_convert.bytes_intra + b.gb_convert.bytes_inter,
               b.gb_rl.bytes_intra + b.gb_rl.bytes_inter,
               "the broadcast carries fp8");
  cr_expect(strstr(b.gb_convert.note, "convert") != NULL, "%s",
            b.gb_convert.note);
  cr_expect_geq(b.ours.time, b.lb.time * (1 - 1e-9));
  /* the other strategies are priced without conversion, as before */
  cr_expect_float_eq(b.gb_rl.time, a.gb_rl.time, 1e-12);
  cr_expect_float_eq(b.hier.time, a.hier.time, 1e-12);
  rt_report_free(&a);
  rt_report_free(&b);
  rt_job_free(&plain);
  rt_job_free(&fp8);
}

/* A rank's conversion adds to its slowest link. */
Test(dtypes, conversion_adds_to_the_rank_time) {
  rt_cluster c = lab();
  const int domain[2] = {0, 0};
  rt_load l;
  rt_load_init(&l, 2);
  rt_load_add(&l, domain, 0, 1, 1e9, 1); /* NVLink: 10 ms + 1 us */
  rt_load_add_convert(&l, 0, 4e9);
  rt_hot hot;
  double t = rt_load_time(&l, &c, &hot);
  cr_expect_float_eq(c.convert_bw, 3350e9 * RT_CONVERT_PER_HBM, 1,
                     "without a figure: the H200's ratio to HBM");
  cr_expect_float_eq(t, 0.01 + 1e-6 + 4e9 / c.convert_bw, 1e-12);
  cr_expect_eq(hot.rank, 0);
  cr_expect_eq(hot.link, RT_NVL_OUT);
  cr_expect_float_eq(hot.convert_time, 4e9 / c.convert_bw, 1e-12);
  rt_load_free(&l);
}

/* 16x16 blocks and TP2: k/v (8 rows a shard), gate/up (24 rows) and down
 * (24 columns) cut blocks and stay bf16; q stays with them (one fused
 * qkv_proj buffer); o_proj (16 columns a shard) is quantized. */
Test(dtypes, a_tp_that_cuts_blocks_keeps_bf16_and_says_so) {
  rt_cluster c = lab();
  rt_dtype_spec dt = fp8_blocks(16, 16);
  rt_job job;
  job_with(&job, &tiny_dense, "tp=2", "tp=2", &c, &dt);
  cr_expect_eq(job.dsum.quantized, 4, "o_proj of each layer");
  cr_expect_eq(job.dsum.kept_cut, 4 * 5);
  cr_expect_eq(job.dsum.kept_fused, 4);
  int o = tensor_named(&job, "model.layers.1.self_attn.o_proj.weight");
  int g = tensor_named(&job, "model.layers.1.mlp.gate_proj.weight");
  int q = tensor_named(&job, "model.layers.1.self_attn.q_proj.weight");
  cr_expect_eq(job.td[o].dst, RS_DTYPE_F8_E4M3);
  cr_expect_eq(job.td[g].dst, RS_DTYPE_BF16);
  cr_expect_eq(job.td[g].kept, RT_KEEP_BLOCKS_CUT);
  cr_expect_eq(job.td[q].kept, RT_KEEP_FUSED);

  rt_report r;
  report_of(&job, &r);
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  rt_report_print(&r, f);
  fclose(f);
  cr_expect(strstr(text, "20 stayed bf16 because an inference shard cuts "
                         "their blocks") != NULL,
            "%s", text);
  cr_expect(strstr(text, "4 more as they share a fused buffer") != NULL,
            "%s", text);
  cr_expect(strstr(text, "not whole 16-row blocks") != NULL, "%s", text);
  free(text);

  char *json = rt_report_json(&r);
  json_object *root = json_tokener_parse(json), *d, *fp8, *kept, *v;
  cr_assert_not_null(root);
  cr_assert(json_object_object_get_ex(root, "dtypes", &d));
  cr_assert(json_object_object_get_ex(d, "fp8", &fp8));
  cr_assert(json_object_object_get_ex(fp8, "tensors_kept_blocks_cut", &v));
  cr_expect_eq(json_object_get_int(v), 20);
  cr_assert(json_object_object_get_ex(fp8, "kept", &kept));
  cr_expect_eq(json_object_array_length(kept), 24);
  bool seen = false;
  for (size_t i = 0; i < json_object_array_length(kept); i++) {
    json_object *k = json_object_array_get_idx(kept, i), *name, *why;
    json_object_object_get_ex(k, "tensor", &name);
    json_object_object_get_ex(k, "reason", &why);
    if (strcmp(json_object_get_string(name),
               "model.layers.1.mlp.gate_proj.weight"))
      continue;
    seen = true;
    cr_expect(strstr(json_object_get_string(why), "rows 0..23 of 48") !=
                  NULL,
              "%s", json_object_get_string(why));
  }
  cr_expect(seen);
  json_object_put(root);
  free(json);
  rt_report_free(&r);
  rt_job_free(&job);
}

/* fp32 trainer -> bf16 engine: a plain cast, by the sender (the narrower
 * dtype travels), so the wire carries what a bf16 trainer would send. */
Test(dtypes, fp32_trainer_casts_before_sending) {
  rt_cluster c = lab();
  rt_dtype_spec dt;
  rt_dtype_spec_default(&dt);
  dt.train = RS_DTYPE_F32;
  rt_job plain, cast;
  job_with(&plain, &tiny_moe, "tp=2,ep=2", "tp=2,dp=2", &c, NULL);
  job_with(&cast, &tiny_moe, "tp=2,ep=2", "tp=2,dp=2", &c, &dt);
  rt_report a, b;
  report_of(&plain, &a);
  report_of(&cast, &b);
  cr_expect(b.converts);
  cr_expect_float_eq(wire(&b), wire(&a), 0.5);
  cr_expect_gt(b.converted_sending_all, 0);
  cr_expect_float_eq(b.converted_receiving_all, 0, 0.5);
  cr_expect(strstr(b.gb_convert.label, "cast") != NULL);
  cr_expect_gt(b.ours.time, a.ours.time, "the cast costs time");
  rt_report_free(&a);
  rt_report_free(&b);
  rt_job_free(&plain);
  rt_job_free(&cast);
}

/* ---- an fp8 reshard, executed ------------------------------------------- */

/* A source value: a bf16 (its f32 value exactly), well spread. */
static float source_value(int tensor, int64_t index) {
  uint32_t h = (uint32_t)tensor * 2654435761u ^ (uint32_t)(index * 40503u + 7);
  h ^= h >> 15;
  float x = ((float)(h % 20001) - 10000.0f) / 997.0f;
  uint32_t bits;
  memcpy(&bits, &x, 4);
  bits &= 0xffff0000u;
  memcpy(&x, &bits, 4);
  return x;
}

static double e4m3(uint8_t b) {
  int s = b >> 7, e = (b >> 3) & 15, m = b & 7;
  double v = e ? (1 + m / 8.0) * ldexp(1, e - 7) : m / 8.0 * ldexp(1, -6);
  return s ? -v : v;
}

typedef struct mem {
  const rt_job *job;
  rs_side side;
  size_t *size; /* per (rank, buffer) */
  uint8_t **at;
  int nbuf;
  rt_shard *scales; /* per (tensor, rank): its scale shard (rank -1: none) */
  int64_t bad, bad_scales, checked;
} mem;

static size_t esize_of(const mem *m, const rt_shard *s) {
  if (s->scales) return 4;
  const rt_tensor_dtype *td = &m->job->td[s->tensor];
  return rs_dtype_size(m->side == RS_SIDE_SRC ? td->src : td->dst);
}

static void measure(const rt_shard *s, void *arg) {
  mem *m = arg;
  int64_t end = 0;
  for (int d = 0; d < s->box.ndim; d++)
    end += (s->box.ext[d] - 1) * s->strides[d];
  size_t bytes = (size_t)s->byte_offset + (size_t)(end + 1) * esize_of(m, s);
  size_t *slot = &m->size[(size_t)s->rank * m->nbuf + s->buffer];
  if (bytes > *slot) *slot = bytes;
}

/* The scale of the block holding element (i, j, k) of tensor t: amax of
 * the block's source values / 448, in f32. */
static float block_scale(const rt_job *job, int t, const int64_t *at) {
  const rt_tensor *x = &job->model.t[t];
  int nd = x->ndim;
  int64_t lo[3] = {0, 0, 0}, hi[3] = {1, 1, 1}, g[3] = {1, 1, 1};
  for (int d = 0; d < nd; d++) {
    int64_t bs = d == nd - 1 ? job->dtypes.block_cols
                 : d == nd - 2 ? job->dtypes.block_rows
                               : 1;
    lo[d] = at[d] / bs * bs;
    hi[d] = lo[d] + bs < x->shape[d] ? lo[d] + bs : x->shape[d];
    g[d] = x->shape[d];
  }
  float amax = 0;
  for (int64_t i = lo[0]; i < hi[0]; i++)
    for (int64_t j = lo[1]; j < hi[1]; j++)
      for (int64_t k = lo[2]; k < hi[2]; k++) {
        int64_t gi = (i * (nd > 1 ? g[1] : 1) + j) * (nd > 2 ? g[2] : 1) + k;
        float v = fabsf(source_value(t, gi));
        if (v > amax) amax = v;
      }
  return amax > 0 ? amax / 448.0f : 1.0f;
}

static void keep_scales(const rt_shard *s, void *arg) {
  mem *m = arg;
  if (s->scales) m->scales[(size_t)s->tensor * m->job->world + s->rank] = *s;
}

/* The stored scale of element el of tensor t on rank. */
static float stored_scale(const mem *m, int t, int rank, const int64_t *el) {
  const rt_shard *s = &m->scales[(size_t)t * m->job->world + rank];
  cr_assert_eq(s->rank, rank, "no scale shard of %s on rank %d",
               m->job->model.t[t].name, rank);
  int nd = s->box.ndim;
  int64_t loc = 0;
  for (int d = 0; d < nd; d++) {
    int64_t bs = d == nd - 1 ? m->job->dtypes.block_cols
                 : d == nd - 2 ? m->job->dtypes.block_rows
                               : 1;
    loc += (el[d] / bs - s->box.off[d]) * s->strides[d];
  }
  float v;
  memcpy(&v, m->at[(size_t)rank * m->nbuf + s->buffer] + s->byte_offset +
                 loc * 4,
         4);
  return v;
}

static void visit(const rt_shard *s, void *arg) {
  mem *m = arg;
  const rt_job *job = m->job;
  const rt_tensor *x = &job->model.t[s->tensor];
  size_t es = esize_of(m, s);
  rs_dtype dt = s->scales ? RS_DTYPE_F32
                : m->side == RS_SIDE_SRC ? job->td[s->tensor].src
                                         : job->td[s->tensor].dst;
  uint8_t *base = m->at[(size_t)s->rank * m->nbuf + s->buffer];
  int nd = s->box.ndim;
  int64_t ext[3] = {1, 1, 1};
  for (int d = 0; d < nd; d++) ext[d] = s->box.ext[d];
  for (int64_t i = 0; i < ext[0]; i++)
    for (int64_t j = 0; j < ext[1]; j++)
      for (int64_t k = 0; k < ext[2]; k++) {
        int64_t c[3] = {i, j, k}, loc = 0, el[3] = {0, 0, 0};
        for (int d = 0; d < nd; d++) {
          loc += c[d] * s->strides[d];
          el[d] = s->box.off[d] + c[d];
        }
        uint8_t *p = base + s->byte_offset + loc * (int64_t)es;
        if (s->scales) {
          /* a scale: its block's first element */
          int64_t first[3] = {el[0], el[1], el[2]};
          first[nd - 1] *= job->dtypes.block_cols;
          if (nd > 1) first[nd - 2] *= job->dtypes.block_rows;
          float want = block_scale(job, s->tensor, first), got;
          memcpy(&got, p, 4);
          m->bad_scales += got != want;
          m->checked++;
          continue;
        }
        int64_t gi = 0;
        for (int d = 0; d < nd; d++) gi = gi * x->shape[d] + el[d];
        float v = source_value(s->tensor, gi);
        if (m->side == RS_SIDE_SRC) {
          if (dt == RS_DTYPE_F32)
            memcpy(p, &v, 4);
          else
            memcpy(p, (uint8_t *)&v + 2, 2); /* little-endian high half */
          continue;
        }
        double got;
        if (dt == RS_DTYPE_F8_E4M3) {
          /* as a reader does: the value times its block's stored scale;
           * 3 mantissa bits: within half a step of the value, or of the
           * subnormal step near zero */
          float sc = stored_scale(m, s->tensor, s->rank, el);
          got = e4m3(*p) * sc;
          m->bad += !(fabs(got - v) <= fabs(v) / 16 + sc / 512);
        } else {
          /* unquantized: bf16 or f32, exact (the source values are bf16) */
          uint32_t bits = 0;
          if (dt == RS_DTYPE_F32)
            memcpy(&bits, p, 4);
          else
            memcpy((uint8_t *)&bits + 2, p, 2);
          float f;
          memcpy(&f, &bits, 4);
          m->bad += f != v;
        }
        m->checked++;
      }
}

static void execute_fp8(const rt_model_info *info, const char *train,
                        const char *infer, int64_t br, int64_t bc,
                        rs_dtype train_dtype) {
  rt_cluster c = lab();
  rt_dtype_spec dt = fp8_blocks(br, bc);
  dt.train = train_dtype;
  rt_job job;
  job_with(&job, info, train, infer, &c, &dt);
  cr_assert_gt(job.dsum.quantized, 0);
  rs_context *ctx;
  rs_layout *src, *dst;
  rt_err e;
  cr_assert_eq(rt_job_layouts(&job, &ctx, &src, &dst, &e), 0, "%s", e.msg);
  rs_plan *plan = NULL;
  cr_assert_eq(rs_plan_create(src, dst, &plan), RS_OK, "%s",
               rs_context_last_error(ctx));
  mem side[2];
  for (int s = 0; s < 2; s++) {
    memset(&side[s], 0, sizeof side[s]);
    side[s].job = &job;
    side[s].side = s ? RS_SIDE_DST : RS_SIDE_SRC;
    cr_assert_eq(rs_recipe_num_buffers(job.recipe, side[s].side, &side[s].nbuf),
                 RS_OK);
    side[s].size = calloc((size_t)job.world * side[s].nbuf, sizeof(size_t));
    side[s].at = calloc((size_t)job.world * side[s].nbuf, sizeof(uint8_t *));
    side[s].scales =
        malloc(sizeof(rt_shard) * (size_t)job.model.n * (size_t)job.world);
    for (size_t i = 0; i < (size_t)job.model.n * (size_t)job.world; i++)
      side[s].scales[i].rank = -1;
    rt_job_shards(&job, side[s].side, measure, &side[s]);
    for (int r = 0; r < job.world; r++)
      for (int b = 0; b < side[s].nbuf; b++) {
        size_t n = side[s].size[(size_t)r * side[s].nbuf + b];
        if (!n) continue;
        uint8_t *p = malloc(n);
        memset(p, 0xee, n);
        side[s].at[(size_t)r * side[s].nbuf + b] = p;
        cr_assert_eq(rs_plan_bind(plan, side[s].side, r, b, p, n), RS_OK,
                     "%s", rs_context_last_error(ctx));
      }
  }
  rt_job_shards(&job, RS_SIDE_SRC, visit, &side[0]);
  cr_assert_eq(rs_plan_execute(plan), RS_OK, "%s", rs_context_last_error(ctx));
  rt_job_shards(&job, RS_SIDE_DST, keep_scales, &side[1]);
  rt_job_shards(&job, RS_SIDE_DST, visit, &side[1]);
  cr_expect_gt(side[1].checked, 0);
  cr_expect_eq(side[1].bad, 0, "%s %s -> %s: %lld of %lld values wrong",
               info->name, train, infer, (long long)side[1].bad,
               (long long)side[1].checked);
  cr_expect_eq(side[1].bad_scales, 0,
               "%s %s -> %s: %lld scales are not amax / 448 of their block",
               info->name, train, infer, (long long)side[1].bad_scales);
  for (int s = 0; s < 2; s++) {
    for (size_t i = 0; i < (size_t)job.world * side[s].nbuf; i++)
      free(side[s].at[i]);
    free(side[s].at);
    free(side[s].size);
    free(side[s].scales);
  }
  rs_plan_destroy(plan);
  rs_layout_destroy(src);
  rs_layout_destroy(dst);
  rs_context_destroy(ctx);
  rt_job_free(&job);
}

Test(dtypes, fp8_reshard_executes_values_and_scales_right) {
  const rs_dtype B = RS_DTYPE_BF16, F = RS_DTYPE_F32;
  /* fp32 senders hold whole blocks: they quantize */
  execute_fp8(&tiny_dense, "tp=2", "tp=2,dp=2", 4, 4, F);
  /* FSDP splits blocks across source shards: the receiver quantizes */
  execute_fp8(&tiny_dense, "tp=1,dp=4,fsdp=1", "tp=2", 16, 8, B);
  /* stacked experts in vLLM's w13 buffer, fp8 and strided; MLA */
  execute_fp8(&tiny_moe, "tp=2,ep=2", "tp=2,dp=2", 2, 4, F);
  execute_fp8(&tiny_mla, "tp=2,ep=4,pp=3,gpus=12", "tp=2,dp=2", 2, 2, F);
}

/* bf16 senders that hold whole blocks quantize before sending. */
Test(dtypes, fp8_reshard_from_bf16_senders) {
  const rs_dtype B = RS_DTYPE_BF16;
  execute_fp8(&tiny_dense, "tp=2", "tp=2,dp=2", 4, 4, B);
  execute_fp8(&tiny_moe, "tp=2,ep=2", "tp=2,dp=2", 2, 4, B);
  execute_fp8(&tiny_mla, "tp=2,ep=4,pp=3,gpus=12", "tp=2,dp=2", 2, 2, B);
}
