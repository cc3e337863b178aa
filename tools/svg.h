/* SPDX-License-Identifier: Apache-2.0 */
/* An SVG picture of a report: the rank-to-rank traffic matrix of our plan,
 * the time of every GPU link (NIC and NVLink, out and in) against the
 * lower bound, and the strategies side by side. */
#ifndef RT_SVG_H
#define RT_SVG_H

#include "report.h"

/* The report must have been run with opt.matrix set. */
int rt_svg_write(const rt_report *r, const char *path, rt_err *e);

#endif
