/* SPDX-License-Identifier: Apache-2.0 */
/* One run of the model: build the layouts, plan with libreshard, model
 * every strategy on the same links, and present the figures as a table or
 * JSON. */
#ifndef RT_REPORT_H
#define RT_REPORT_H

#include <stdio.h>

#include "strategies.h"

typedef struct rt_options {
  int64_t staging_bytes; /* RS_PARAM_STAGING_BYTES; 0: the library default */
  int rounds;            /* RS_PARAM_ROUNDS: an rs_rounds */
  double bucket_bytes;   /* gather-and-broadcast bucket (default 1 GiB) */
  bool matrix;           /* keep the rank-to-rank bytes (for the SVG) */
  bool progress;         /* a progress line on stderr after one second */
  const char *plan_json; /* write rs_plan_to_json of our plan there */
} rt_options;

typedef struct rt_report {
  const rt_job *job;
  rt_options opt;
  double layout_s, plan_s, model_s; /* wall seconds of each phase */
  int64_t moves, rounds, staging_peak, staging_setting;
  double messages;
  /* Where the bytes the inference ranks need come from, summed over ranks
   * from rs_plan_stat: copied inside a GPU (RS_STAT_BYTES_LOCAL), sent
   * inside a domain (..._SENT_INTRA), sent across domains (..._SENT_INTER);
   * and what they need in all (rt_job_needed_bytes). */
  double bytes_local, bytes_intra, bytes_inter, bytes_needed;
  double bytes_held; /* of those needed, held by the rank itself */
  /* copied out of relay slots (RS_STAT_BYTES_COPIED_FROM_RELAY): bytes
   * that crossed into a domain once, counted in bytes_inter already */
  double bytes_relay_copied;
  /* copied into staging before a send and out of it after a receive, as
   * they are (RS_STAT_BYTES_PACKED, _UNPACKED) */
  double bytes_packed, bytes_unpacked;
  double model_params, model_bytes;
  rt_result ours, hier, direct, gb_rl, gb_ideal, lb;
  /* When dtypes change on the way (job->dsum.converts): elements each
   * rank converts (RS_STAT_CONVERTED_SENDING, _RECEIVING), and, beside
   * ours, the same sync planned without conversion (the model's dtype on
   * both sides) and gather-convert-broadcast. */
  bool converts;
  int64_t *converted_sending, *converted_receiving; /* per rank */
  double converted_sending_all, converted_receiving_all;
  rt_result ours_plain, gb_convert;
  double plain_plan_s, plain_messages;
  double plain_bytes_local, plain_bytes_intra, plain_bytes_inter;
  rt_ref_stats hier_stats, direct_stats;
  rt_load ours_load;
  double *matrix; /* world*world, [src*world + dst]; NULL unless asked */
} rt_report;

int rt_report_run(const rt_job *job, const rt_options *opt, rt_report *out,
                  rt_err *e);
void rt_report_free(rt_report *r);
/* The strategies in table order, at most RT_REPORT_ROWS of them, into
 * @p rows; returns how many. With conversion, the same sync without it
 * follows ours and gather-convert-broadcast follows gather+broadcast. */
enum { RT_REPORT_ROWS = 8 };
size_t rt_report_rows(const rt_report *r, const rt_result **rows);
/* The human table. */
void rt_report_print(const rt_report *r, FILE *f);
/* The same as JSON (malloc'd text, caller frees). */
char *rt_report_json(const rt_report *r);

#endif
