/* SPDX-License-Identifier: Apache-2.0 */
/* Running the model and presenting it. */
#include "report.h"
#include "report_dtypes.h"

#include <json-c/json.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct worker {
  const rt_job *job;
  rt_report *r;
  rt_err err;
  int rc;
  atomic_int phase; /* index into phases[] */
  atomic_int done;
} worker;

static const char *phases[] = {
    "building layouts and planning (rs_plan_create)", "modelling our plan",
    "planning the same sync without conversion",
    ("modelling the reference's algorithms, gather-and-broadcast and the "
     "lower bound"),
    "done"};

/* Build the layouts of job and plan them; *ctx and *plan for the caller
 * to destroy. */
static int plan_job(const rt_job *job, const rt_options *opt,
                    rs_context **ctx_out, rs_plan **plan_out,
                    int64_t *staging_setting, double *layout_s,
                    double *plan_s, rt_err *e) {
  double t0 = rt_now();
  rs_context *ctx = NULL;
  rs_layout *src = NULL, *dst = NULL;
  *plan_out = NULL;
  if (rt_job_layouts(job, &ctx, &src, &dst, e)) return -1;
  /* The figures read a move's ends and bytes; only the SVG's matrix reads
   * its box. Without boxes, planning touches a fifth less memory. */
  if (!opt->matrix) rs_context_set_param(ctx, RS_PARAM_PLAN_BOXES, 0);
  rs_context_set_param(ctx, RS_PARAM_ROUNDS, opt->rounds); /* rs_rounds */
  if (opt->staging_bytes > 0) {
    rs_status st = rs_context_set_param(ctx, RS_PARAM_STAGING_BYTES,
                                        opt->staging_bytes);
    if (st != RS_OK) {
      rt_fail(e, "--staging-mib: %s", rs_context_last_error(ctx));
      rs_layout_destroy(src);
      rs_layout_destroy(dst);
      rs_context_destroy(ctx);
      return -1;
    }
  }
  if (staging_setting)
    rs_context_get_param(ctx, RS_PARAM_STAGING_BYTES, staging_setting);
  double t1 = rt_now();
  *layout_s = t1 - t0;
  rs_status st = rs_plan_create(src, dst, plan_out);
  *plan_s = rt_now() - t1;
  rs_layout_destroy(src);
  rs_layout_destroy(dst);
  if (st != RS_OK) {
    rt_fail(e, "rs_plan_create: %s: %s", rs_status_name(st),
            rs_context_last_error(ctx));
    rs_context_destroy(ctx);
    return -1;
  }
  *ctx_out = ctx;
  return 0;
}

/* The elements each rank converts, from the plan. */
static void read_conversion(const rt_job *job, const rs_plan *plan,
                            rt_report *r) {
  r->converted_sending = rt_xcalloc((size_t)job->world, sizeof(int64_t));
  r->converted_receiving = rt_xcalloc((size_t)job->world, sizeof(int64_t));
  for (int k = 0; k < job->world; k++) {
    rs_plan_stat(plan, k, RS_STAT_CONVERTED_SENDING, &r->converted_sending[k]);
    rs_plan_stat(plan, k, RS_STAT_CONVERTED_RECEIVING,
                 &r->converted_receiving[k]);
    r->converted_sending_all += (double)r->converted_sending[k];
    r->converted_receiving_all += (double)r->converted_receiving[k];
  }
}

/* ---- the ends of the ranges ------------------------------------------------
 * Every prediction is the one model evaluated again with the cluster at
 * the ends of its ranges (rt_cluster_at_end). Strategies whose time is a
 * function of link loads (ours, the reference's) compute their ends from
 * the loads they built once (rt_load_time_ends); gather-and-broadcast and
 * the lower bound are evaluated again on a view of the job sharing
 * everything but its cluster. */

static void job_at_end(const rt_job *job, int end, rt_job *view) {
  *view = *job;
  rt_cluster_at_end(&job->cluster, end, &view->cluster);
}

/* The reference's two algorithms: their time is a function of link
 * loads, so their ends come with them (rt_load_time_ends). */
static void model_reference(const rt_job *job, rt_report *r) {
  rt_load l;
  rt_load_init(&l, job->world);
  rt_strategy_reference(job, true, &l, &r->hier, &r->hier_stats);
  rt_load_clear(&l);
  rt_strategy_reference(job, false, &l, &r->direct, &r->direct_stats);
  rt_load_free(&l);
}

/* Gather-and-broadcast (and gather-convert-broadcast) and the lower bound
 * on one job: evaluated again on each end's view. */
typedef struct baselines {
  rt_result gb_rl, gb_ideal, gb_convert, lb;
} baselines;

static void model_baselines(const rt_job *job, const rt_options *opt,
                            bool converts, baselines *b) {
  rt_strategy_gather_bcast(job, opt->bucket_bytes, &b->gb_rl, &b->gb_ideal);
  if (converts)
    rt_strategy_gather_convert_bcast(job, opt->bucket_bytes, &b->gb_convert);
  rt_lower_bound(job, &b->lb);
}

/* Everything the report models without our plan: the reference's
 * algorithms, and the baselines at the point and at both ends of the
 * ranges. It runs on a thread of its own beside rs_plan_create, since it
 * needs nothing the plan says. */
typedef struct planless {
  const rt_job *job;
  rt_report *r;
  baselines b[3]; /* the point, fast, slow */
} planless;

static void *model_planless(void *arg) {
  planless *m = arg;
  const rt_job *job = m->job;
  rt_report *r = m->r;
  model_reference(job, r);
  model_baselines(job, &r->opt, job->dsum.converts, &m->b[0]);
  for (int end = 0; end < 2; end++) {
    rt_job view;
    job_at_end(job, end, &view);
    model_baselines(&view, &r->opt, job->dsum.converts, &m->b[1 + end]);
  }
  return NULL;
}

static void take_planless(const planless *m, rt_report *r) {
  rt_result *dst[] = {&r->gb_rl, &r->gb_ideal, &r->gb_convert, &r->lb};
  for (int k = 0; k < 3; k++) {
    const rt_result *src[] = {&m->b[k].gb_rl, &m->b[k].gb_ideal,
                              &m->b[k].gb_convert, &m->b[k].lb};
    for (int i = 0; i < 4; i++) {
      if (k == 0) *dst[i] = *src[i];
      else if (k == 1 + RT_END_FAST) dst[i]->time_low = src[i]->time;
      else dst[i]->time_high = src[i]->time;
    }
  }
}

/* The same sync in the model's dtype on both sides, planned and
 * modelled as ours. */
static int plan_without_conversion(const rt_job *job, rt_report *r,
                                   rt_err *e) {
  rt_job plain;
  rt_job_without_conversion(job, &plain);
  rs_context *ctx = NULL;
  rs_plan *plan = NULL;
  double layout_s = 0;
  int rc = plan_job(&plain, &r->opt, &ctx, &plan, NULL, &layout_s,
                    &r->plain_plan_s, e);
  if (rc == 0) {
    rt_load l;
    rt_load_init(&l, job->world);
    rc = rt_strategy_ours(&plain, plan, &l, NULL, &r->ours_plain,
                          &r->plain_messages, NULL, e);
    r->plain_bytes_local = l.local;
    r->plain_bytes_intra = l.intra;
    r->plain_bytes_inter = l.inter;
      rt_load_free(&l);
    rs_plan_destroy(plan);
    rs_context_destroy(ctx);
  }
  rt_job_view_free(&plain);
  r->ours_plain.key = "ours_plain";
  r->ours_plain.label = job->dtypes.train == RS_DTYPE_F32 &&
                                job->dtypes.infer == RS_DTYPE_F32
                            ? "ours, no conversion"
                            : "ours, bf16 -> bf16 (no conversion)";
  return rc;
}

/* The library's own description of the plan, every move with its round
 * and stage (rs_plan_to_json), for tools that read the plan itself. */
static int write_plan_json(const rs_plan *plan, const char *path, rt_err *e) {
  char *text = NULL;
  size_t len = 0;
  rs_status st = rs_plan_to_json(plan, &text, &len);
  if (st != RS_OK)
    return rt_fail(e, "rs_plan_to_json: %s", rs_status_name(st));
  FILE *f = fopen(path, "w");
  bool ok = f && fwrite(text, 1, len, f) == len && fputc('\n', f) != EOF;
  if (f && fclose(f)) ok = false;
  rs_free(text);
  return ok ? 0 : rt_fail(e, "--plan-json: cannot write '%s'", path);
}

/* Our plan's figures, the model of it and the plan without conversion.
 * Takes ctx and plan. */
static int model_plan(worker *w, rs_context *ctx, rs_plan *plan) {
  const rt_job *job = w->job;
  rt_report *r = w->r;
  rt_err *e = &w->err;
  double t2 = rt_now();
  rs_plan_num_moves(plan, &r->moves);
  rs_plan_stat(plan, RS_ALL_RANKS, RS_STAT_ROUNDS, &r->rounds);
  rs_plan_stat(plan, RS_ALL_RANKS, RS_STAT_STAGING_BYTES, &r->staging_peak);
  int64_t local = 0, intra = 0, inter = 0;
  rs_plan_stat(plan, RS_ALL_RANKS, RS_STAT_BYTES_LOCAL, &local);
  rs_plan_stat(plan, RS_ALL_RANKS, RS_STAT_BYTES_SENT_INTRA, &intra);
  rs_plan_stat(plan, RS_ALL_RANKS, RS_STAT_BYTES_SENT_INTER, &inter);
  r->bytes_local = (double)local;
  int64_t relayed = 0;
  rs_plan_stat(plan, RS_ALL_RANKS, RS_STAT_BYTES_COPIED_FROM_RELAY, &relayed);
  r->bytes_relay_copied = (double)relayed;
  int64_t packed = 0, unpacked = 0;
  rs_plan_stat(plan, RS_ALL_RANKS, RS_STAT_BYTES_PACKED, &packed);
  rs_plan_stat(plan, RS_ALL_RANKS, RS_STAT_BYTES_UNPACKED, &unpacked);
  r->bytes_packed = (double)packed;
  r->bytes_unpacked = (double)unpacked;
  r->bytes_intra = (double)intra;
  r->bytes_inter = (double)inter;
  r->bytes_needed = rt_job_needed_bytes(job);
  r->bytes_held = rt_held_bytes(job);
  r->converts = job->dsum.converts;
  if (r->converts) read_conversion(job, plan, r);
  atomic_store(&w->phase, 1);
  rt_load_init(&r->ours_load, job->world);
  if (r->opt.matrix)
    r->matrix = rt_xcalloc((size_t)job->world * (size_t)job->world,
                           sizeof *r->matrix);
  int rc = rt_strategy_ours(job, plan, &r->ours_load, r->matrix, &r->ours,
                            &r->messages, NULL, e);
  if (rc == 0 && r->opt.plan_json) rc = write_plan_json(plan, r->opt.plan_json, e);
  rs_plan_destroy(plan);
  rs_context_destroy(ctx);
  if (rc) return -1;
  r->model_s = rt_now() - t2;
  atomic_store(&w->phase, 2);
  return r->converts ? plan_without_conversion(job, r, e) : 0;
}

static int run(worker *w) {
  const rt_job *job = w->job;
  rt_report *r = w->r;
  rt_err *e = &w->err;
  rs_context *ctx = NULL;
  rs_plan *plan = NULL;
  atomic_store(&w->phase, 0);
  planless *m = rt_xcalloc(1, sizeof *m);
  m->job = job;
  m->r = r;
  pthread_t th;
  bool beside = pthread_create(&th, NULL, model_planless, m) == 0;
  int rc = plan_job(job, &r->opt, &ctx, &plan, &r->staging_setting,
                    &r->layout_s, &r->plan_s, e);
  if (rc == 0) rc = model_plan(w, ctx, plan);
  double t3 = rt_now();
  atomic_store(&w->phase, 3);
  if (beside) pthread_join(th, NULL);
  else model_planless(m);
  if (rc == 0) {
    take_planless(m, r);
    r->model_s += rt_now() - t3;
    atomic_store(&w->phase, 4);
  }
  free(m);
  return rc;
}

static void *thread_main(void *arg) {
  worker *w = arg;
  w->rc = run(w);
  atomic_store(&w->done, 1);
  return NULL;
}

int rt_report_run(const rt_job *job, const rt_options *opt, rt_report *out,
                  rt_err *e) {
  memset(out, 0, sizeof *out);
  out->job = job;
  out->opt = *opt;
  if (out->opt.bucket_bytes <= 0) out->opt.bucket_bytes = 1024.0 * 1024 * 1024;
  rt_model_totals(&job->model, &out->model_params, &out->model_bytes, NULL);
  worker w;
  memset(&w, 0, sizeof w);
  w.job = job;
  w.r = out;
  atomic_init(&w.phase, 0);
  atomic_init(&w.done, 0);
  if (!opt->progress) {
    w.rc = run(&w);
  } else {
    pthread_t th;
    if (pthread_create(&th, NULL, thread_main, &w) != 0) {
      w.rc = run(&w);
    } else {
      double start = rt_now();
      int shown = 0;
      while (!atomic_load(&w.done)) {
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
        double el = rt_now() - start;
        if (el >= 1.0 && !atomic_load(&w.done)) {
          int p = atomic_load(&w.phase);
          fprintf(stderr, "\rreshard: %s ... %.1f s   ", phases[p], el);
          fflush(stderr);
          shown = 1;
        }
      }
      pthread_join(th, NULL);
      if (shown) {
        fprintf(stderr, "\r%-72s\r", "");
        fflush(stderr);
      }
    }
  }
  if (w.rc) {
    if (e) *e = w.err;
    rt_report_free(out);
    return -1;
  }
  return 0;
}

void rt_report_free(rt_report *r) {
  if (!r) return;
  rt_load_free(&r->ours_load);
  free(r->matrix);
  free(r->converted_sending);
  free(r->converted_receiving);
  r->matrix = NULL;
  r->converted_sending = r->converted_receiving = NULL;
}

/* ---- table ----------------------------------------------------------------- */

static void hot_text(const rt_report *r, const rt_result *res, char *buf,
                     size_t n) {
  /* the lower bound names its rank in the note, it has no link figures */
  if (res->hot.rank < 0 || res == &r->lb) {
    snprintf(buf, n, "%s", res->note);
    return;
  }
  char who[128], b[32];
  rt_job_rank_name(r->job, res->hot.rank, who, sizeof who);
  size_t at = 0;
  if (res->hot.link >= 0)
    at = (size_t)snprintf(
        buf, n, "%s of %s: %s, %.0f msgs, %.3f s (%.2fx the mean)",
        rt_link_name(res->hot.link), who,
        rt_fmt_bytes(res->hot.bytes, b, sizeof b), res->hot.msgs,
        res->hot.time,
        res->hot.mean_time > 0 ? res->hot.time / res->hot.mean_time : 0);
  else
    at = (size_t)snprintf(buf, n, "%s", who);
  if (res->hot.convert_time > 0 && at < n)
    at += (size_t)snprintf(buf + at, n - at,
                           " + converting %s of %s in %.4f s after it",
                           rt_fmt_bytes(res->hot.convert_bytes, b, sizeof b),
                           rt_dtype_word(r->job->dtypes.train),
                           res->hot.convert_time);
  if (res->hot.calls_time > 0 && at < n)
    snprintf(buf + at, n - at, " + %.0f calls in %.4f s", res->hot.calls,
             res->hot.calls_time);
}

/* "0.352" or "n/a"; a time over ours ("2.07x") likewise. */
static const char *fmt_time(const rt_result *x, char *buf, size_t n) {
  if (x->not_applicable)
    snprintf(buf, n, "n/a");
  else
    snprintf(buf, n, "%.3f (%.3f-%.3f)", x->time, x->time_low, x->time_high);
  return buf;
}

/* x over ours at each end of the ranges: "1.52-1.61x" */
static const char *fmt_ratio_range(const rt_result *x, const rt_result *ours,
                                   char *buf, size_t n) {
  double a = ours->time_low > 0 ? x->time_low / ours->time_low : 0;
  double b = ours->time_high > 0 ? x->time_high / ours->time_high : 0;
  if (x->not_applicable)
    snprintf(buf, n, "n/a");
  else
    snprintf(buf, n, "%.2f-%.2fx", a < b ? a : b, a < b ? b : a);
  return buf;
}

static const char *fmt_ratio(const rt_result *x, double ours, char *buf,
                             size_t n) {
  if (x->not_applicable)
    snprintf(buf, n, "n/a");
  else
    snprintf(buf, n, "%.2fx", ours > 0 ? x->time / ours : 0);
  return buf;
}

static void domain_span(const rt_job *job, int from, int to, char *buf,
                        size_t n) {
  int a = job->domain[from], b = job->domain[to - 1];
  if (a == b)
    snprintf(buf, n, "%d", a);
  else
    snprintf(buf, n, "%d-%d", a, b);
}

size_t rt_report_rows(const rt_report *r, const rt_result **rows) {
  size_t n = 0;
  rows[n++] = &r->ours;
  if (r->converts) rows[n++] = &r->ours_plain;
  rows[n++] = &r->hier;
  rows[n++] = &r->direct;
  rows[n++] = &r->gb_rl;
  rows[n++] = &r->gb_ideal;
  if (r->converts) rows[n++] = &r->gb_convert;
  rows[n++] = &r->lb;
  return n;
}

void rt_report_print(const rt_report *r, FILE *f) {
  const rt_job *job = r->job;
  const rt_cluster *c = &job->cluster;
  bool moe = rt_model_is_moe(job->model.info);
  char tr[160], in[96], b1[32], b2[32], b3[32], b4[32], d1[32], d2[32];
  rt_train_describe(&job->train, moe, tr, sizeof tr);
  rt_infer_describe(&job->infer, moe, in, sizeof in);
  bool colocated = rt_job_colocated(job);
  domain_span(job, 0, job->ntrain, d1, sizeof d1);
  domain_span(job, job->infer_first, job->infer_first + job->ninfer, d2,
              sizeof d2);
  fprintf(f, "reshard plan: %s, %.2fe9 params (published %.2fe9), %s %s, "
             "%d tensors\n",
          job->model.info->name, r->model_params / 1e9,
          job->model.info->published_params / 1e9,
          rt_fmt_bytes(r->model_bytes, b1, sizeof b1),
          rt_dtype_word(job->model.t[0].dtype), job->model.n);
  fprintf(f, "train  : %d GPUs, ranks 0-%d, %s, Megatron order, domains %s\n",
          job->ntrain, job->ntrain - 1, tr, d1);
  fprintf(f, "infer  : %d GPUs, ranks %d-%d%s, %s, vLLM fused buffers, "
             "domains %s\n",
          job->ninfer, job->infer_first, job->infer_first + job->ninfer - 1,
          colocated ? " (colocated: the trainer's GPUs)" : "", in, d2);
  fprintf(f, "cluster: %s, %d of %d GPUs per NVLink domain used (%s "
             "placement); per GPU: NVLink %.0f GB/s, NIC %.0f GB/s per "
             "direction, copy %.0f GB/s; latency %.0f/%.0f us "
             "(NVLink/NIC)\n",
          c->name, job->domain_gpus, c->gpus_per_domain,
          rt_placement_name(job->placement), c->nvl_bw / 1e9, c->nic_bw / 1e9,
          c->copy_bw / 1e9, c->nvl_lat * 1e6, c->nic_lat * 1e6);
  fprintf(f, "plan   : %lld moves, %lld rounds, %.0f messages, staging "
             "%.0f MiB/rank (peak %.0f MiB; %s packed into it, %s unpacked "
             "from it); layouts %.2f s, plan %.2f s, model %.2f s\n",
          (long long)r->moves, (long long)r->rounds, r->messages,
          (double)r->staging_setting / (1 << 20),
          (double)r->staging_peak / (1 << 20),
          rt_fmt_bytes(r->bytes_packed, b1, sizeof b1),
          rt_fmt_bytes(r->bytes_unpacked, b2, sizeof b2), r->layout_s,
          r->plan_s, r->model_s);
  char held[48] = "";
  if (colocated)
    snprintf(held, sizeof held, "; held: %s",
             rt_fmt_bytes(r->bytes_held, b2, sizeof b2));
  char relayed[96] = "";
  if (r->bytes_relay_copied > 0)
    snprintf(relayed, sizeof relayed, "; %s of what arrived landed in "
                                      "relay slots and was copied out",
             rt_fmt_bytes(r->bytes_relay_copied, b4, sizeof b4));
  fprintf(f, "bytes  : the inference ranks need %s: %s stay on the GPU "
             "(local copy%s), %s inside domains (NVLink), %s across domains "
             "(NIC; must cross: %s)%s\n",
          rt_fmt_bytes(r->bytes_needed, b1, sizeof b1),
          rt_fmt_bytes(r->bytes_local, d1, sizeof d1), held,
          rt_fmt_bytes(r->bytes_intra, b3, sizeof b3),
          rt_fmt_bytes(r->bytes_inter, d2, sizeof d2),
          rt_fmt_bytes(r->lb.bytes_inter, b2, sizeof b2), relayed);
  rt_report_print_dtypes(r, f);
  fprintf(f, "\n%-34s %21s %9s %11s %11s  %s\n", "strategy",
          "time [s] (range)",
          "vs ours", "across", "inside", "hot spot / note");
  const rt_result *rows[RT_REPORT_ROWS];
  size_t nrows = rt_report_rows(r, rows);
  for (size_t i = 0; i < nrows; i++) {
    const rt_result *x = rows[i];
    char hot[640], tm[64], ratio[16];
    hot_text(r, x, hot, sizeof hot);
    bool none = x->not_applicable || x == &r->lb;
    fprintf(f, "%-34s %21s %9s %11s %11s  %s\n", x->label,
            fmt_time(x, tm, sizeof tm), fmt_ratio(x, r->ours.time, ratio,
                                                  sizeof ratio),
            x->not_applicable ? "-"
                              : rt_fmt_bytes(x->bytes_inter, b1, sizeof b1),
            none ? "-" : rt_fmt_bytes(x->bytes_intra, b2, sizeof b2), hot);
  }
  const rt_result *notes[] = {&r->hier, &r->direct};
  fprintf(f, "\n");
  for (size_t i = 0; i < sizeof notes / sizeof notes[0]; i++)
    if (!notes[i]->not_applicable)
      fprintf(f, "%-34s %s\n", notes[i]->label, notes[i]->note);
  double q = r->lb.time > 0 ? r->ours.time / r->lb.time : 0;
  char s1[16], s2[16], s3[16], s4[16];
  fprintf(f, "\nspeedup of our plan: %s over the reference's "
             "hierarchical, %s over direct point-to-point, %s over "
             "gather+broadcast as RL frameworks run it, %s over the "
             "ideal gather+broadcast\n",
          fmt_ratio(&r->hier, r->ours.time, s1, sizeof s1),
          fmt_ratio(&r->direct, r->ours.time, s2, sizeof s2),
          fmt_ratio(&r->gb_rl, r->ours.time, s3, sizeof s3),
          fmt_ratio(&r->gb_ideal, r->ours.time, s4, sizeof s4));
  if (r->converts)
    fprintf(f, "with conversion: %s over the same sync without it (ours), "
               "%s over %s\n",
            fmt_ratio(&r->ours_plain, r->ours.time, s1, sizeof s1),
            fmt_ratio(&r->gb_convert, r->ours.time, s2, sizeof s2),
            r->gb_convert.label);
  fprintf(f, "at the ends of the ranges: %s over hierarchical, %s over "
             "direct, %s over gather+broadcast (RL), %s over the ideal\n",
          fmt_ratio_range(&r->hier, &r->ours, s1, sizeof s1),
          fmt_ratio_range(&r->direct, &r->ours, s2, sizeof s2),
          fmt_ratio_range(&r->gb_rl, &r->ours, s3, sizeof s3),
          fmt_ratio_range(&r->gb_ideal, &r->ours, s4, sizeof s4));
  fprintf(f, "plan quality (ours / lower bound): %.3f\n", q);
  fprintf(f, "ranges: the same model with point-to-point at the ends of "
             "p2p_nvlink_fraction [%.2f, %.2f] and p2p_nic_fraction "
             "[%.2f, %.2f] of the collective rates, and every call at "
             "p2p_call_us [%.1f, %.1f] (docs/MODEL.md). Times "
             "are uncalibrated: ratios between point-to-point strategies "
             "hold at both ends; ratios against gather+broadcast (a "
             "collective) do not.\n",
          c->p2p_nvl_frac[0], c->p2p_nvl_frac[1], c->p2p_nic_frac[0],
          c->p2p_nic_frac[1], c->call_range_s[0] * 1e6,
          c->call_range_s[1] * 1e6);
}

/* ---- JSON ------------------------------------------------------------------ */

static json_object *jd(double v) { return json_object_new_double(v); }
static json_object *ji(int64_t v) { return json_object_new_int64(v); }
static json_object *js(const char *s) { return json_object_new_string(s); }

static json_object *result_json(const rt_report *r, const rt_result *x) {
  json_object *o = json_object_new_object();
  json_object_object_add(o, "key", js(x->key));
  json_object_object_add(o, "label", js(x->label));
  /* a strategy with no such mode: null figures */
  bool na = x->not_applicable;
  json_object_object_add(o, "applicable", json_object_new_boolean(!na));
  json_object_object_add(o, "time_s", na ? NULL : jd(x->time));
  json_object_object_add(o, "time_low", na ? NULL : jd(x->time_low));
  json_object_object_add(o, "time_high", na ? NULL : jd(x->time_high));
  json_object_object_add(o, "bytes_inter", na ? NULL : jd(x->bytes_inter));
  json_object_object_add(o, "bytes_intra", na ? NULL : jd(x->bytes_intra));
  if (r->ours.time > 0 && x != &r->ours)
    json_object_object_add(o, "vs_ours", na ? NULL : jd(x->time / r->ours.time));
  if (x->hot.rank >= 0 && x == &r->lb) {
    char who[128];
    rt_job_rank_name(r->job, x->hot.rank, who, sizeof who);
    json_object *h = json_object_new_object();
    json_object_object_add(h, "rank", ji(x->hot.rank));
    json_object_object_add(h, "rank_name", js(who));
    json_object_object_add(o, "hot_spot", h);
  } else if (x->hot.rank >= 0) {
    char who[128];
    rt_job_rank_name(r->job, x->hot.rank, who, sizeof who);
    json_object *h = json_object_new_object();
    json_object_object_add(h, "rank", ji(x->hot.rank));
    json_object_object_add(h, "rank_name", js(who));
    json_object_object_add(h, "link", x->hot.link >= 0
                                          ? js(rt_link_key(x->hot.link))
                                          : NULL);
    json_object_object_add(h, "bytes", jd(x->hot.bytes));
    json_object_object_add(h, "messages", jd(x->hot.msgs));
    json_object_object_add(h, "time_s", jd(x->hot.time));
    json_object_object_add(h, "mean_time_s", jd(x->hot.mean_time));
    if (x->hot.convert_bytes > 0) {
      json_object_object_add(h, "convert_bytes", jd(x->hot.convert_bytes));
      json_object_object_add(h, "convert_s", jd(x->hot.convert_time));
    }
    json_object_object_add(h, "calls", jd(x->hot.calls));
    json_object_object_add(h, "calls_s", jd(x->hot.calls_time));
    json_object_object_add(o, "hot_spot", h);
  }
  json_object_object_add(o, "note", js(x->note));
  return o;
}

/* time of x over ours; null when x does not apply */
static json_object *speedup_json(const rt_result *x, const rt_report *r) {
  return x->not_applicable ? NULL : jd(x->time / r->ours.time);
}

char *rt_report_json(const rt_report *r) {
  const rt_job *job = r->job;
  const rt_cluster *c = &job->cluster;
  json_object *root = json_object_new_object();
  json_object *m = json_object_new_object();
  json_object_object_add(m, "name", js(job->model.info->name));
  json_object_object_add(m, "params", jd(r->model_params));
  json_object_object_add(m, "published_params",
                         jd(job->model.info->published_params));
  json_object_object_add(m, "bytes", jd(r->model_bytes));
  json_object_object_add(m, "tensors", ji(job->model.n));
  json_object_object_add(root, "model", m);
  json_object *t = json_object_new_object();
  const rt_train *tr = &job->train;
  json_object_object_add(t, "gpus", ji(tr->world));
  json_object_object_add(t, "tp", ji(tr->tp));
  json_object_object_add(t, "cp", ji(tr->cp));
  json_object_object_add(t, "ep", ji(tr->ep));
  json_object_object_add(t, "etp", ji(tr->etp));
  json_object_object_add(t, "pp", ji(tr->pp));
  json_object_object_add(t, "dp", ji(tr->dp));
  json_object_object_add(t, "edp", ji(tr->edp));
  json_object_object_add(t, "fsdp", json_object_new_boolean(tr->fsdp));
  json_object_object_add(t, "first_rank", ji(0));
  json_object_object_add(root, "train", t);
  json_object *in = json_object_new_object();
  json_object_object_add(in, "gpus", ji(job->infer.world));
  json_object_object_add(in, "tp", ji(job->infer.tp));
  json_object_object_add(in, "dp", ji(job->infer.dp));
  json_object_object_add(in, "ep", ji(job->infer.ep));
  json_object_object_add(in, "first_rank", ji(job->infer_first));
  json_object_object_add(root, "infer", in);
  json_object *cl = json_object_new_object();
  json_object_object_add(cl, "name", js(c->name));
  json_object_object_add(cl, "gpus_per_domain", ji(c->gpus_per_domain));
  json_object_object_add(cl, "job_gpus_per_domain", ji(job->domain_gpus));
  json_object_object_add(cl, "placement", js(rt_placement_name(job->placement)));
  json_object_object_add(cl, "colocated",
                         json_object_new_boolean(rt_job_colocated(job)));
  json_object_object_add(cl, "nvlink_bytes_per_s", jd(c->nvl_bw));
  json_object_object_add(cl, "nic_bytes_per_s", jd(c->nic_bw));
  json_object_object_add(cl, "nvlink_latency_s", jd(c->nvl_lat));
  json_object_object_add(cl, "nic_latency_s", jd(c->nic_lat));
  json_object_object_add(cl, "call_s", jd(c->call_s));
  json_object_object_add(cl, "copy_bytes_per_s", jd(c->copy_bw));
  json_object_object_add(cl, "convert_bytes_per_s", jd(c->convert_bw));
  json_object_object_add(cl, "bcast_bytes_per_s", jd(rt_bcast_bw(job)));
  json_object_object_add(cl, "domains", ji(job->ndomains));
  json_object_object_add(root, "cluster", cl);
  json_object *p = json_object_new_object();
  json_object_object_add(p, "moves", ji(r->moves));
  json_object_object_add(p, "rounds", ji(r->rounds));
  json_object_object_add(p, "messages", jd(r->messages));
  json_object_object_add(p, "staging_setting_bytes", ji(r->staging_setting));
  json_object_object_add(p, "staging_peak_bytes", ji(r->staging_peak));
  json_object_object_add(p, "layout_s", jd(r->layout_s));
  json_object_object_add(p, "create_s", jd(r->plan_s));
  json_object_object_add(p, "model_s", jd(r->model_s));
  json_object_object_add(p, "bytes_needed", jd(r->bytes_needed));
  json_object_object_add(p, "bytes_local", jd(r->bytes_local));
  json_object_object_add(p, "bytes_held", jd(r->bytes_held));
  json_object_object_add(p, "bytes_copied_from_relay",
                         jd(r->bytes_relay_copied));
  json_object_object_add(p, "bytes_packed", jd(r->bytes_packed));
  json_object_object_add(p, "bytes_unpacked", jd(r->bytes_unpacked));
  json_object_object_add(p, "bytes_intra", jd(r->bytes_intra));
  json_object_object_add(p, "bytes_inter", jd(r->bytes_inter));
  json_object_object_add(p, "bytes_must_cross", jd(r->lb.bytes_inter));
  rt_report_dtypes_json(r, root, p);
  json_object_object_add(root, "plan", p);
  json_object *s = json_object_new_array();
  /* the strategies of every run first, in a fixed order; then, with
   * conversion, the same sync without it and gather-convert-broadcast */
  const rt_result *rows[] = {&r->ours,  &r->hier,       &r->direct,
                             &r->gb_rl, &r->gb_ideal,   &r->lb,
                             &r->ours_plain, &r->gb_convert};
  size_t nrows = r->converts ? 8 : 6;
  for (size_t i = 0; i < nrows; i++) {
    json_object *o = result_json(r, rows[i]);
    const rt_ref_stats *st = rows[i] == &r->hier     ? &r->hier_stats
                             : rows[i] == &r->direct ? &r->direct_stats
                                                     : NULL;
    if (st) {
      json_object_object_add(o, "as_benchmarked_s", jd(st->phased_time));
      json_object_object_add(o, "name_patterns", ji(st->patterns));
      json_object_object_add(o, "tensors_outside_rules",
                             ji(st->tensors_adapted));
      json_object_object_add(o, "extra_bytes", jd(st->extra_bytes));
      json_object_object_add(o, "pregather_s", jd(st->pregather_time));
    }
    json_object_array_add(s, o);
  }
  json_object_object_add(root, "strategies", s);
  json_object *sp = json_object_new_object();
  json_object_object_add(sp, "vs_hierarchical", speedup_json(&r->hier, r));
  json_object_object_add(sp, "vs_direct", speedup_json(&r->direct, r));
  json_object_object_add(sp, "vs_gather_bcast_rl", speedup_json(&r->gb_rl, r));
  json_object_object_add(sp, "vs_gather_bcast_ideal",
                         speedup_json(&r->gb_ideal, r));
  json_object_object_add(sp, "vs_without_conversion",
                         r->converts ? speedup_json(&r->ours_plain, r) : NULL);
  json_object_object_add(sp, "vs_gather_convert_bcast",
                         r->converts ? speedup_json(&r->gb_convert, r) : NULL);
  json_object_object_add(root, "speedups", sp);
  /* the same ratios at the fast and at the slow end of the ranges */
  const rt_result *vs[] = {&r->hier, &r->direct, &r->gb_rl, &r->gb_ideal};
  const char *vs_key[] = {"vs_hierarchical", "vs_direct",
                          "vs_gather_bcast_rl", "vs_gather_bcast_ideal"};
  json_object *spr = json_object_new_object();
  for (size_t i = 0; i < 4; i++) {
    json_object *a = NULL;
    if (!vs[i]->not_applicable && r->ours.time_low > 0 &&
        r->ours.time_high > 0) {
      a = json_object_new_array();
      json_object_array_add(a, jd(vs[i]->time_low / r->ours.time_low));
      json_object_array_add(a, jd(vs[i]->time_high / r->ours.time_high));
    }
    json_object_object_add(spr, vs_key[i], a);
  }
  json_object_object_add(root, "speedups_at_ends", spr);
  json_object *rg = json_object_new_object();
  json_object *a = json_object_new_array();
  json_object_array_add(a, jd(c->p2p_nvl_frac[0]));
  json_object_array_add(a, jd(c->p2p_nvl_frac[1]));
  json_object_object_add(rg, "p2p_nvlink_fraction", a);
  a = json_object_new_array();
  json_object_array_add(a, jd(c->p2p_nic_frac[0]));
  json_object_array_add(a, jd(c->p2p_nic_frac[1]));
  json_object_object_add(rg, "p2p_nic_fraction", a);
  a = json_object_new_array();
  json_object_array_add(a, jd(c->call_range_s[0] * 1e6));
  json_object_array_add(a, jd(c->call_range_s[1] * 1e6));
  json_object_object_add(rg, "p2p_call_us", a);
  json_object_object_add(root, "ranges", rg);
  json_object_object_add(root, "plan_quality",
                         jd(r->lb.time > 0 ? r->ours.time / r->lb.time : 0));
  json_object_object_add(
      root, "hierarchical_vs_direct",
      r->hier.not_applicable
          ? NULL
          : jd(r->hier.time > 0 ? r->direct.time / r->hier.time : 0));
  const char *text = json_object_to_json_string_ext(
      root, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED);
  char *out = rt_xstrdup(text);
  json_object_put(root);
  return out;
}
