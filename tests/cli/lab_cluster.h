/* SPDX-License-Identifier: Apache-2.0 */
/* A small hand-worked cluster for the cost-model tests: NVLink 100 GB/s,
 * NIC 10 GB/s, latencies 1 us / 2 us, domains of 2 GPUs, and no HBM
 * figure (so the default: copies at 0.9 x 3350 / 2 GB/s). */
#ifndef RESHARD_TESTS_LAB_CLUSTER_H
#define RESHARD_TESTS_LAB_CLUSTER_H

#include <criterion/criterion.h>

#include "cluster.h"

static rt_cluster lab(void) {
  rt_cluster c;
  rt_err e;
  cr_assert_eq(rt_cluster_parse(
                   "{\"name\": \"lab\", \"gpus_per_domain\": 2, "
                   "\"nvlink_gbps\": 100, \"nic_gbps\": 10, "
                   "\"nvlink_latency_us\": 1, \"nic_latency_us\": 2}",
                   "lab", &c, &e),
               0, "%s", e.msg);
  return c;
}

#endif
