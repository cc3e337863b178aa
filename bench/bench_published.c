/* SPDX-License-Identifier: Apache-2.0 */
/* bench_published: the cost model of `reshard plan` held against published
 * figures. Runs the reference's (NVIDIA nccl_m2n) published and shipped
 * configurations and the catalog's own, and prints our predictions beside
 * the reference's measured figures, with the targets of the model-catalog
 * issue (see docs/MODEL.md):
 *  - every configuration within 1.10x of its lower bound;
 *  - our plan no slower than the reference's hierarchical algorithm;
 *  - the modelled hierarchical / direct ratio within +-30% of the published
 *    2.65x (DeepSeek-V3, 256 GB200) and 2.20x (Qwen3-235B, 128 GB200);
 *  - speedup over gather-and-broadcast, both variants, for Qwen3-235B and
 *    DeepSeek-V3 on DGX H100 and GB200 (NVIDIA reports 2.7x-5.7x measured);
 *  - plan creation for the largest configuration under 1 s on one core.
 * Everything is a model: no GPU is needed. Usage: bench_published [reps]. */
#include "bench_common.h"

#include <math.h>

#include "configs.h"
#include "report.h"

typedef struct row {
  const rt_config *cfg;
  rt_report r;
  rt_job job;
  int world;
  int ok;
} row;

static double plan_once(const rt_job *job) {
  rs_context *ctx = NULL;
  rs_layout *src = NULL, *dst = NULL;
  rt_err e;
  if (rt_job_layouts(job, &ctx, &src, &dst, &e)) {
    fprintf(stderr, "%s\n", e.msg);
    exit(1);
  }
  rs_plan *plan = NULL;
  double t0 = bench_now();
  BENCH_CHECK(ctx, rs_plan_create(src, dst, &plan));
  double t = bench_now() - t0;
  rs_plan_destroy(plan);
  rs_layout_destroy(src);
  rs_layout_destroy(dst);
  rs_context_destroy(ctx);
  return t;
}

static const char *yes(int ok) { return ok ? "MET" : "MISSED"; }

int main(int argc, char **argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 3;
  if (reps < 1) reps = 1;
  bench_print_machine("bench_published: predicted weight-sync times vs "
                      "published figures");
  int pinned = bench_pin_to_cpu(0) == 0;
  printf("pinning : %s\n", pinned ? "sched_setaffinity -> CPU 0 (one core)"
                                  : "sched_setaffinity FAILED, not pinned");
  printf("model   : per-GPU links (NVLink out/in, NIC out/in), time = "
         "bytes/bandwidth + messages x latency,\n          slowest link "
         "wins; achieved bandwidths from shared/reference/clusters.json "
         "(docs/MODEL.md)\n");
  double t_start = bench_now();
  int n = rt_config_count();
  row *rows = bench_xcalloc((size_t)n, sizeof *rows);
  for (int i = 0; i < n; i++) {
    row *w = &rows[i];
    w->cfg = rt_config_at(i);
    rt_err e;
    rt_cluster cl;
    if (rt_cluster_load(w->cfg->cluster, &cl, &e)) {
      fprintf(stderr, "%s: %s\n", w->cfg->name, e.msg);
      return 1;
    }
    rt_placement place = w->cfg->colocate ? RT_PLACE_COLOCATED : RT_PLACE_SPLIT;
    rt_job_spec spec = {w->cfg->model, NULL, w->cfg->train, w->cfg->infer,
                        &cl, place, 0};
    if (rt_job_init(&w->job, &spec, &e)) {
      fprintf(stderr, "%s: %s\n", w->cfg->name, e.msg);
      return 1;
    }
    rt_options opt = {0};
    if (rt_report_run(&w->job, &opt, &w->r, &e)) {
      fprintf(stderr, "%s: %s\n", w->cfg->name, e.msg);
      return 1;
    }
    w->world = w->job.world;
    w->ok = 1;
    fprintf(stderr, "  [%2d/%d] %-44s %.1f s so far\n", i + 1, n,
            w->cfg->name, bench_now() - t_start);
  }

  /* 1. The reference's measured model bench. */
  printf("\n== 1. The reference's model bench (GB200 NVL72), measured vs "
         "modelled\n");
  printf("modelled: 'algorithm' = every transfer of the model concurrent "
         "(how we compare strategies);\n          'as benchmarked' = its "
         "bench's name patterns one after another, times added\n\n");
  printf("%-30s %-14s %10s %10s %10s %8s %8s\n", "configuration", "algorithm",
         "measured", "model", "as bench", "meas/mod", "meas/ab");
  int cal_ok = 1;
  double pub_ratio[2] = {0}, mod_ratio[2] = {0}, ab_ratio[2] = {0};
  int ncal = 0;
  for (int i = 0; i < n; i++) {
    row *w = &rows[i];
    if (w->cfg->meas_hier_ms <= 0) continue;
    const rt_report *r = &w->r;
    double mh = w->cfg->meas_hier_ms / 1e3, md = w->cfg->meas_direct_ms / 1e3;
    printf("%-30s %-14s %9.3fs %9.3fs %9.3fs %8.2f %8.2f\n", w->cfg->name,
           "hierarchical", mh, r->hier.time, r->hier_stats.phased_time,
           mh / r->hier.time, mh / r->hier_stats.phased_time);
    printf("%-30s %-14s %9.3fs %9.3fs %9.3fs %8.2f %8.2f\n", "", "direct P2P",
           md, r->direct.time, r->direct_stats.phased_time,
           md / r->direct.time, md / r->direct_stats.phased_time);
    printf("%-30s %-14s %10s %9.3fs %9s\n", "", "ours", "-", r->ours.time,
           "-");
    if (ncal < 2) {
      pub_ratio[ncal] = md / mh;
      mod_ratio[ncal] = r->direct.time / r->hier.time;
      ab_ratio[ncal] = r->direct_stats.phased_time / r->hier_stats.phased_time;
      ncal++;
    }
  }
  printf("\nwhat the link model leaves out, per reshard call on the critical "
         "path of that bench\n(measured - as benchmarked) / calls:\n");
  for (int i = 0; i < n; i++) {
    row *w = &rows[i];
    if (w->cfg->meas_hier_ms <= 0) continue;
    const rt_report *r = &w->r;
    printf("  %-28s hierarchical %+7.2f ms/call, direct %+7.2f ms/call "
           "(%d calls)\n",
           w->cfg->name,
           (w->cfg->meas_hier_ms - 1e3 * r->hier_stats.phased_time) /
               r->hier_stats.serial_calls,
           (w->cfg->meas_direct_ms - 1e3 * r->direct_stats.phased_time) /
               r->direct_stats.serial_calls,
           r->hier_stats.serial_calls);
  }
  printf("\n%-30s %10s %14s %14s %10s\n", "direct / hierarchical",
         "published", "model (alg.)", "model (bench)", "+-30%?");
  const char *calname[2] = {"DeepSeek-V3, 256 GB200", "Qwen3-235B, 128 GB200"};
  for (int k = 0; k < ncal; k++) {
    double dev = ab_ratio[k] / pub_ratio[k] - 1;
    int ok = fabs(dev) <= 0.30 || fabs(mod_ratio[k] / pub_ratio[k] - 1) <= 0.30;
    cal_ok &= ok;
    printf("%-30s %9.2fx %13.2fx %13.2fx %10s\n", calname[k], pub_ratio[k],
           mod_ratio[k], ab_ratio[k], ok ? "within" : "outside");
  }

  /* 2. Every configuration. */
  printf("\n== 2. Every configuration: predicted times [s]\n\n");
  printf("%-44s %5s %7s %7s %6s %7s %6s %7s %7s %7s %6s %6s %6s\n",
         "configuration", "GPUs", "ours", "bound", "qual", "hier", "h/ours",
         "direct", "gb-RL", "gb-ideal", "xRL", "xideal", "plan");
  int q_ok = 1, h_ok = 1, nq = 0, nh = 0;
  double worst_q = 0, worst_h = 0;
  const char *worst_q_name = "", *worst_h_name = "";
  for (int i = 0; i < n; i++) {
    const row *w = &rows[i];
    const rt_report *r = &w->r;
    double q = r->ours.time / r->lb.time, h = r->hier.time / r->ours.time;
    /* colocated jobs: the reference has no algorithm (time 0), no figure */
    bool has_hier = r->hier.time > 0;
    if (q > 1.10) {
      q_ok = 0;
      nq++;
    }
    if (q > worst_q) {
      worst_q = q;
      worst_q_name = w->cfg->name;
    }
    if (has_hier && r->ours.time > r->hier.time * (1 + 1e-9)) {
      h_ok = 0;
      nh++;
    }
    if (has_hier && (worst_h == 0 || h < worst_h)) {
      worst_h = h;
      worst_h_name = w->cfg->name;
    }
    char hier[16] = "      -", hr[16] = "     -";
    if (has_hier) {
      snprintf(hier, sizeof hier, "%7.3f", r->hier.time);
      snprintf(hr, sizeof hr, "%6.2f", h);
    }
    printf("%-44s %5d %7.3f %7.3f %6.3f %s %s %7.3f %7.3f %7.3f %6.2f "
           "%6.2f %5.2fs\n",
           w->cfg->name, w->world, r->ours.time, r->lb.time, q, hier, hr,
           r->direct.time, r->gb_rl.time, r->gb_ideal.time,
           r->gb_rl.time / r->ours.time, r->gb_ideal.time / r->ours.time,
           r->plan_s);
  }
  printf("\nqual = ours / lower bound; h/ours = reference hierarchical / "
         "ours; xRL, xideal = speedup over\ngather+broadcast as RL "
         "frameworks run it / ideal; plan = rs_plan_create, one core\n");

  printf("\nwhere the plan is slower than the hierarchical algorithm or "
         "above 1.10x the bound:\n");
  for (int i = 0; i < n; i++) {
    const row *w = &rows[i];
    const rt_report *r = &w->r;
    if ((r->ours.time <= r->hier.time || r->hier.time <= 0) &&
        r->ours.time <= 1.10 * r->lb.time)
      continue;
    char who[128], b[32];
    rt_job_rank_name(&w->job, r->ours.hot.rank, who, sizeof who);
    printf("  %s: ours %.3f s, hier %.3f s, bound %.3f s; slowest link %s "
           "of %s, %s (bound: %s)\n",
           w->cfg->name, r->ours.time, r->hier.time, r->lb.time,
           rt_link_name(r->ours.hot.link), who,
           rt_fmt_bytes(r->ours.hot.bytes, b, sizeof b), r->lb.note);
  }

  /* 3. Published incumbents. */
  printf("\n== 3. Other published figures beside our gather+broadcast "
         "model\n");
  for (int i = 0; i < n; i++) {
    const row *w = &rows[i];
    if (!w->cfg->baseline) continue;
    printf("  %s\n    published: %s\n    modelled : gather+broadcast (RL) "
           "%.2f s, ideal %.2f s, ours %.3f s\n",
           w->cfg->name, w->cfg->baseline, w->r.gb_rl.time,
           w->r.gb_ideal.time, w->r.ours.time);
  }

  /* 4. Plan creation, largest configuration, one core. */
  int big = 0;
  for (int i = 1; i < n; i++)
    if (rows[i].world * rows[i].job.model.n > rows[big].world * rows[big].job.model.n)
      big = i;
  double *times = bench_xcalloc((size_t)reps, sizeof *times);
  for (int k = 0; k < reps; k++) times[k] = plan_once(&rows[big].job);
  double tmin = bench_min(times, reps), tmed = bench_median(times, reps);
  printf("\n== 4. rs_plan_create, largest configuration (%s, %d ranks, %d "
         "tensors), one core: min %.3f s, median %.3f s over %d\n",
         rows[big].cfg->name, rows[big].world, rows[big].job.model.n, tmin,
         tmed, reps);

  /* 5. Targets. */
  const char *gb[] = {"dsv3-bench-256gpus-gb200", "dsv3-256gpus-h100",
                      "qwen235b-bench-128gpus-gb200", "qwen235b-128gpus-h100"};
  printf("\n== 5. Targets\n");
  printf("  every configuration within 1.10x of its lower bound   : %s "
         "(worst %.3f, %s; %d above)\n",
         yes(q_ok), worst_q, worst_q_name, nq);
  printf("  ours no slower than the reference's hierarchical      : %s "
         "(worst hier/ours %.3f, %s; %d slower)\n",
         yes(h_ok), worst_h, worst_h_name, nh);
  printf("  hierarchical/direct within +-30%% of published         : %s "
         "(%.2fx vs 2.65x, %.2fx vs 2.20x as benchmarked; %.2fx, %.2fx "
         "all-concurrent)\n",
         yes(cal_ok), ab_ratio[0], ab_ratio[1], mod_ratio[0], mod_ratio[1]);
  printf("  speedup over gather+broadcast (RL / ideal), NVIDIA reports 2.7x-"
         "5.7x measured;\n  [at the slow end of the point-to-point ranges, "
         "where ours slows and the broadcast does not]:\n");
  for (size_t k = 0; k < sizeof gb / sizeof gb[0]; k++) {
    const rt_config *c = rt_config_find(gb[k]);
    for (int i = 0; i < n; i++)
      if (rows[i].cfg == c) {
        const rt_report *q = &rows[i].r;
        printf("    %-44s %6.2fx / %5.2fx  [%.2fx / %.2fx]\n", c->name,
               q->gb_rl.time / q->ours.time, q->gb_ideal.time / q->ours.time,
               q->gb_rl.time_high / q->ours.time_high,
               q->gb_ideal.time_high / q->ours.time_high);
      }
  }
  printf("  plan creation, largest configuration, under 1 s       : %s "
         "(%.3f s)\n",
         yes(tmin < 1.0), tmin);
  printf("\nbench: %.1f s wall, peak RSS %.0f MiB\n", bench_now() - t_start,
         bench_peak_rss_kib() / 1024.0);

  char a[64], bb[64], c[64];
  bench_table_header();
  for (int k = 0; k < ncal; k++) {
    snprintf(a, sizeof a, "%.2f", ab_ratio[k]);
    snprintf(bb, sizeof bb, "%.2f (published)", pub_ratio[k]);
    snprintf(c, sizeof c, "%.2f", ab_ratio[k] / pub_ratio[k]);
    bench_table_row(k ? "direct/hier Qwen3-235B (bench)" : "direct/hier DSV3 (bench)",
                    a, bb, c);
  }
  snprintf(a, sizeof a, "%.3f", worst_q);
  snprintf(c, sizeof c, "%.2f", worst_q / 1.10);
  bench_table_row("worst ours / lower bound", a, "1.100 (target)", c);
  snprintf(a, sizeof a, "%.3f", worst_h);
  snprintf(c, sizeof c, "%.2f", worst_h);
  bench_table_row("worst hier / ours", a, "1.000 (target)", c);
  snprintf(a, sizeof a, "%.3f", tmin);
  snprintf(c, sizeof c, "%.2f", tmin);
  bench_table_row("plan create, largest [s]", a, "1.000 (target)", c);

  for (int i = 0; i < n; i++) {
    rt_report_free(&rows[i].r);
    rt_job_free(&rows[i].job);
  }
  free(rows);
  free(times);
  return 0;
}
