/* SPDX-License-Identifier: Apache-2.0 */
/* Named configurations: the reference's published and shipped system
 * configurations (shared/reference/published.md) and the catalog's own,
 * one per model and cluster, as `reshard plan --config NAME` and the
 * published-figures bench use them. */
#ifndef RT_CONFIGS_H
#define RT_CONFIGS_H

#include <stdbool.h>

typedef struct rt_config {
  const char *name;
  const char *model, *train, *infer, *cluster;
  const char *origin;      /* where it comes from */
  double meas_hier_ms;     /* the reference's measured figures; 0: none */
  double meas_direct_ms;
  const char *baseline;    /* another published figure (text), or NULL */
  bool colocate;           /* trainer and inference on the same GPUs */
} rt_config;

int rt_config_count(void);
const rt_config *rt_config_at(int i);
const rt_config *rt_config_find(const char *name);

#endif
