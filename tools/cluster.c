/* SPDX-License-Identifier: Apache-2.0 */
/* Cluster presets and the cluster JSON reader (json-c). */
#include "cluster.h"

#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

extern const char *const rt_preset_names[];
extern const char *const rt_preset_texts[];

int rt_cluster_preset_count(void) {
  int n = 0;
  while (rt_preset_names[n]) n++;
  return n;
}

const char *rt_cluster_preset_name(int i) {
  return i >= 0 && i < rt_cluster_preset_count() ? rt_preset_names[i] : NULL;
}

/* K_RANGE: a number, or [low, high] where published figures differ;
 * slot is a double[2]. */
typedef enum { K_INT, K_NUM, K_STR, K_RANGE } kind;

typedef struct key {
  const char *name;
  kind k;
  bool required;
  double min, max;
  void *slot; /* int*, double* or char[] */
  size_t cap; /* K_STR */
} key;

static int type_error(rt_err *e, const char *what, const char *name,
                      const char *want, json_object *v) {
  const char *got = json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN);
  char shown[80];
  snprintf(shown, sizeof shown, "%s", got ? got : "?");
  if (got && strlen(got) >= sizeof shown) strcpy(shown + sizeof shown - 4, "...");
  return rt_fail(e, "%s: '%s' must be %s, got %s", what, name, want, shown);
}

/* Line and column of byte offset `at` in text. */
static void line_col(const char *text, size_t at, int *line, int *col) {
  *line = 1;
  *col = 1;
  for (size_t i = 0; i < at && text[i]; i++) {
    if (text[i] == '\n') {
      (*line)++;
      *col = 1;
    } else {
      (*col)++;
    }
  }
}

/* A K_RANGE value: a number x (low = high = x) or [low, high], each in
 * [K->min, K->max], low <= high. */
static int parse_range(rt_err *e, const char *what, const key *K,
                       json_object *v) {
  double *slot = K->slot, x[2];
  char want[128];
  snprintf(want, sizeof want, "a number in %s%g, %g] or [low, high] of such "
                              "numbers",
           K->min > 0 ? "(" : "[", K->min > 0 ? 0 : K->min, K->max);
  if (json_object_is_type(v, json_type_array)) {
    if (json_object_array_length(v) != 2)
      return type_error(e, what, K->name, want, v);
    for (int i = 0; i < 2; i++) {
      json_object *y = json_object_array_get_idx(v, (size_t)i);
      if (!json_object_is_type(y, json_type_int) &&
          !json_object_is_type(y, json_type_double))
        return type_error(e, what, K->name, want, v);
      x[i] = json_object_get_double(y);
    }
  } else if (json_object_is_type(v, json_type_int) ||
             json_object_is_type(v, json_type_double)) {
    x[0] = x[1] = json_object_get_double(v);
  } else {
    return type_error(e, what, K->name, want, v);
  }
  for (int i = 0; i < 2; i++)
    if (!(x[i] >= K->min && x[i] <= K->max))
      return type_error(e, what, K->name, want, v);
  if (x[0] > x[1])
    return rt_fail(e, "%s: '%s' is a range [low, high] but its low end (%g) "
                      "is above its high end (%g)",
                   what, K->name, x[0], x[1]);
  slot[0] = x[0];
  slot[1] = x[1];
  return 0;
}

int rt_cluster_parse(const char *text, const char *what, rt_cluster *out,
                     rt_err *e) {
  memset(out, 0, sizeof *out);
  if (!text) return rt_fail(e, "%s: no text", what);
  json_tokener *tok = json_tokener_new();
  if (!tok) return rt_fail(e, "%s: out of memory", what);
  size_t len = strlen(text);
  json_object *root = json_tokener_parse_ex(tok, text, (int)len);
  enum json_tokener_error jerr = json_tokener_get_error(tok);
  if (!root || jerr != json_tokener_success) {
    size_t at = json_tokener_get_parse_end(tok);
    int line, col;
    line_col(text, at, &line, &col);
    const char *why = jerr == json_tokener_continue
                          ? "unexpected end of the file"
                          : json_tokener_error_desc(jerr);
    json_tokener_free(tok);
    if (root) json_object_put(root);
    return rt_fail(e, "%s: not valid JSON: %s at line %d, column %d", what,
                   why, line, col);
  }
  /* Nothing but white space may follow the object. */
  size_t end = json_tokener_get_parse_end(tok);
  json_tokener_free(tok);
  while (end < len && strchr(" \t\r\n", text[end])) end++;
  if (end < len) {
    int line, col;
    line_col(text, end, &line, &col);
    json_object_put(root);
    return rt_fail(e, "%s: not valid JSON: text after the object at line %d, "
                      "column %d",
                   what, line, col);
  }
  if (!json_object_is_type(root, json_type_object)) {
    json_object_put(root);
    return rt_fail(e, "%s: the top level must be a JSON object {...}", what);
  }

  double nic_per_gpu = 1, nvl = 0, nvl_ach = 0, nic = 0, nic_ach = 0;
  double nvl_lat = 2, nic_lat = 5, bcast = 0;
  /* without a figure: an H100 SXM's HBM3, 90% of it achieved by a copy */
  double hbm = 3350, hbm_ach = 0, convert = 0;
  int host = 0, domain = 0, job = 0, channels = 32;
  /* without a figure: point-to-point reaches the collective rate */
  double p2p_nvl[2] = {1, 1}, p2p_nic[2] = {1, 1};
  /* without a figure: calls cost nothing */
  double call_us[2] = {0, 0};
  key keys[] = {
      {"name", K_STR, false, 0, 0, out->name, sizeof out->name},
      {"description", K_STR, false, 0, 0, out->description,
       sizeof out->description},
      {"gpus_per_host", K_INT, false, 1, 1 << 20, &host, 0},
      {"gpus_per_domain", K_INT, true, 1, 1 << 20, &domain, 0},
      {"job_gpus_per_domain", K_INT, false, 1, 1 << 20, &job, 0},
      {"nic_per_gpu", K_NUM, false, 1e-6, 64, &nic_per_gpu, 0},
      {"nvlink_gbps", K_NUM, true, 1e-6, 1e7, &nvl, 0},
      {"nvlink_achieved_gbps", K_NUM, false, 1e-6, 1e7, &nvl_ach, 0},
      {"nic_gbps", K_NUM, true, 1e-6, 1e7, &nic, 0},
      {"nic_achieved_gbps", K_NUM, false, 1e-6, 1e7, &nic_ach, 0},
      {"nvlink_latency_us", K_NUM, false, 0, 1e6, &nvl_lat, 0},
      {"nic_latency_us", K_NUM, false, 0, 1e6, &nic_lat, 0},
      {"bcast_gbps", K_NUM, false, 1e-6, 1e7, &bcast, 0},
      {"nccl_channels", K_INT, false, 1, 1024, &channels, 0},
      {"hbm_gbps", K_NUM, false, 1e-6, 1e7, &hbm, 0},
      {"hbm_achieved_gbps", K_NUM, false, 1e-6, 1e7, &hbm_ach, 0},
      {"convert_gbps", K_NUM, false, 1e-6, 1e7, &convert, 0},
      {"p2p_nvlink_fraction", K_RANGE, false, 1e-6, 1, p2p_nvl, 0},
      {"p2p_nic_fraction", K_RANGE, false, 1e-6, 1, p2p_nic, 0},
      {"p2p_call_us", K_RANGE, false, 0, 1e6, call_us, 0},
  };
  const int nkeys = (int)(sizeof keys / sizeof keys[0]);
  bool seen[sizeof keys / sizeof keys[0]] = {false};
  int rc = 0;
  json_object_object_foreach(root, k, v) {
    if (rc) break;
    int i = 0;
    while (i < nkeys && strcmp(keys[i].name, k) != 0) i++;
    if (i == nkeys) {
      if (k[0] == '_' || !strcmp(k, "notes") || !strcmp(k, "source"))
        continue; /* comments */
      char known[1024];
      size_t at = 0;
      for (int j = 0; j < nkeys; j++)
        at += (size_t)snprintf(known + at, sizeof known - at, "%s%s",
                               j ? ", " : "", keys[j].name);
      rc = rt_fail(e, "%s: unknown key '%s' (known: %s; keys starting with "
                      "'_', 'notes' and 'source' are comments)",
                   what, k, known);
      break;
    }
    seen[i] = true;
    key *K = &keys[i];
    if (K->k == K_STR) {
      if (!json_object_is_type(v, json_type_string)) {
        rc = type_error(e, what, k, "a string", v);
        break;
      }
      snprintf((char *)K->slot, K->cap, "%s", json_object_get_string(v));
      continue;
    }
    if (K->k == K_RANGE) {
      rc = parse_range(e, what, K, v);
      if (rc) break;
      continue;
    }
    bool is_int = json_object_is_type(v, json_type_int);
    bool is_num = is_int || json_object_is_type(v, json_type_double);
    if (K->k == K_INT && !is_int) {
      char want[96];
      snprintf(want, sizeof want, "an integer in [%.0f, %.0f]", K->min,
               K->max);
      rc = type_error(e, what, k, want, v);
      break;
    }
    if (!is_num) {
      rc = type_error(e, what, k, "a number", v);
      break;
    }
    double x = json_object_get_double(v);
    if (!(x >= K->min && x <= K->max)) {
      char want[96];
      if (K->k == K_INT)
        snprintf(want, sizeof want, "an integer in [%.0f, %.0f]", K->min,
                 K->max);
      else if (K->min > 0 && K->min < 1e-3)
        snprintf(want, sizeof want, "a number > 0 (and <= %g)", K->max);
      else
        snprintf(want, sizeof want, "in [%g, %g]", K->min, K->max);
      rc = type_error(e, what, k, want, v);
      break;
    }
    if (K->k == K_INT)
      *(int *)K->slot = (int)json_object_get_int64(v);
    else
      *(double *)K->slot = x;
  }
  for (int i = 0; rc == 0 && i < nkeys; i++)
    if (keys[i].required && !seen[i])
      rc = rt_fail(e, "%s: required key '%s' is missing", what, keys[i].name);
  json_object_put(root);
  if (rc) return rc;

  if (!out->name[0]) snprintf(out->name, sizeof out->name, "custom");
  out->gpus_per_domain = domain;
  out->gpus_per_host = host ? host : domain;
  out->job_gpus_per_domain = job ? job : domain;
  if (out->job_gpus_per_domain > domain)
    return rt_fail(e, "%s: job_gpus_per_domain (%d) is more than "
                      "gpus_per_domain (%d)",
                   what, out->job_gpus_per_domain, domain);
  out->nic_per_gpu = nic_per_gpu;
  out->nvlink_gbps = nvl;
  out->nvlink_achieved_gbps = nvl_ach > 0 ? nvl_ach : nvl;
  out->nic_gbps = nic;
  out->nic_achieved_gbps = nic_ach > 0 ? nic_ach : nic;
  if (out->nvlink_achieved_gbps > nvl)
    return rt_fail(e, "%s: nvlink_achieved_gbps (%g) is above the line rate "
                      "nvlink_gbps (%g)",
                   what, out->nvlink_achieved_gbps, nvl);
  if (out->nic_achieved_gbps > nic)
    return rt_fail(e, "%s: nic_achieved_gbps (%g) is above the line rate "
                      "nic_gbps (%g)",
                   what, out->nic_achieved_gbps, nic);
  out->hbm_gbps = hbm;
  out->hbm_achieved_gbps = hbm_ach > 0 ? hbm_ach : 0.9 * hbm;
  if (out->hbm_achieved_gbps > hbm)
    return rt_fail(e, "%s: hbm_achieved_gbps (%g) is above the line rate "
                      "hbm_gbps (%g)",
                   what, out->hbm_achieved_gbps, hbm);
  /* without a figure: the H200's measured rate relative to its HBM (an
   * assumption elsewhere, see docs/MODEL.md) */
  out->convert_gbps = convert > 0 ? convert : hbm * RT_CONVERT_PER_HBM;
  if (out->convert_gbps > hbm)
    return rt_fail(e, "%s: convert_gbps (%g) is above the HBM line rate "
                      "hbm_gbps (%g): a conversion reads every input byte "
                      "from HBM",
                   what, out->convert_gbps, hbm);
  out->nvlink_latency_us = nvl_lat;
  out->nic_latency_us = nic_lat;
  out->bcast_gbps = bcast;
  out->nccl_channels = channels;
  out->nvl_bw = out->nvlink_achieved_gbps * 1e9;
  out->nic_bw = out->nic_achieved_gbps * 1e9 * nic_per_gpu;
  out->nvl_lat = nvl_lat * 1e-6;
  out->nic_lat = nic_lat * 1e-6;
  out->copy_bw = out->hbm_achieved_gbps * 1e9 / 2;
  out->convert_bw = out->convert_gbps * 1e9;
  out->coll_nvl_bw = out->nvl_bw;
  out->coll_nic_bw = out->nic_bw;
  for (int i = 0; i < 2; i++) {
    out->p2p_nvl_frac[i] = p2p_nvl[i];
    out->p2p_nic_frac[i] = p2p_nic[i];
    out->call_range_s[i] = call_us[i] * 1e-6;
  }
  out->call_s = out->call_range_s[0];
  return 0;
}

void rt_cluster_at_end(const rt_cluster *c, int end, rt_cluster *out) {
  /* fast: the high fractions; slow: the low ones */
  int i = end == RT_END_FAST ? 1 : 0;
  *out = *c;
  out->nvl_bw = c->coll_nvl_bw * c->p2p_nvl_frac[i];
  out->nic_bw = c->coll_nic_bw * c->p2p_nic_frac[i];
  out->call_s = c->call_range_s[end == RT_END_FAST ? 0 : 1];
}

int rt_cluster_read_file(const char *path, rt_cluster *out, rt_err *e) {
  char what[512];
  snprintf(what, sizeof what, "cluster file '%s'", path);
  FILE *f = fopen(path, "rb");
  if (!f) return rt_fail(e, "%s: cannot open: %s", what, strerror(errno));
  char *buf = NULL;
  size_t len = 0, cap = 0;
  for (;;) {
    if (len + 4096 + 1 > cap) {
      cap = cap ? 2 * cap : 8192;
      if (cap > ((size_t)16 << 20)) {
        fclose(f);
        free(buf);
        return rt_fail(e, "%s: larger than 16 MiB, not a cluster file", what);
      }
      buf = rt_xrealloc(buf, cap);
    }
    size_t got = fread(buf + len, 1, 4096, f);
    len += got;
    if (got < 4096) break;
  }
  int bad = ferror(f);
  fclose(f);
  if (bad) {
    free(buf);
    return rt_fail(e, "%s: read error", what);
  }
  buf[len] = '\0';
  if (strlen(buf) != len) {
    free(buf);
    return rt_fail(e, "%s: contains a NUL byte, not a JSON text file", what);
  }
  int rc = rt_cluster_parse(buf, what, out, e);
  free(buf);
  return rc;
}

int rt_cluster_load(const char *name_or_path, rt_cluster *out, rt_err *e) {
  if (!name_or_path || !*name_or_path)
    return rt_fail(e, "--cluster: no cluster given");
  for (int i = 0; rt_preset_names[i]; i++)
    if (strcasecmp(rt_preset_names[i], name_or_path) == 0) {
      char what[128];
      snprintf(what, sizeof what, "cluster preset '%s'", rt_preset_names[i]);
      return rt_cluster_parse(rt_preset_texts[i], what, out, e);
    }
  FILE *f = fopen(name_or_path, "rb");
  if (f) {
    fclose(f);
    return rt_cluster_read_file(name_or_path, out, e);
  }
  if (strchr(name_or_path, '/') || strstr(name_or_path, ".json"))
    return rt_cluster_read_file(name_or_path, out, e); /* says why */
  char known[256];
  size_t at = 0;
  for (int i = 0; rt_preset_names[i]; i++)
    at += (size_t)snprintf(known + at, sizeof known - at, "%s%s",
                           i ? ", " : "", rt_preset_names[i]);
  return rt_fail(e, "--cluster: '%s' is neither a preset (%s) nor a JSON "
                    "file",
                 name_or_path, known);
}
