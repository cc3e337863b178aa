/* SPDX-License-Identifier: Apache-2.0 */
/* The SVG picture. */
#include "svg.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void esc(FILE *f, const char *s) {
  for (; *s; s++) {
    if (*s == '<')
      fputs("&lt;", f);
    else if (*s == '>')
      fputs("&gt;", f);
    else if (*s == '&')
      fputs("&amp;", f);
    else
      fputc(*s, f);
  }
}

/* t in [0, 1] -> a colour from light to dark of one hue. */
static void shade(double t, bool inter, char *buf, size_t n) {
  if (t < 0) t = 0;
  if (t > 1) t = 1;
  /* inter: yellow -> red -> dark red; intra: light blue -> dark blue */
  int r, g, b;
  if (inter) {
    r = (int)(255 - 120 * t);
    g = (int)(220 - 200 * t);
    b = (int)(120 - 100 * t);
  } else {
    r = (int)(200 - 180 * t);
    g = (int)(225 - 150 * t);
    b = (int)(255 - 90 * t);
  }
  snprintf(buf, n, "#%02x%02x%02x", r, g, b);
}

static void matrix(FILE *f, const rt_report *r, double x0, double y0,
                   double size) {
  const rt_job *job = r->job;
  int W = job->world;
  int bin = 1;
  while ((W + bin - 1) / bin > 128) bin++;
  int n = (W + bin - 1) / bin;
  double cell = size / n;
  double *m = rt_xcalloc((size_t)n * (size_t)n, sizeof *m);
  char *inter = rt_xcalloc((size_t)n * (size_t)n, 1);
  double mx = 0, mn = 0;
  for (int s = 0; s < W; s++)
    for (int d = 0; d < W; d++) {
      double v = r->matrix[(size_t)s * W + d];
      if (v <= 0) continue;
      size_t at = (size_t)(s / bin) * n + (size_t)(d / bin);
      m[at] += v;
      if (job->domain[s] != job->domain[d]) inter[at] = 1;
    }
  for (size_t i = 0; i < (size_t)n * n; i++)
    if (m[i] > 0) {
      if (m[i] > mx) mx = m[i];
      if (mn == 0 || m[i] < mn) mn = m[i];
    }
  fprintf(f, "<rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' "
             "fill='#fafafa' stroke='#888'/>\n",
          x0, y0, size, size);
  double lo = mn > 0 ? log10(mn) : 0, hi = mx > 0 ? log10(mx) : 1;
  if (hi - lo < 1e-9) lo = hi - 1;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      double v = m[(size_t)i * n + j];
      if (v <= 0) continue;
      char col[16], b[32];
      shade((log10(v) - lo) / (hi - lo), inter[(size_t)i * n + j], col,
            sizeof col);
      fprintf(f, "<rect x='%.2f' y='%.2f' width='%.2f' height='%.2f' "
                 "fill='%s'><title>ranks %d-%d -> %d-%d: %s</title></rect>\n",
              x0 + j * cell, y0 + i * cell, cell, cell, col, i * bin,
              i * bin + bin - 1, j * bin, j * bin + bin - 1,
              rt_fmt_bytes(v, b, sizeof b));
    }
  /* domain boundaries and the trainer / inference split */
  for (int rnk = 1; rnk < W; rnk++)
    if (job->domain[rnk] != job->domain[rnk - 1]) {
      double p = size * rnk / W;
      fprintf(f, "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' "
                 "stroke='#bbb' stroke-width='0.5'/>\n",
              x0 + p, y0, x0 + p, y0 + size);
      fprintf(f, "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' "
                 "stroke='#bbb' stroke-width='0.5'/>\n",
              x0, y0 + p, x0 + size, y0 + p);
    }
  if (rt_job_colocated(job)) {
    fprintf(f, "<text x='%.1f' y='%.1f' font-size='12' text-anchor='middle'>"
               "destination rank (colocated: trainer and inference 0-%d; "
               "local copies not drawn)</text>\n",
            x0 + size / 2, y0 - 8, W - 1);
  } else {
    double p = size * job->ntrain / W;
    fprintf(f, "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='#333' "
               "stroke-width='1.2'/>\n",
            x0 + p, y0, x0 + p, y0 + size);
    fprintf(f, "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='#333' "
               "stroke-width='1.2'/>\n",
            x0, y0 + p, x0 + size, y0 + p);
    fprintf(f, "<text x='%.1f' y='%.1f' font-size='12' text-anchor='middle'>"
               "destination rank (trainer 0-%d | inference %d-%d)</text>\n",
            x0 + size / 2, y0 - 8, job->ntrain - 1, job->ntrain, W - 1);
  }
  fprintf(f, "<text x='%.1f' y='%.1f' font-size='12' text-anchor='middle' "
             "transform='rotate(-90 %.1f %.1f)'>source rank</text>\n",
          x0 - 10, y0 + size / 2, x0 - 10, y0 + size / 2);
  char b1[32], b2[32];
  fprintf(f, "<text x='%.1f' y='%.1f' font-size='11'>bytes per rank pair%s, "
             "log scale %s .. %s</text>\n",
          x0, y0 + size + 16, bin > 1 ? " (ranks binned)" : "",
          rt_fmt_bytes(mn, b1, sizeof b1), rt_fmt_bytes(mx, b2, sizeof b2));
  fprintf(f, "<text x='%.1f' y='%.1f' font-size='11'>orange-red: across "
             "domains (NIC), blue: inside a domain (NVLink); grey lines: "
             "domain bounds</text>\n",
          x0, y0 + size + 30);
  free(m);
  free(inter);
}

static void links(FILE *f, const rt_report *r, double x0, double y0, double w,
                  double h) {
  const rt_job *job = r->job;
  const rt_cluster *c = &job->cluster;
  int W = job->world;
  /* the copy panel only where ranks copy (colocated) */
  const int order[RT_NLINK] = {RT_NIC_OUT, RT_NIC_IN, RT_NVL_OUT, RT_NVL_IN,
                               RT_COPY};
  const int npanels = r->ours_load.local > 0 ? RT_NLINK : RT_NLINK - 1;
  double top = r->lb.time;
  for (int k = 0; k < RT_NLINK; k++)
    for (int i = 0; i < W; i++) {
      double t = rt_link_time(c, k, r->ours_load.bytes[k][i],
                              r->ours_load.msgs[k][i]);
      if (t > top) top = t;
    }
  if (top <= 0) top = 1;
  double ph = h / npanels, bw = w / W;
  for (int p = 0; p < npanels; p++) {
    int k = order[p];
    double py = y0 + p * ph, base = py + ph - 14;
    double scale = (ph - 30) / top;
    fprintf(f, "<text x='%.1f' y='%.1f' font-size='12'>%s time per GPU "
               "[s] (max %.3f s)</text>\n",
            x0, py + 12, rt_link_name(k), top);
    fprintf(f, "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='#666' "
               "stroke-width='0.6'/>\n",
            x0, base, x0 + w, base);
    for (int i = 0; i < W; i++) {
      double t = rt_link_time(c, k, r->ours_load.bytes[k][i],
                              r->ours_load.msgs[k][i]);
      if (t <= 0) continue;
      bool hot = r->ours.hot.rank == i && r->ours.hot.link == k;
      char b[32];
      fprintf(f, "<rect x='%.2f' y='%.2f' width='%.2f' height='%.2f' "
                 "fill='%s'><title>rank %d %s: %s, %.0f msgs, %.4f s"
                 "</title></rect>\n",
              x0 + i * bw, base - t * scale, bw > 1.2 ? bw - 0.2 : bw,
              t * scale,
              hot ? "#d62728"
                  : (k == RT_COPY ? "#9467bd"
                                  : (k >= RT_NIC_OUT ? "#ff7f0e" : "#1f77b4")),
              i, rt_link_name(k), rt_fmt_bytes(r->ours_load.bytes[k][i], b, sizeof b),
              r->ours_load.msgs[k][i], t);
    }
    double ly = base - r->lb.time * scale;
    fprintf(f, "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='#2ca02c' "
               "stroke-dasharray='4 3'/>\n",
            x0, ly, x0 + w, ly);
  }
  fprintf(f, "<text x='%.1f' y='%.1f' font-size='11'>rank 0 .. %d left to "
             "right; dashed green: lower bound %.3f s; red: the slowest link"
             "</text>\n",
          x0, y0 + h + 4, W - 1, r->lb.time);
}

static void strategies(FILE *f, const rt_report *r, double x0, double y0,
                       double w) {
  const rt_result *rows[RT_REPORT_ROWS];
  int n = (int)rt_report_rows(r, rows);
  double mx = 0;
  for (int i = 0; i < n; i++)
    if (rows[i]->time > mx) mx = rows[i]->time;
  if (mx <= 0) mx = 1;
  double lw = 250, bw = w - lw - 90;
  fprintf(f, "<text x='%.1f' y='%.1f' font-size='13' font-weight='bold'>"
             "predicted weight-sync time</text>\n",
          x0, y0);
  for (int i = 0; i < n; i++) {
    double y = y0 + 12 + i * 22;
    fprintf(f, "<text x='%.1f' y='%.1f' font-size='12'>", x0, y + 13);
    esc(f, rows[i]->label);
    fprintf(f, "</text>\n");
    if (rows[i]->not_applicable) {
      fprintf(f, "<text x='%.1f' y='%.1f' font-size='12'>n/a</text>\n",
              x0 + lw, y + 13);
      continue;
    }
    fprintf(f, "<rect x='%.1f' y='%.1f' width='%.1f' height='16' "
               "fill='%s'/>\n",
            x0 + lw, y, bw * rows[i]->time / mx,
            i == 0 ? "#1f77b4" : (i == n - 1 ? "#2ca02c" : "#999"));
    fprintf(f, "<text x='%.1f' y='%.1f' font-size='12'>%.3f s</text>\n",
            x0 + lw + bw * rows[i]->time / mx + 6, y + 13, rows[i]->time);
  }
}

int rt_svg_write(const rt_report *r, const char *path, rt_err *e) {
  if (!r->matrix) return rt_fail(e, "--svg: the report has no traffic matrix");
  FILE *f = fopen(path, "w");
  if (!f)
    return rt_fail(e, "--svg: cannot write '%s': %s", path, strerror(errno));
  const rt_job *job = r->job;
  bool moe = rt_model_is_moe(job->model.info);
  char tr[160], in[96];
  rt_train_describe(&job->train, moe, tr, sizeof tr);
  rt_infer_describe(&job->infer, moe, in, sizeof in);
  double W = 1240, H = 950;
  fprintf(f, "<?xml version='1.0' encoding='UTF-8'?>\n"
             "<svg xmlns='http://www.w3.org/2000/svg' width='%.0f' "
             "height='%.0f' viewBox='0 0 %.0f %.0f' "
             "font-family='sans-serif'>\n",
          W, H, W, H);
  fprintf(f, "<rect width='100%%' height='100%%' fill='white'/>\n");
  fprintf(f, "<text x='20' y='26' font-size='16' font-weight='bold'>");
  esc(f, job->model.info->name);
  fprintf(f, " on %s: %d trainer GPUs (", job->cluster.name, job->ntrain);
  esc(f, tr);
  fprintf(f, ") to %d inference GPUs (", job->ninfer);
  esc(f, in);
  fprintf(f, ")%s</text>\n", rt_job_colocated(job) ? ", colocated" : "");
  char hier[32] = "n/a";
  if (!r->hier.not_applicable)
    snprintf(hier, sizeof hier, "%.3f s", r->hier.time);
  fprintf(f, "<text x='20' y='46' font-size='12'>our plan %.3f s, lower "
             "bound %.3f s (quality %.3f), reference hierarchical %s, "
             "gather+broadcast %.3f s (ideal %.3f s)</text>\n",
          r->ours.time, r->lb.time, r->lb.time > 0 ? r->ours.time / r->lb.time : 0,
          hier, r->gb_rl.time, r->gb_ideal.time);
  matrix(f, r, 40, 90, 560);
  links(f, r, 660, 80, 560, 600);
  strategies(f, r, 40, 730, 1160);
  fprintf(f, "</svg>\n");
  if (fclose(f) != 0)
    return rt_fail(e, "--svg: writing '%s' failed: %s", path, strerror(errno));
  return 0;
}
