/* SPDX-License-Identifier: Apache-2.0 */
/* Colocated jobs (reshard plan --colocate): trainer rank i and inference
 * rank i are one GPU. The shared ranks and the T == G rule; where the
 * bytes come from (local + intra + inter = what the inference ranks need);
 * the cost model, the strategies and the lower bound on hand-worked tiny
 * jobs; every catalog model; the named colocated configurations. */
#include <criterion/criterion.h>
#include <string.h>

#include "configs.h"
#include "lab_cluster.h"
#include "report.h"
#include "tiny_models.h"

static int colocated_job(rt_job *job, const rt_model_info *info,
                         const char *model, const char *train,
                         const char *infer, const rt_cluster *c, rt_err *e) {
  rt_job_spec spec = {model, info, train, infer, c, RT_PLACE_COLOCATED, 0};
  return rt_job_init(job, &spec, e);
}

static void run_report(const rt_job *job, rt_report *r) {
  rt_options opt = {0};
  rt_err e;
  cr_assert_eq(rt_report_run(job, &opt, r, &e), 0, "%s", e.msg);
}

/* Every byte an inference rank needs arrives once: by a copy on its GPU,
 * over NVLink or over the NIC. */
static void expect_bytes_add_up(const rt_report *r, const char *what) {
  double sum = r->bytes_local + r->bytes_intra + r->bytes_inter;
  cr_expect_float_eq(sum, r->bytes_needed, 0.5,
                     "%s: local %.0f + intra %.0f + inter %.0f != needed %.0f",
                     what, r->bytes_local, r->bytes_intra, r->bytes_inter,
                     r->bytes_needed);
  /* the figures of rs_plan_stat and of the plan's moves agree */
  cr_expect_float_eq(r->ours_load.local, r->bytes_local, 0.5, "%s", what);
  cr_expect_float_eq(r->ours.bytes_intra, r->bytes_intra, 0.5, "%s", what);
  cr_expect_float_eq(r->ours.bytes_inter, r->bytes_inter, 0.5, "%s", what);
}

Test(colocated, ranks_are_shared_and_counts_must_match) {
  rt_cluster c = lab();
  rt_job job;
  rt_err e;
  cr_assert_eq(colocated_job(&job, &tiny_dense, NULL, "tp=1,dp=4,fsdp=1",
                             "tp=2,dp=2", &c, &e),
               0, "%s", e.msg);
  cr_expect_eq(job.world, 4, "trainer and inference share ranks 0-3");
  cr_expect_eq(job.infer_first, 0);
  cr_expect_eq(job.ndomains, 2);
  cr_expect(rt_job_colocated(&job));
  char name[160];
  rt_job_rank_name(&job, 3, name, sizeof name);
  cr_expect(strstr(name, "train") && strstr(name, "infer"), "%s", name);
  rt_job_free(&job);

  cr_expect_eq(colocated_job(&job, &tiny_dense, NULL, "tp=2", "tp=2,dp=2", &c,
                             &e),
               -1, "2 trainer GPUs, 4 inference GPUs");
  cr_expect(strstr(e.msg, "--colocate") != NULL, "%s", e.msg);
  cr_expect(strstr(e.msg, "trainer uses 2 GPUs") != NULL, "%s", e.msg);
  cr_expect(strstr(e.msg, "inference engine 4") != NULL, "%s", e.msg);

  /* the split placement keeps its own ranks */
  rt_job_spec spec = {NULL, &tiny_dense, "tp=2", "tp=2,dp=2", &c,
                      RT_PLACE_SPLIT, 0};
  cr_assert_eq(rt_job_init(&job, &spec, &e), 0, "%s", e.msg);
  cr_expect_eq(job.world, 6);
  cr_expect_eq(job.infer_first, 2);
  rt_job_free(&job);
}

/* TP2 -> TP2 on the same two GPUs (one lab domain): every rank already
 * holds exactly what it needs. */
Test(colocated, identical_layouts_cost_a_copy) {
  rt_cluster c = lab();
  rt_job job;
  rt_err e;
  cr_assert_eq(colocated_job(&job, &tiny_dense, NULL, "tp=2", "tp=2", &c, &e),
               0, "%s", e.msg);
  rt_report r;
  run_report(&job, &r);
  double half = half_model(&job), sh = sharded_half(&job);
  cr_expect_float_eq(r.bytes_needed, 2 * half, 0.5);
  expect_bytes_add_up(&r, "tp=2 -> tp=2");
  cr_expect_gt(r.bytes_local, 0);

  /* lower bound: rank 0 fills half the model, copying what it holds
   * beside its links: NVLink alone, for the job has one domain and no
   * NIC to send to or relay through */
  double links = 100e9;
  cr_expect_float_eq(r.lb.time, half / (links + c.copy_bw), 1e-12, "%s",
                     r.lb.note);
  cr_expect_float_eq(r.lb.bytes_inter, 0, 0.5);
  cr_expect_geq(r.ours.time, r.lb.time * (1 - 1e-9));
  cr_expect_gt(r.ours.time, 0);

  /* the reference: no colocated mode, direct is a local copy */
  cr_expect(r.hier.not_applicable);
  cr_expect(strstr(r.hier.note, "n/a") != NULL, "%s", r.hier.note);
  cr_expect(!r.direct.not_applicable);
  cr_expect_float_eq(r.direct.time, half / c.copy_bw, 1e-12, "%s",
                     r.direct.note);

  /* gather-and-broadcast colocated: a ring all-gather of each sharded
   * tensor over the 2 ranks (NVLink, one hop), then one bucket of slicing */
  int sharded = 0;
  for (int t = 0; t < job.model.n; t++)
    sharded += job.model.t[t].role != RS_ROLE_NORM;
  cr_expect_float_eq(r.gb_ideal.time, sh / 100e9 + 1e-6, 1e-12, "%s",
                     r.gb_ideal.note);
  cr_expect_float_eq(r.gb_rl.time,
                     sh / 100e9 + sharded * 1e-6 + half / c.copy_bw, 1e-12,
                     "%s", r.gb_rl.note);
  cr_expect_float_eq(r.gb_rl.bytes_intra, 2 * sh, 0.5);
  cr_expect_float_eq(r.gb_rl.bytes_inter, 0, 0.5);

  char *json = rt_report_json(&r);
  cr_expect(strstr(json, "\"bytes_local\"") != NULL);
  cr_expect(strstr(json, "\"colocated\": true") != NULL);
  free(json);
  rt_report_free(&r);
  rt_job_free(&job);
}

/* With identical layouts nothing moves between ranks: a destination rank
 * that holds a piece takes it from itself. (The engine is told not to pad
 * the vocabulary, as vLLM would pad its 50 rows to 64 and split those.) */
Test(colocated, identical_layouts_move_nothing_between_ranks) {
  rt_cluster c = lab();
  const char *cases[][2] = {{"tp=2", "tp=2,vocab_pad=1"},
                            {"tp=2,dp=2", "tp=2,dp=2,vocab_pad=1"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    rt_job job;
    rt_err e;
    cr_assert_eq(colocated_job(&job, &tiny_dense, NULL, cases[i][0],
                               cases[i][1], &c, &e),
                 0, "%s", e.msg);
    rt_report r;
    run_report(&job, &r);
    cr_expect_float_eq(r.bytes_intra + r.bytes_inter, 0, 0.5,
                       "%s -> %s: %.0f bytes inside, %.0f across domains",
                       cases[i][0], cases[i][1], r.bytes_intra,
                       r.bytes_inter);
    cr_expect_float_eq(r.bytes_local, r.bytes_needed, 0.5);
    cr_expect_float_eq(r.bytes_held, r.bytes_needed, 0.5);
    rt_report_free(&r);
    rt_job_free(&job);
  }
}

/* FSDP4 -> TP2 x DP2 over two lab domains: some bytes are at home, some
 * cross NVLink, some the NIC. */
Test(colocated, fsdp_to_tp_keeps_what_a_rank_holds) {
  rt_cluster c = lab();
  rt_job job;
  rt_err e;
  cr_assert_eq(colocated_job(&job, &tiny_dense, NULL, "tp=1,dp=4,fsdp=1",
                             "tp=2,dp=2", &c, &e),
               0, "%s", e.msg);
  rt_report r;
  run_report(&job, &r);
  expect_bytes_add_up(&r, "fsdp4 -> tp2 x dp2");
  cr_expect_gt(r.bytes_local, 0);
  cr_expect_gt(r.bytes_inter, 0);
  cr_expect_gt(r.lb.time, 0);
  cr_expect_geq(r.ours.time, r.lb.time * (1 - 1e-9));
  cr_expect_geq(r.direct.time, r.lb.time * (1 - 1e-9));
  cr_expect_geq(r.gb_rl.time, r.gb_ideal.time);
  cr_expect_float_eq(r.ours_load.bytes[RT_COPY][0] +
                         r.ours_load.bytes[RT_COPY][1] +
                         r.ours_load.bytes[RT_COPY][2] +
                         r.ours_load.bytes[RT_COPY][3],
                     r.bytes_local + r.bytes_relay_copied + r.bytes_packed +
                         r.bytes_unpacked,
                     0.5, "local bytes, copies out of relay slots and "
                          "copies through staging load the copy link");
  rt_report_free(&r);
  rt_job_free(&job);
}

/* Every catalog model, FSDP or Megatron on one side and vLLM TP (and EP
 * for MoE models) on the other, on one DGX H100. */
Test(colocated, every_catalog_model) {
  rt_cluster c;
  rt_err e;
  cr_assert_eq(rt_cluster_load("dgx-h100", &c, &e), 0, "%s", e.msg);
  const char *dense[][2] = {{"tp=1,dp=8,fsdp=1", "tp=4,dp=2"},
                            {"tp=2,pp=2,dp=2", "tp=8"}};
  const char *moe[][2] = {{"tp=1,dp=8,fsdp=1", "tp=2,dp=4,ep=8"},
                          {"tp=2,ep=4,pp=2,gpus=8", "tp=4,dp=2,ep=8"}};
  for (int m = 0; m < rt_model_count(); m++) {
    const rt_model_info *info = rt_model_at(m);
    for (int k = 0; k < 4; k++) {
      bool is_moe = rt_model_is_moe(info);
      if (k >= 2 && !is_moe) break;
      const char *const *pair = k < 2 ? dense[k] : moe[k - 2];
      rt_job job;
      cr_assert_eq(colocated_job(&job, info, NULL, pair[0], pair[1], &c, &e),
                   0, "%s %s -> %s: %s", info->name, pair[0], pair[1], e.msg);
      rt_report r;
      run_report(&job, &r);
      char what[160];
      snprintf(what, sizeof what, "%s %s -> %s", info->name, pair[0],
               pair[1]);
      expect_bytes_add_up(&r, what);
      cr_expect_gt(r.bytes_local, 0, "%s", what);
      /* the planner takes every piece a rank holds from itself */
      cr_expect_float_eq(r.bytes_local, r.bytes_held, 0.5, "%s", what);
      cr_expect_gt(r.lb.time, 0, "%s", what);
      cr_expect_geq(r.ours.time, r.lb.time * (1 - 1e-9), "%s", what);
      cr_expect(r.hier.not_applicable, "%s", what);
      rt_report_free(&r);
      rt_job_free(&job);
    }
  }
}

Test(colocated, named_configurations) {
  bool qwen = false, dsv3 = false;
  for (int i = 0; i < rt_config_count(); i++) {
    const rt_config *cfg = rt_config_at(i);
    if (!cfg->colocate) continue;
    qwen |= !strcmp(cfg->model, "Qwen3-32B");
    dsv3 |= !strcmp(cfg->model, "DeepSeek-V3");
    rt_cluster c;
    rt_err e;
    cr_assert_eq(rt_cluster_load(cfg->cluster, &c, &e), 0, "%s", e.msg);
    rt_job job;
    cr_assert_eq(colocated_job(&job, NULL, cfg->model, cfg->train, cfg->infer,
                               &c, &e),
                 0, "%s: %s", cfg->name, e.msg);
    cr_expect_eq(job.world, job.ntrain, "%s", cfg->name);
    rt_report r;
    run_report(&job, &r);
    expect_bytes_add_up(&r, cfg->name);
    cr_expect_gt(r.bytes_local, 0, "%s", cfg->name);
    rt_report_free(&r);
    rt_job_free(&job);
  }
  cr_expect(qwen, "a colocated Qwen3-32B configuration");
  cr_expect(dsv3, "a colocated DeepSeek-V3 configuration");
}
