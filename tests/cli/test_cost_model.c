/* SPDX-License-Identifier: Apache-2.0 */
/* The cost model on tiny hand-worked cases: one link's time, the slowest
 * link, routing, the strategies and the lower bound on a small job. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "lab_cluster.h"
#include "report.h"
#include "tiny_models.h"

Test(cost, one_link_is_bytes_over_bandwidth_plus_latency) {
  rt_cluster c = lab();
  cr_expect_float_eq(rt_link_time(&c, RT_NIC_OUT, 1e9, 3), 0.1 + 3 * 2e-6, 1e-12);
  cr_expect_float_eq(rt_link_time(&c, RT_NIC_IN, 5e8, 0), 0.05, 1e-12);
  cr_expect_float_eq(rt_link_time(&c, RT_NVL_OUT, 1e9, 10), 0.01 + 10e-6, 1e-12);
  cr_expect_float_eq(rt_link_time(&c, RT_NVL_IN, 0, 1), 1e-6, 1e-15);
}

Test(cost, routing_and_the_slowest_link) {
  rt_cluster c = lab();
  const int domain[4] = {0, 0, 1, 1};
  rt_load l;
  rt_load_init(&l, 4);
  rt_load_add(&l, domain, 0, 2, 1e9, 1); /* across: NIC out 0, NIC in 2 */
  rt_load_add(&l, domain, 0, 1, 5e9, 1); /* inside: NVLink out 0, in 1 */
  rt_load_add(&l, domain, 3, 3, 9e9, 1); /* a rank to itself: a copy */
  cr_expect_float_eq(l.bytes[RT_NIC_OUT][0], 1e9, 1);
  cr_expect_float_eq(l.bytes[RT_NIC_IN][2], 1e9, 1);
  cr_expect_float_eq(l.bytes[RT_NVL_OUT][0], 5e9, 1);
  cr_expect_float_eq(l.bytes[RT_NVL_IN][1], 5e9, 1);
  cr_expect_float_eq(l.bytes[RT_NVL_IN][3], 0, 1);
  cr_expect_float_eq(l.bytes[RT_NVL_OUT][3], 0, 1);
  cr_expect_float_eq(l.bytes[RT_COPY][3], 9e9, 1, "on the GPU's memory");
  cr_expect_float_eq(l.inter, 1e9, 1);
  cr_expect_float_eq(l.intra, 5e9, 1);
  cr_expect_float_eq(l.local, 9e9, 1);
  /* 9 GB copied at the default 3015/2 GB/s: 6 ms, under the NIC's 0.1 s */
  rt_hot hot;
  double t = rt_load_time(&l, &c, &hot);
  /* NIC 0.1 s + 2 us beats NVLink 0.05 s + 1 us */
  cr_expect_float_eq(t, 0.1 + 2e-6, 1e-12);
  cr_expect_eq(hot.rank, 0);
  cr_expect_eq(hot.link, RT_NIC_OUT);
  cr_expect_float_eq(hot.bytes, 1e9, 1);
  cr_expect_float_eq(hot.msgs, 1, 1e-9);
  /* a heavier link elsewhere wins; between equal links (NIC out of 2, NIC
   * in of 1) the first in the order NVLink out, NVLink in, NIC out, NIC in */
  rt_load_add(&l, domain, 2, 1, 2e9, 4);
  t = rt_load_time(&l, &c, &hot);
  cr_expect_float_eq(t, 0.2 + 8e-6, 1e-12);
  cr_expect_eq(hot.rank, 2);
  cr_expect_eq(hot.link, RT_NIC_OUT);
  cr_expect_float_eq(hot.mean_time, (0.1 + 2e-6 + 0.2 + 8e-6) / 2, 1e-12,
                     "mean over the NIC-out links that carry traffic");
  rt_load_clear(&l);
  cr_expect_eq(rt_load_time(&l, &c, &hot), 0);
  cr_expect_eq(hot.rank, -1);
  rt_load_free(&l);
}

/* A rank's calls come after its slowest link, each at the cluster's call
 * time, and can make a rank with less traffic the slowest. */
Test(cost, calls_add_after_the_slowest_link) {
  rt_cluster c = lab();
  c.call_range_s[0] = c.call_s = 10e-6;
  c.call_range_s[1] = 40e-6;
  const int domain[4] = {0, 0, 1, 1};
  rt_load l;
  rt_load_init(&l, 4);
  rt_load_add(&l, domain, 0, 2, 1e6, 1); /* NIC: 100 us + 2 us */
  rt_load_add(&l, domain, 1, 3, 1e5, 1); /* NIC: 10 us + 2 us */
  rt_load_add_calls(&l, 0, 1);
  rt_load_add_calls(&l, 1, 3);
  rt_hot hot;
  cr_expect_float_eq(rt_load_time(&l, &c, &hot), 102e-6 + 10e-6, 1e-15);
  cr_expect_eq(hot.rank, 0);
  cr_expect_float_eq(hot.calls, 1, 1e-12);
  cr_expect_float_eq(hot.calls_time, 10e-6, 1e-15);
  rt_load_add_calls(&l, 1, 7); /* 10 calls: 12 us + 100 us */
  cr_expect_float_eq(rt_load_time(&l, &c, &hot), 112e-6, 1e-15);
  cr_expect_eq(hot.rank, 1, "more calls, less traffic");
  cr_expect_eq(hot.link, RT_NIC_OUT);
  /* a rank that only calls */
  rt_load_add_calls(&l, 3, 20);
  cr_expect_float_eq(rt_load_time(&l, &c, &hot), 200e-6 + 12e-6, 1e-15);
  cr_expect_eq(hot.rank, 3);
  double low, high;
  rt_load_time_ends(&l, NULL, &c, &low, &high);
  cr_expect_float_eq(low, 212e-6, 1e-15);
  cr_expect_float_eq(high, 20 * 40e-6 + 12e-6, 1e-15, "calls at the slow end");
  /* accumulating adds calls, unscaled, like messages */
  rt_load other;
  rt_load_init(&other, 4);
  rt_load_accumulate(&other, &l, 2);
  cr_expect_float_eq(other.calls[3], 20, 1e-12);
  rt_load_clear(&l);
  cr_expect_eq(l.calls[3], 0);
  rt_load_free(&other);
  rt_load_free(&l);
}

/* Tiny dense model: trainer TP2 on ranks 0-1 (domain 0), inference TP2 x
 * DP2 on ranks 2-5 (domains 1 and 2). Every tensor is sharded alike on
 * both sides, so each inference rank needs exactly what one trainer rank
 * holds (norms: both hold them). */
/* The engine does not pad the vocabulary (vocab_pad=1: vLLM would pad its
 * 50 rows to 64), so every sharded tensor is in halves on both sides, as
 * the figures below count it. */
static void tiny_job(rt_job *job, rt_cluster *c) {
  *c = lab();
  rt_err e;
  rt_job_spec spec = {NULL, &tiny_dense, "tp=2", "tp=2,dp=2,vocab_pad=1", c,
                      RT_PLACE_SPLIT, 0};
  cr_assert_eq(rt_job_init(job, &spec, &e), 0, "%s", e.msg);
  cr_assert_eq(job->ndomains, 3);
}

Test(cost, strategies_on_a_tiny_job) {
  rt_job job;
  rt_cluster c;
  tiny_job(&job, &c);
  double half = half_model(&job), model = 0;
  for (int t = 0; t < job.model.n; t++)
    model += (double)rt_tensor_bytes(&job.model.t[t]);
  int ntensors = job.model.n;

  /* lower bound: each inference domain takes in the model over its 2 NICs */
  rt_result lb;
  rt_lower_bound(&job, &lb);
  cr_expect_float_eq(lb.time, model / (2 * 10e9), 1e-9, "%s", lb.note);

  /* hierarchical: one source replica serves both inference domains: it
   * injects once into the first, which rings on to the second */
  rt_load l;
  rt_load_init(&l, job.world);
  rt_result hier, direct;
  rt_ref_stats st;
  rt_strategy_reference(&job, true, &l, &hier, &st);
  cr_expect_eq(st.tensors_adapted, 0);
  cr_expect_float_eq(l.bytes[RT_NIC_OUT][0], half, 1);
  cr_expect_float_eq(l.bytes[RT_NIC_OUT][1], half, 1);
  cr_expect_float_eq(l.bytes[RT_NIC_IN][2], half, 1);
  /* the sharded tensors ring on to the second domain; the norms have two
   * source replicas, one per domain, and fan out to the TP peer */
  cr_expect_float_eq(l.bytes[RT_NIC_OUT][2], sharded_half(&job), 1, "ring hop");
  cr_expect_float_eq(l.bytes[RT_NIC_IN][4], half, 1);
  cr_expect_float_eq(l.bytes[RT_NVL_OUT][2], norm_bytes(&job), 1, "fan-out");
  cr_expect_float_eq(hier.time, half / 10e9 + ntensors * 2e-6, 1e-9);
  /* direct: the one source replica sends to both inference replicas */
  rt_load_clear(&l);
  rt_strategy_reference(&job, false, &l, &direct, &st);
  cr_expect_float_eq(l.bytes[RT_NIC_OUT][0], 2 * half, 1);
  cr_expect_float_eq(l.bytes[RT_NIC_OUT][2], 0, 1);
  cr_expect_float_eq(direct.time, 2 * half / 10e9 + 2 * ntensors * 2e-6, 1e-9);

  /* gather + broadcast: ring broadcast at min(NVLink, NIC x 2 GPUs) =
   * 20 GB/s; ideal = model / 20 GB/s + 2 NIC hops + 2 NVLink hops */
  rt_result rl, ideal;
  cr_expect_float_eq(rt_bcast_bw(&job), 20e9, 1);
  rt_strategy_gather_bcast(&job, 1e18, &rl, &ideal);
  cr_expect_float_eq(ideal.time, model / 20e9 + 2 * 2e-6 + 2 * 1e-6, 1e-12);
  /* one bucket: gather (rank 1's half minus the norms, over NVLink, one
   * message per tensor it sends), then the broadcast */
  double sent = 0;
  int msgs = 0;
  for (int t = 0; t < job.model.n; t++)
    if (job.model.t[t].role != RS_ROLE_NORM) {
      sent += (double)rt_tensor_bytes(&job.model.t[t]) / 2;
      msgs++;
    }
  cr_expect_float_eq(rl.time, sent / 100e9 + msgs * 1e-6 + ideal.time, 1e-12,
                     "%s", rl.note);

  /* Every call at 1 us: the direct sender takes part in every tensor (one
   * call each); the ideal broadcast is one call; the RL variant's bucket
   * one gather call and one broadcast call. */
  const double call = 1e-6;
  job.cluster.call_range_s[0] = job.cluster.call_s = call;
  job.cluster.call_range_s[1] = 2 * call;
  rt_result direct_calls;
  rt_load_clear(&l);
  rt_strategy_reference(&job, false, &l, &direct_calls, &st);
  cr_expect_float_eq(l.calls[0], ntensors, 1e-12);
  cr_expect_float_eq(direct_calls.time, direct.time + ntensors * call, 1e-12);
  cr_expect_float_eq(direct_calls.time_high - direct_calls.time_low,
                     direct.time_high - direct.time_low + ntensors * call,
                     1e-12, "the slow end pays twice as much a call");
  /* hierarchical: a leader of the first inference domain forwards (the
   * ring hop), so it calls twice for a sharded tensor */
  rt_result hier_calls;
  rt_load_clear(&l);
  rt_strategy_reference(&job, true, &l, &hier_calls, &st);
  cr_expect_float_eq(l.calls[0], ntensors, 1e-12);
  cr_expect_gt(l.calls[2] + l.calls[3], ntensors);
  cr_expect_geq(hier_calls.time, hier.time + ntensors * call - 1e-12);
  rt_result rl_calls, ideal_calls;
  rt_strategy_gather_bcast(&job, 1e18, &rl_calls, &ideal_calls);
  cr_expect_float_eq(ideal_calls.time, ideal.time + call, 1e-12);
  cr_expect_float_eq(rl_calls.time, rl.time + 2 * call, 1e-12, "%s",
                     rl_calls.note);
  rt_load_free(&l);
  rt_job_free(&job);
}

Test(cost, our_plan_on_a_tiny_job) {
  rt_job job;
  rt_cluster c;
  tiny_job(&job, &c);
  rt_options opt = {0};
  opt.matrix = true;
  rt_report r;
  rt_err e;
  cr_assert_eq(rt_report_run(&job, &opt, &r, &e), 0, "%s", e.msg);
  double sh = sharded_half(&job), nb = norm_bytes(&job);
  /* our plan sends every byte once into each inference domain, from a
   * trainer that holds it or from the inference domain that received it
   * first: each trainer NIC carries its shard once or twice (and some of
   * the norms) */
  double out0 = r.ours_load.bytes[RT_NIC_OUT][0];
  cr_expect(out0 >= sh && out0 <= 2 * (sh + nb), "%g", out0);
  cr_expect_float_eq(r.ours.bytes_inter, 2 * (2 * sh + nb), 1);
  double in2 = r.ours_load.bytes[RT_NIC_IN][2];
  cr_expect(in2 >= sh && in2 <= sh + nb, "%g", in2);
  cr_expect(r.matrix[0 * job.world + 2] >= sh);
  cr_expect(r.matrix[0 * job.world + 3] <= nb, "rank 0 holds nothing rank 3 "
                                                "needs but norms");
  cr_expect_geq(r.ours.time, r.lb.time);
  cr_expect_eq(r.ours.hot.link, RT_NIC_OUT);
  cr_expect(r.ours.hot.rank == 0 || r.ours.hot.rank == 1);
  char *json = rt_report_json(&r);
  cr_expect(strstr(json, "\"plan_quality\"") != NULL);
  free(json);
  rt_report_free(&r);
  rt_job_free(&job);
}

Test(cost, reference_rules_force_a_pregather) {
  /* TP2 x FSDP2 on the trainer: two sharded axes, outside the reference's
   * one-axis rule: it must gather first, we need not. */
  rt_cluster c = lab();
  rt_job job;
  rt_err e;
  rt_job_spec spec = {NULL, &tiny_dense, "tp=2,dp=2,fsdp=1", "tp=2,dp=2", &c,
                      RT_PLACE_SPLIT, 0};
  cr_assert_eq(rt_job_init(&job, &spec, &e), 0, "%s", e.msg);
  rt_load l;
  rt_load_init(&l, job.world);
  rt_result hier;
  rt_ref_stats st;
  rt_strategy_reference(&job, true, &l, &hier, &st);
  cr_expect_gt(st.pregathered, 0);
  cr_expect_gt(st.extra_bytes, 0);
  cr_expect_gt(st.pregather_time, 0);
  cr_expect(strstr(hier.note, "pre-gathered") != NULL, "%s", hier.note);
  rt_load_free(&l);
  rt_job_free(&job);
}
