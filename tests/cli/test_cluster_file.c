/* SPDX-License-Identifier: Apache-2.0 */
/* Cluster presets and the cluster JSON reader: a good file, and malformed
 * files giving a clear error, never a crash. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster.h"

Test(cluster, presets_from_the_reference) {
  cr_expect_geq(rt_cluster_preset_count(), 3);
  rt_cluster c;
  rt_err e;
  cr_assert_eq(rt_cluster_load("dgx-h100", &c, &e), 0, "%s", e.msg);
  cr_expect_eq(c.gpus_per_domain, 8);
  cr_expect_eq(c.job_gpus_per_domain, 8);
  cr_expect_float_eq(c.nvl_bw, 360e9, 1, "achieved NVLink busbw");
  cr_expect_float_eq(c.nic_bw, 47e9, 1);
  cr_expect_float_eq(c.nvlink_gbps, 450, 1e-9);
  cr_expect_float_eq(c.hbm_gbps, 3350, 1e-9, "H100 SXM HBM3");
  cr_expect_float_eq(c.copy_bw, 3015e9 / 2, 1, "a copy reads and writes");
  cr_expect_float_eq(c.convert_bw, 800e9, 1,
                     "the H200's measured rate (assumed for the H100)");
  cr_assert_eq(rt_cluster_load("GB200-NVL72", &c, &e), 0, "%s", e.msg);
  cr_expect_str_eq(c.name, "gb200-nvl72");
  cr_expect_eq(c.gpus_per_domain, 72);
  cr_expect_eq(c.gpus_per_host, 4);
  cr_expect_eq(c.job_gpus_per_domain, 64);
  cr_expect_float_eq(c.nvl_bw, 840e9, 1);
  cr_assert_eq(rt_cluster_load("dgx-b200", &c, &e), 0, "%s", e.msg);
  cr_expect_float_eq(c.nvl_bw, 900e9, 1, "no achieved figure: line rate");
  cr_expect_gt(c.nic_lat, 0);
  cr_expect_eq(rt_cluster_load("dgx-z900", &c, &e), -1);
  cr_expect(strstr(e.msg, "neither a preset") != NULL, "%s", e.msg);
  cr_expect(strstr(e.msg, "gb200-nvl72") != NULL, "lists the presets: %s", e.msg);
}

static char *write_temp(const char *text) {
  char *path = strdup("/tmp/reshard-cluster-XXXXXX");
  int fd = mkstemp(path);
  cr_assert(fd >= 0);
  FILE *f = fdopen(fd, "w");
  fputs(text, f);
  fclose(f);
  return path;
}

Test(cluster, good_file) {
  char *path = write_temp(
      "{\n  \"name\": \"lab\",\n  \"_comment\": \"two nodes\",\n"
      "  \"gpus_per_domain\": 4,\n  \"nvlink_gbps\": 100,\n"
      "  \"nic_gbps\": 25, \"nic_achieved_gbps\": 20,\n"
      "  \"nic_per_gpu\": 0.5,\n  \"nvlink_latency_us\": 1.5,\n"
      "  \"nic_latency_us\": 8, \"source\": \"measured\"\n}\n");
  rt_cluster c;
  rt_err e;
  cr_assert_eq(rt_cluster_load(path, &c, &e), 0, "%s", e.msg);
  cr_expect_str_eq(c.name, "lab");
  cr_expect_eq(c.gpus_per_domain, 4);
  cr_expect_eq(c.gpus_per_host, 4);
  cr_expect_eq(c.job_gpus_per_domain, 4);
  cr_expect_float_eq(c.nvl_bw, 100e9, 1);
  cr_expect_float_eq(c.nic_bw, 10e9, 1, "20 GB/s x 0.5 NIC per GPU");
  cr_expect_float_eq(c.nvl_lat, 1.5e-6, 1e-12);
  cr_expect_float_eq(c.nic_lat, 8e-6, 1e-12);
  cr_expect_eq(c.nccl_channels, 32);
  cr_expect_float_eq(c.copy_bw, 0.9 * 3350e9 / 2, 1,
                     "no HBM figure: an H100's, 90%% achieved");
  cr_expect_float_eq(c.convert_bw, 3350e9 * RT_CONVERT_PER_HBM, 1,
                     "no conversion figure: the H200's ratio to HBM");
  unlink(path);
  free(path);
  path = write_temp("{\"gpus_per_domain\": 8, \"nvlink_gbps\": 450, "
                    "\"nic_gbps\": 50, \"hbm_gbps\": 4000, "
                    "\"convert_gbps\": 1234}");
  cr_assert_eq(rt_cluster_load(path, &c, &e), 0, "%s", e.msg);
  cr_expect_float_eq(c.convert_gbps, 1234, 1e-9);
  cr_expect_float_eq(c.convert_bw, 1234e9, 1);
  unlink(path);
  free(path);
}

static void expect_bad(const char *text, const char *needle) {
  char *path = write_temp(text);
  rt_cluster c;
  rt_err e = {{0}};
  cr_expect_eq(rt_cluster_load(path, &c, &e), -1, "accepted: %s", text);
  cr_expect(strstr(e.msg, needle) != NULL, "'%s' not in: %s", needle, e.msg);
  cr_expect(strstr(e.msg, path) != NULL, "the message names the file: %s",
            e.msg);
  unlink(path);
  free(path);
}

Test(cluster, malformed_files_say_what_is_wrong) {
  expect_bad("", "unexpected end");
  expect_bad("{", "unexpected end");
  expect_bad("{\"gpus_per_domain\": 8,\n \"nvlink_gbps\": 450\n \"nic_gbps\": 50}",
             "line 3");
  expect_bad("[1, 2]", "top level must be a JSON object");
  expect_bad("{\"gpus_per_domain\": 8, \"nvlink_gbps\": 450}",
             "required key 'nic_gbps' is missing");
  expect_bad("{\"gpus_per_domain\": \"eight\", \"nvlink_gbps\": 450, "
             "\"nic_gbps\": 50}",
             "'gpus_per_domain' must be an integer");
  expect_bad("{\"gpus_per_domain\": 8, \"nvlink_gbps\": -1, \"nic_gbps\": 50}",
             "'nvlink_gbps' must be a number > 0");
  expect_bad("{\"gpus_per_domain\": 8, \"nvlink_gbps\": 450, \"nic_gbps\": 0}",
             "'nic_gbps' must be a number > 0");
  expect_bad("{\"gpus_per_domain\": 0, \"nvlink_gbps\": 450, \"nic_gbps\": 50}",
             "'gpus_per_domain' must be an integer in [1,");
  expect_bad("{\"gpus_per_domain\": 8, \"nvlink_gbps\": 450, \"nic_gbps\": 50, "
             "\"nic_gpbs\": 3}",
             "unknown key 'nic_gpbs'");
  expect_bad("{\"gpus_per_domain\": 8, \"nvlink_gbps\": 450, \"nic_gbps\": 50, "
             "\"nic_achieved_gbps\": 60}",
             "above the line rate");
  expect_bad("{\"gpus_per_domain\": 8, \"nvlink_gbps\": 450, \"nic_gbps\": 50, "
             "\"hbm_gbps\": 3000, \"hbm_achieved_gbps\": 3100}",
             "hbm_achieved_gbps (3100) is above the line rate");
  expect_bad("{\"gpus_per_domain\": 8, \"nvlink_gbps\": 450, \"nic_gbps\": 50, "
             "\"hbm_gbps\": 3000, \"convert_gbps\": 3100}",
             "convert_gbps (3100) is above the HBM line rate");
  expect_bad("{\"gpus_per_domain\": 8, \"nvlink_gbps\": 450, \"nic_gbps\": 50, "
             "\"convert_gbps\": 0}",
             "convert_gbps");
  expect_bad("{\"gpus_per_domain\": 8, \"job_gpus_per_domain\": 9, "
             "\"nvlink_gbps\": 450, \"nic_gbps\": 50}",
             "job_gpus_per_domain (9) is more than");
  expect_bad("{\"gpus_per_domain\": 8, \"nvlink_gbps\": 450, \"nic_gbps\": 50} x",
             "text after the object");
  expect_bad("{\"gpus_per_domain\": 8, \"nvlink_gbps\": true, \"nic_gbps\": 50}",
             "'nvlink_gbps' must be a number");
  expect_bad("{\"gpus_per_domain\": 8.5, \"nvlink_gbps\": 4, \"nic_gbps\": 5}",
             "must be an integer");
}

Test(cluster, missing_file) {
  rt_cluster c;
  rt_err e;
  cr_expect_eq(rt_cluster_load("/nonexistent/cluster.json", &c, &e), -1);
  cr_expect(strstr(e.msg, "cannot open") != NULL, "%s", e.msg);
  cr_expect_eq(rt_cluster_load("", &c, &e), -1);
}

/* The ranges of what real syncs pay and the point figures leave out:
 * p2p_nvlink_fraction and p2p_nic_fraction, a number or [low, high]. */
Test(cluster, p2p_fraction_ranges) {
  rt_cluster c, end;
  rt_err e;
  cr_assert_eq(rt_cluster_parse(
                   "{\"gpus_per_domain\": 8, \"nvlink_gbps\": 400, "
                   "\"nvlink_achieved_gbps\": 300, \"nic_gbps\": 50, "
                   "\"nic_achieved_gbps\": 40, "
                   "\"p2p_nvlink_fraction\": [0.5, 1], "
                   "\"_p2p_nvlink_fraction_source\": \"a citation\", "
                   "\"p2p_nic_fraction\": 0.75}",
                   "ranges", &c, &e),
               0, "%s", e.msg);
  cr_expect_float_eq(c.p2p_nvl_frac[0], 0.5, 1e-12);
  cr_expect_float_eq(c.p2p_nvl_frac[1], 1.0, 1e-12);
  cr_expect_float_eq(c.p2p_nic_frac[0], 0.75, 1e-12, "a number: both ends");
  cr_expect_float_eq(c.p2p_nic_frac[1], 0.75, 1e-12);
  cr_expect_float_eq(c.nvl_bw, 300e9, 1, "the point keeps the collective rate");
  rt_cluster_at_end(&c, RT_END_FAST, &end);
  cr_expect_float_eq(end.nvl_bw, 300e9, 1);
  cr_expect_float_eq(end.nic_bw, 30e9, 1);
  rt_cluster_at_end(&c, RT_END_SLOW, &end);
  cr_expect_float_eq(end.nvl_bw, 150e9, 1);
  cr_expect_float_eq(end.nic_bw, 30e9, 1);
  cr_expect_float_eq(end.coll_nvl_bw, 300e9, 1, "collectives keep theirs");

  /* without the keys: nothing left out, both ends at the point */
  cr_assert_eq(rt_cluster_parse("{\"gpus_per_domain\": 8, \"nvlink_gbps\": "
                                "400, \"nic_gbps\": 50}",
                                "plain", &c, &e),
               0, "%s", e.msg);
  cr_expect_float_eq(c.p2p_nvl_frac[0], 1.0, 1e-12);
  cr_expect_float_eq(c.p2p_nic_frac[1], 1.0, 1e-12);

  /* every preset carries both ranges, below 1 at the low end */
  for (int i = 0; i < rt_cluster_preset_count(); i++) {
    cr_assert_eq(rt_cluster_load(rt_cluster_preset_name(i), &c, &e), 0,
                 "%s", e.msg);
    cr_expect_lt(c.p2p_nvl_frac[0], 1.0, "%s", c.name);
    cr_expect_lt(c.p2p_nic_frac[0], 1.0, "%s", c.name);
    cr_expect_leq(c.p2p_nvl_frac[0], c.p2p_nvl_frac[1], "%s", c.name);
  }
}

/* The fixed cost of a call: p2p_call_us, a number or [low, high] in
 * microseconds; the point takes the low end, the slow end the high one. */
Test(cluster, call_cost_range) {
  rt_cluster c, end;
  rt_err e;
  cr_assert_eq(rt_cluster_parse("{\"gpus_per_domain\": 8, \"nvlink_gbps\": "
                                "400, \"nic_gbps\": 50, \"p2p_call_us\": "
                                "[4, 30]}",
                                "calls", &c, &e),
               0, "%s", e.msg);
  cr_expect_float_eq(c.call_range_s[0], 4e-6, 1e-15);
  cr_expect_float_eq(c.call_range_s[1], 30e-6, 1e-15);
  cr_expect_float_eq(c.call_s, 4e-6, 1e-15, "the point: the fast end");
  rt_cluster_at_end(&c, RT_END_FAST, &end);
  cr_expect_float_eq(end.call_s, 4e-6, 1e-15);
  rt_cluster_at_end(&c, RT_END_SLOW, &end);
  cr_expect_float_eq(end.call_s, 30e-6, 1e-15);
  cr_assert_eq(rt_cluster_parse("{\"gpus_per_domain\": 8, \"nvlink_gbps\": "
                                "400, \"nic_gbps\": 50, \"p2p_call_us\": 0}",
                                "free calls", &c, &e),
               0, "%s", e.msg);
  cr_expect_eq(c.call_s, 0);
  /* without the key calls cost nothing; every preset carries a range */
  cr_assert_eq(rt_cluster_parse("{\"gpus_per_domain\": 8, \"nvlink_gbps\": "
                                "400, \"nic_gbps\": 50}",
                                "plain", &c, &e),
               0, "%s", e.msg);
  rt_cluster_at_end(&c, RT_END_SLOW, &end);
  cr_expect_eq(end.call_s, 0);
  for (int i = 0; i < rt_cluster_preset_count(); i++) {
    cr_assert_eq(rt_cluster_load(rt_cluster_preset_name(i), &c, &e), 0,
                 "%s", e.msg);
    cr_expect_gt(c.call_range_s[0], 0, "%s", c.name);
    cr_expect_lt(c.call_range_s[0], c.call_range_s[1], "%s", c.name);
  }
  const char *bad[][2] = {
      {"[30, 4]", "low end (30) is above its high"},
      {"-1", "[0, 1e+06]"},
      {"[1, 2, 3]", "[low, high]"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char text[256];
    snprintf(text, sizeof text,
             "{\"gpus_per_domain\": 8, \"nvlink_gbps\": 400, "
             "\"nic_gbps\": 50, \"p2p_call_us\": %s}",
             bad[i][0]);
    cr_expect_eq(rt_cluster_parse(text, "bad", &c, &e), -1, "%s", text);
    cr_expect(strstr(e.msg, "'p2p_call_us'") != NULL, "names the key: %s",
              e.msg);
    cr_expect(strstr(e.msg, bad[i][1]) != NULL, "says why: %s", e.msg);
  }
}

Test(cluster, bad_p2p_fraction_range_names_the_key) {
  rt_cluster c;
  rt_err e;
  const char *head = "{\"gpus_per_domain\": 8, \"nvlink_gbps\": 400, "
                     "\"nic_gbps\": 50, ";
  struct {
    const char *tail, *needle;
  } bad[] = {
      {"\"p2p_nic_fraction\": [0.9, 0.5]}", "low end (0.9) is above its high"},
      {"\"p2p_nvlink_fraction\": [0.5, 1.5]}", "(0, 1]"},
      {"\"p2p_nvlink_fraction\": [0.5]}", "[low, high]"},
      {"\"p2p_nic_fraction\": [0, 0.5]}", "(0, 1]"},
      {"\"p2p_nic_fraction\": \"0.5\"}", "[low, high]"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char text[256];
    snprintf(text, sizeof text, "%s%s", head, bad[i].tail);
    cr_expect_eq(rt_cluster_parse(text, "bad", &c, &e), -1, "%s", text);
    const char *key = strstr(bad[i].tail, "p2p_nic") ? "'p2p_nic_fraction'"
                                                     : "'p2p_nvlink_fraction'";
    cr_expect(strstr(e.msg, key) != NULL, "names the key: %s", e.msg);
    cr_expect(strstr(e.msg, bad[i].needle) != NULL, "says why: %s", e.msg);
  }
}
