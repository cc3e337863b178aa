/* SPDX-License-Identifier: Apache-2.0 */
/* Dtype conversion in the report: table lines and JSON. */
#include "report_dtypes.h"


static const char *axis_word(const rt_tensor *x, int64_t dim) {
  return dim == x->ndim - 1 ? "columns" : "rows";
}

void rt_dtype_kept_reason(const rt_job *job, int t, char *buf, size_t n) {
  const rt_tensor *x = &job->model.t[t];
  const rt_tensor_dtype *td = &job->td[t];
  const rt_dtype_spec *s = &job->dtypes;
  int64_t bs = td->cut_dim == x->ndim - 1 ? s->block_cols : s->block_rows;
  switch (td->kept) {
  case RT_KEEP_BLOCKS_CUT:
    snprintf(buf, n,
             "an inference shard holds %s %lld..%lld of %lld: not whole "
             "%lld-%s blocks",
             axis_word(x, td->cut_dim), (long long)td->cut_off,
             (long long)(td->cut_off + td->cut_ext - 1),
             (long long)x->shape[td->cut_dim], (long long)bs,
             td->cut_dim == x->ndim - 1 ? "column" : "row");
    break;
  case RT_KEEP_FUSED:
    snprintf(buf, n,
             "fused in one inference buffer with a tensor whose blocks an "
             "inference shard cuts: quantized together or not at all");
    break;
  default:
    snprintf(buf, n, "%s", "");
  }
}

/* The rank that converts the most (input bytes), or -1. */
static int busiest_converter(const rt_report *r, double *bytes) {
  int at = -1;
  *bytes = 0;
  for (int k = 0; k < r->job->world; k++)
    if (r->ours_load.convert[k] > *bytes) {
      *bytes = r->ours_load.convert[k];
      at = k;
    }
  return at;
}

static void print_tensors(const rt_report *r, FILE *f) {
  const rt_job *job = r->job;
  const rt_dtype_spec *s = &job->dtypes;
  const rt_dtype_summary *d = &job->dsum;
  fprintf(f, "dtypes : trainer %s -> inference %s", rt_dtype_word(s->train),
          rt_dtype_word(s->infer));
  if (s->infer != RS_DTYPE_F8_E4M3) {
    fprintf(f, "%s\n", d->converts ? ", cast on the way" : "");
    return;
  }
  fprintf(f, " (f8_e4m3, %lldx%lld blocks, %s scales in f32 beside each "
             "as <name>_scale_inv): %d linear weights quantized",
          (long long)s->block_rows, (long long)s->block_cols,
          rt_scale_rule_word(s->rule), d->quantized);
  if (d->kept_cut + d->kept_fused > 0) {
    char why[256];
    rt_dtype_kept_reason(job, d->first_kept, why, sizeof why);
    fprintf(f, ", %d stayed %s because an inference shard cuts their "
               "blocks (e.g. %s: %s)",
            d->kept_cut, rt_dtype_word(job->td[d->first_kept].dst),
            job->model.t[d->first_kept].name, why);
    if (d->kept_fused)
      fprintf(f, " and %d more as they share a fused buffer with one",
              d->kept_fused);
  }
  fprintf(f, "; %d other tensors (norms, biases, embeddings, lm_head, "
             "router) are not quantized\n",
          d->plain);
}

/* "0.50x", or "-" when there is nothing to compare with */
static const char *ratio(double now, double before, char *buf, size_t n) {
  if (before > 0)
    snprintf(buf, n, "%.2fx", now / before);
  else
    snprintf(buf, n, "-");
  return buf;
}

void rt_report_print_dtypes(const rt_report *r, FILE *f) {
  const rt_job *job = r->job;
  const rt_dtype_spec *s = &job->dtypes;
  if (s->train == RS_DTYPE_BF16 && s->infer == RS_DTYPE_BF16) return;
  print_tensors(r, f);
  if (!r->converts) return;
  const rt_cluster *c = &job->cluster;
  double most = 0;
  int at = busiest_converter(r, &most);
  char who[128] = "-", b1[32], b2[32], b3[32], b4[32];
  if (at >= 0) rt_job_rank_name(job, at, who, sizeof who);
  fprintf(f, "convert: %.3g elements converted by senders before sending, "
             "%.3g by receivers; the most on one GPU: %s, %s of %s input in "
             "%.4f s at %.0f GB/s (after its links, not overlapped)\n",
          r->converted_sending_all, r->converted_receiving_all, who,
          rt_fmt_bytes(most, b1, sizeof b1), rt_dtype_word(s->train),
          rt_convert_time(c, most), c->convert_bw / 1e9);
  const rt_result *p = &r->ours_plain;
  char q1[16], q2[16], q3[16];
  const char *plain = rt_dtype_word(job->model.t[0].dtype);
  fprintf(f, "compare: against our plan of the same sync without "
             "conversion (%s -> %s): across %s -> %s (%s), inside %s -> %s "
             "(%s), time %.3f s -> %.3f s (%s)\n",
          plain, plain, rt_fmt_bytes(r->plain_bytes_inter, b1, sizeof b1),
          rt_fmt_bytes(r->bytes_inter, b2, sizeof b2),
          ratio(r->bytes_inter, r->plain_bytes_inter, q1, sizeof q1),
          rt_fmt_bytes(r->plain_bytes_intra, b3, sizeof b3),
          rt_fmt_bytes(r->bytes_intra, b4, sizeof b4),
          ratio(r->bytes_intra, r->plain_bytes_intra, q2, sizeof q2),
          p->time, r->ours.time, ratio(r->ours.time, p->time, q3, sizeof q3));
  fprintf(f, "         the reference's algorithms and gather+broadcast are "
             "modelled without conversion (%s on both sides)\n",
          rt_dtype_word(job->model.t[0].dtype));
}

static json_object *jd(double v) { return json_object_new_double(v); }
static json_object *ji(int64_t v) { return json_object_new_int64(v); }
static json_object *js(const char *s) { return json_object_new_string(s); }

static json_object *dtypes_json(const rt_report *r) {
  const rt_job *job = r->job;
  const rt_dtype_spec *s = &job->dtypes;
  const rt_dtype_summary *d = &job->dsum;
  json_object *o = json_object_new_object();
  json_object_object_add(o, "train", js(rt_dtype_word(s->train)));
  json_object_object_add(o, "infer", js(rt_dtype_word(s->infer)));
  json_object_object_add(o, "converts", json_object_new_boolean(d->converts));
  json_object_object_add(o, "convert_bytes_per_s",
                         jd(job->cluster.convert_bw));
  if (s->infer != RS_DTYPE_F8_E4M3) return o;
  json_object *fp8 = json_object_new_object();
  json_object_object_add(fp8, "block_rows", ji(s->block_rows));
  json_object_object_add(fp8, "block_cols", ji(s->block_cols));
  json_object_object_add(fp8, "scales", js(rt_scale_rule_word(s->rule)));
  json_object_object_add(fp8, "tensors_quantized", ji(d->quantized));
  json_object_object_add(fp8, "tensors_kept_blocks_cut", ji(d->kept_cut));
  json_object_object_add(fp8, "tensors_kept_fused", ji(d->kept_fused));
  json_object_object_add(fp8, "tensors_not_quantizable", ji(d->plain));
  json_object *kept = json_object_new_array();
  for (int t = 0; t < job->model.n; t++) {
    if (job->td[t].kept == RT_KEEP_NONE) continue;
    char why[256];
    rt_dtype_kept_reason(job, t, why, sizeof why);
    json_object *k = json_object_new_object();
    json_object_object_add(k, "tensor", js(job->model.t[t].name));
    json_object_object_add(k, "dtype",
                           js(rt_dtype_word(job->td[t].dst)));
    json_object_object_add(k, "reason", js(why));
    json_object_array_add(kept, k);
  }
  json_object_object_add(fp8, "kept", kept);
  json_object_object_add(o, "fp8", fp8);
  return o;
}

void rt_report_dtypes_json(const rt_report *r, json_object *root,
                           json_object *plan) {
  const rt_job *job = r->job;
  json_object_object_add(root, "dtypes", dtypes_json(r));
  json_object_object_add(plan, "converted_sending",
                         jd(r->converted_sending_all));
  json_object_object_add(plan, "converted_receiving",
                         jd(r->converted_receiving_all));
  json_object *ranks = json_object_new_array();
  for (int k = 0; r->converts && k < job->world; k++) {
    if (!r->converted_sending[k] && !r->converted_receiving[k]) continue;
    char who[128];
    rt_job_rank_name(job, k, who, sizeof who);
    json_object *o = json_object_new_object();
    json_object_object_add(o, "rank", ji(k));
    json_object_object_add(o, "rank_name", js(who));
    json_object_object_add(o, "converted_sending", ji(r->converted_sending[k]));
    json_object_object_add(o, "converted_receiving",
                           ji(r->converted_receiving[k]));
    json_object_object_add(o, "convert_bytes", jd(r->ours_load.convert[k]));
    json_object_object_add(
        o, "convert_s", jd(rt_convert_time(&job->cluster,
                                           r->ours_load.convert[k])));
    json_object_array_add(ranks, o);
  }
  json_object_object_add(plan, "conversion_ranks", ranks);
  if (!r->converts) {
    json_object_object_add(root, "without_conversion", NULL);
    return;
  }
  json_object *w = json_object_new_object();
  json_object_object_add(w, "label", js(r->ours_plain.label));
  json_object_object_add(w, "create_s", jd(r->plain_plan_s));
  json_object_object_add(w, "messages", jd(r->plain_messages));
  json_object_object_add(w, "bytes_local", jd(r->plain_bytes_local));
  json_object_object_add(w, "bytes_intra", jd(r->plain_bytes_intra));
  json_object_object_add(w, "bytes_inter", jd(r->plain_bytes_inter));
  json_object_object_add(w, "time_s", jd(r->ours_plain.time));
  json_object_object_add(root, "without_conversion", w);
}
