/* SPDX-License-Identifier: Apache-2.0 */
/* reshard: predict how long a weight sync of a real model takes on a real
 * cluster, for libreshard's plan and the strategies it competes with. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "configs.h"
#include "report.h"
#include "svg.h"

static const char *prog = "reshard";

static void usage_main(FILE *f) {
  fprintf(f,
"usage: reshard <command> [options]\n"
"\n"
"Predict, before anyone runs it, how long a weight sync (trainer layout ->\n"
"inference layout) of a real model takes on a real GPU cluster: libreshard's\n"
"plan against the reference's hierarchical algorithm, direct point-to-point,\n"
"gather-and-broadcast and the lower bound, on one cost model.\n"
"\n"
"commands:\n"
"  plan       plan a weight sync and print the predicted times\n"
"  models     list the model catalog (parameter counts, tensors)\n"
"  clusters   list the cluster presets\n"
"  configs    list the named configurations (--config NAME)\n"
"  help       this text; 'reshard plan --help' for the plan options\n"
"\n"
"options:\n"
"  -h, --help     this text\n"
"  --version      the version of reshard and libreshard\n"
"\n"
"example:\n"
"  reshard plan --model DeepSeek-V3 --train tp=1,cp=1,ep=16,pp=4,edp=2 \\\n"
"               --infer tp=8,dp=16 --cluster gb200-nvl72 --svg dsv3.svg\n");
}

static void usage_plan(FILE *f) {
  fprintf(f,
"usage: reshard plan --model M --train SPEC --infer SPEC --cluster C [options]\n"
"       reshard plan --config NAME [options]\n"
"\n"
"Builds the trainer and inference layouts of every tensor of model M, plans\n"
"the reshard with libreshard (rs_plan_create), and prints a table: the bytes\n"
"the inference ranks need and where they come from (a copy on the GPU\n"
"itself, NVLink inside a domain, the NIC across domains); the predicted\n"
"time of our plan, of the reference's (NVIDIA nccl_m2n) hierarchical and\n"
"direct algorithms, of gather-and-broadcast as RL frameworks run it and of\n"
"an ideal variant, and the lower bound; the slowest link of each;\n"
"speedups; plan quality (our time / lower bound). Every strategy is\n"
"modelled on the same links: each GPU's NVLink out/in and NIC out/in, and\n"
"its memory for copies inside the GPU (HBM rate / 2: a copy reads and\n"
"writes), time = bytes / bandwidth + messages x latency, the slowest link\n"
"sets the time.\n"
"\n"
"required (or from --config):\n"
"  --model M        a catalog model or alias (see 'reshard models'):\n"
"                   Qwen3-235B-A22B, DeepSeek-V3, Qwen3-30B-A3B, Qwen3-32B,\n"
"                   Llama-3.1-70B, Llama-3.1-8B\n"
"  --train SPEC     trainer parallelism, Megatron-style, key=value pairs:\n"
"                     tp   tensor parallel (column q/k/v/gate/up/embed/lm_head,\n"
"                          row o/down)            cp   context parallel\n"
"                     pp   pipeline stages (layer L on stage L*pp/layers)\n"
"                     ep   expert parallel        etp  expert tensor parallel\n"
"                     dp   dense data parallel (GPUs = tp*cp*dp*pp)\n"
"                     edp  expert data parallel (GPUs = etp*ep*edp*pp)\n"
"                     gpus trainer GPUs           fsdp 1: shard dim 0 over\n"
"                          the data-parallel axes (FSDP / ZeRO-3)\n"
"                   e.g. tp=2,cp=2,ep=16,pp=4,gpus=64\n"
"  --infer SPEC     inference parallelism, vLLM-style: tp, dp, ep (1 or\n"
"                   tp*dp: experts over every rank), gpus; e.g. tp=8,dp=16\n"
"  --cluster C      a preset (dgx-h100, dgx-h200, dgx-b200, gb200-nvl72; see\n"
"                   'reshard clusters') or a JSON file with the same keys\n"
"\n");
  /* two strings: ISO C caps one literal at 4095 characters */
  fprintf(f,
"options:\n"
"  --config NAME    take model, train, infer, cluster and colocation from a\n"
"                   named configuration ('reshard configs'); the options\n"
"                   above override its parts (--placement: not colocated)\n"
"  --colocate       trainer and inference engine on the same GPUs (verl's\n"
"                   default, OpenRLHF and NeMo RL colocated modes): trainer\n"
"                   rank i and inference rank i are one rank, ranks 0..T-1;\n"
"                   both sides must use the same number of GPUs (T == G),\n"
"                   else a usage error names both. Bytes a rank holds are\n"
"                   copied in its memory. The reference has no colocated\n"
"                   mode: its hierarchical algorithm shows n/a, direct\n"
"                   point-to-point is modelled with local copies of what a\n"
"                   rank holds; gather+broadcast becomes an all-gather of\n"
"                   each full tensor over all ranks, then each rank slices\n"
"                   out what it serves\n"
"  --placement P    split (default): trainer ranks fill domains from 0,\n"
"                   inference ranks start on a fresh domain; packed: one\n"
"                   run of consecutive ranks over all domains\n"
"  --domain-gpus N  GPUs of the job per NVLink domain (default: the\n"
"                   cluster's job_gpus_per_domain, 64 on gb200-nvl72)\n"
"  --staging-mib N  staging memory per rank for the plan (default 256)\n"
"  --rounds R       packed (default): rounds that mix many peers, fitted\n"
"                   to every rank at once; by-domain-pair: each round\n"
"                   decided by the two domains a message runs between\n"
"                   (RS_PARAM_ROUNDS), as a rank planning alone can\n"
"  --bucket-mib N   gather-and-broadcast bucket size (default 1024)\n"
"  --json           print the figures as JSON instead of the table\n"
"  --svg FILE       draw the rank-to-rank traffic matrix and the per-link\n"
"                   load of our plan into FILE\n"
"  --plan-json FILE write the plan itself into FILE as rs_plan_to_json\n"
"                   gives it: every move with its ranks, bytes, route,\n"
"                   round and stage (no boxes unless --svg is given)\n"
"  --progress       always show the progress line (default: on a terminal,\n"
"                   for anything that takes over a second)\n"
"  --quiet          never show the progress line\n"
"  -h, --help       this text\n"
"\n");
  fprintf(f,
"dtypes (libreshard converts on the way, on the side that sends fewer bytes):\n"
"  --train-dtype D  what the trainer holds: bf16 (default) or fp32\n"
"  --infer-dtype D  what the inference engine holds: bf16 (default, the\n"
"                   model's dtype), fp32, or fp8: as vLLM's and DeepSeek-\n"
"                   V3's fp8 checkpoints, the linear weights (q/k/v/o,\n"
"                   gate/up/down, experts, MLA projections) become f8_e4m3\n"
"                   with an f32 <name>_scale_inv tensor beside each, one\n"
"                   scale per block, placed like the weight (in one more\n"
"                   buffer per rank); a weight whose inference shards cut a\n"
"                   block (say a TP shard of 192 rows, 128-row blocks)\n"
"                   stays bf16, with the members of its fused buffer, and\n"
"                   the report says which and why; norms, biases,\n"
"                   embeddings, lm_head and the router stay bf16\n"
"  --fp8-block R,C  fp8 block rows and columns (default 128,128)\n"
"  --fp8-scales S   amax (default: scale = amax / 448) or ue8m0 (a power\n"
"                   of two, as engines use on Blackwell)\n"
"With a change of dtype the table adds our plan of the same sync without it\n"
"(bf16 -> bf16: what the conversion saves) and gather, quantize (or cast),\n"
"broadcast as RL frameworks run it. A rank's conversion time (elements from\n"
"RS_STAT_CONVERTED_SENDING/_RECEIVING, at the cluster's convert_gbps) adds\n"
"to its slowest link's. The reference and the other gather+broadcast rows\n"
"are modelled without conversion.\n"
"\n"
"Trainer ranks come first (0 .. T-1), inference ranks after (T .. T+G-1)\n"
"or, with --colocate, on the same ranks (0 .. T-1); consecutive ranks fill\n"
"a domain. Exit status: 0 on success, 2 on a usage error or bad input, 1\n"
"when planning fails.\n");
}

static int fail_usage(const char *fmt, const char *a, const char *b) {
  fprintf(stderr, "%s: error: ", prog);
  fprintf(stderr, fmt, a, b);
  fprintf(stderr, "\n(try '%s --help' or '%s plan --help')\n", prog, prog);
  return 2;
}

static int parse_pos(const char *opt, const char *v, long max, long *out) {
  char *end = NULL;
  long x = strtol(v, &end, 10);
  if (!*v || *end || x < 1 || x > max) {
    char range[64];
    snprintf(range, sizeof range, "an integer in [1, %ld]", max);
    fprintf(stderr, "%s: error: %s %s: expected %s\n", prog, opt, v, range);
    return -1;
  }
  *out = x;
  return 0;
}

static int cmd_models(void) {
  printf("%-16s %14s %14s %9s %8s %8s  %s\n", "model", "params", "published",
         "diff", "bf16 GB", "tensors", "family");
  for (int i = 0; i < rt_model_count(); i++) {
    const rt_model_info *info = rt_model_at(i);
    rt_model m;
    rt_err e;
    if (rt_model_build(info, &m, &e)) {
      fprintf(stderr, "%s: error: %s\n", prog, e.msg);
      return 1;
    }
    double p, b;
    rt_model_totals(&m, &p, &b, NULL);
    printf("%-16s %12.3fe9 %12.3fe9 %+8.3f%% %8.1f %8d  %s\n", info->name,
           p / 1e9, info->published_params / 1e9,
           100 * (p - info->published_params) / info->published_params,
           b / 1e9, m.n, info->family);
    rt_model_free(&m);
  }
  return 0;
}

static int cmd_clusters(void) {
  printf("%-14s %8s %8s %12s %10s %11s %14s %14s\n", "preset", "domain",
         "job/dom", "NVLink GB/s", "NIC GB/s", "copy GB/s", "convert GB/s",
         "latency us");
  for (int i = 0; i < rt_cluster_preset_count(); i++) {
    rt_cluster c;
    rt_err e;
    if (rt_cluster_load(rt_cluster_preset_name(i), &c, &e)) {
      fprintf(stderr, "%s: error: %s\n", prog, e.msg);
      return 1;
    }
    printf("%-14s %8d %8d %12.0f %10.0f %11.0f %14.0f %7.0f/%-6.0f\n",
           c.name, c.gpus_per_domain, c.job_gpus_per_domain, c.nvl_bw / 1e9,
           c.nic_bw / 1e9, c.copy_bw / 1e9, c.convert_bw / 1e9,
           c.nvlink_latency_us, c.nic_latency_us);
  }
  printf("\nOr --cluster FILE.json with the keys: name, description, "
         "gpus_per_host, gpus_per_domain,\njob_gpus_per_domain, nic_per_gpu, "
         "nvlink_gbps, nvlink_achieved_gbps, nic_gbps, nic_achieved_gbps,\n"
         "nvlink_latency_us, nic_latency_us, bcast_gbps, nccl_channels, "
         "hbm_gbps, hbm_achieved_gbps,\nconvert_gbps, p2p_nvlink_fraction, "
         "p2p_nic_fraction, p2p_call_us (each a number or\n[low, high]) "
         "(see docs/MODEL.md).\n");
  return 0;
}

static int cmd_configs(void) {
  for (int i = 0; i < rt_config_count(); i++) {
    const rt_config *c = rt_config_at(i);
    printf("%-44s %-16s train %-28s infer %-18s %s%s\n", c->name, c->model,
           c->train, c->infer, c->cluster, c->colocate ? " colocated" : "");
  }
  return 0;
}

static int cmd_plan(int argc, char **argv) {
  const char *model = NULL, *train = NULL, *infer = NULL, *cluster = NULL;
  const char *config = NULL, *svg = NULL, *placement = NULL;
  const char *plan_json = NULL;
  const char *train_dtype = NULL, *infer_dtype = NULL, *fp8_block = NULL;
  const char *fp8_scales = NULL, *rounds = NULL;
  long domain_gpus = 0, staging_mib = 0, bucket_mib = 1024;
  int json = 0, progress = -1, colocate = 0;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage_plan(stdout);
      return 0;
    }
    if (!strcmp(a, "--json")) {
      json = 1;
      continue;
    }
    if (!strcmp(a, "--progress")) {
      progress = 1;
      continue;
    }
    if (!strcmp(a, "--quiet")) {
      progress = 0;
      continue;
    }
    if (!strcmp(a, "--colocate")) {
      colocate = 1;
      continue;
    }
    const char *val = NULL;
    char name[64];
    const char *eq = strchr(a, '=');
    if (!strncmp(a, "--", 2) && eq) {
      size_t len = (size_t)(eq - a);
      if (len >= sizeof name) return fail_usage("unknown option '%s'%s", a, "");
      memcpy(name, a, len);
      name[len] = '\0';
      val = eq + 1;
    } else {
      snprintf(name, sizeof name, "%s", a);
    }
    const char **slot = NULL;
    long *num = NULL;
    long max = 0;
    if (!strcmp(name, "--model"))
      slot = &model;
    else if (!strcmp(name, "--train"))
      slot = &train;
    else if (!strcmp(name, "--infer"))
      slot = &infer;
    else if (!strcmp(name, "--cluster"))
      slot = &cluster;
    else if (!strcmp(name, "--config"))
      slot = &config;
    else if (!strcmp(name, "--svg"))
      slot = &svg;
    else if (!strcmp(name, "--plan-json"))
      slot = &plan_json;
    else if (!strcmp(name, "--placement"))
      slot = &placement;
    else if (!strcmp(name, "--rounds"))
      slot = &rounds;
    else if (!strcmp(name, "--train-dtype"))
      slot = &train_dtype;
    else if (!strcmp(name, "--infer-dtype"))
      slot = &infer_dtype;
    else if (!strcmp(name, "--fp8-block"))
      slot = &fp8_block;
    else if (!strcmp(name, "--fp8-scales"))
      slot = &fp8_scales;
    else if (!strcmp(name, "--domain-gpus"))
      num = &domain_gpus, max = 1 << 20;
    else if (!strcmp(name, "--staging-mib"))
      num = &staging_mib, max = 1 << 20;
    else if (!strcmp(name, "--bucket-mib"))
      num = &bucket_mib, max = 1 << 24;
    else if (a[0] == '-')
      return fail_usage("unknown option '%s' for 'plan'%s", a, "");
    else
      return fail_usage("unexpected argument '%s'%s", a, "");
    if (!val) {
      if (i + 1 >= argc) return fail_usage("%s needs a value%s", name, "");
      val = argv[++i];
    }
    if (slot) {
      *slot = val;
    } else if (parse_pos(name, val, max, num)) {
      return 2;
    }
  }
  if (config) {
    const rt_config *c = rt_config_find(config);
    if (!c)
      return fail_usage("--config: unknown configuration '%s'%s (see "
                        "'reshard configs')",
                        config, "");
    if (!model) model = c->model;
    if (!train) train = c->train;
    if (!infer) infer = c->infer;
    if (!cluster) cluster = c->cluster;
    if (c->colocate && !placement) colocate = 1;
  }
  if (!model) return fail_usage("plan: --model is required%s%s", "", "");
  if (!train) return fail_usage("plan: --train is required%s%s", "", "");
  if (!infer) return fail_usage("plan: --infer is required%s%s", "", "");
  if (!cluster) return fail_usage("plan: --cluster is required%s%s", "", "");
  rt_placement place = RT_PLACE_SPLIT;
  if (colocate && placement)
    return fail_usage("--colocate and --placement %s exclude each other%s "
                      "(colocated, trainer and inference share every GPU)",
                      placement, "");
  if (colocate)
    place = RT_PLACE_COLOCATED;
  else if (!placement || !strcmp(placement, "split"))
    place = RT_PLACE_SPLIT;
  else if (!strcmp(placement, "packed"))
    place = RT_PLACE_PACKED;
  else
    return fail_usage("--placement: '%s' is not split or packed%s", placement,
                      "");

  int rounds_rule = RS_ROUNDS_PACKED;
  if (rounds && !strcmp(rounds, "by-domain-pair"))
    rounds_rule = RS_ROUNDS_BY_DOMAIN_PAIR;
  else if (rounds && strcmp(rounds, "packed"))
    return fail_usage("--rounds: '%s' is not packed or by-domain-pair%s",
                      rounds, "");

  rt_err e;
  rt_dtype_spec dtypes;
  rt_dtype_spec_default(&dtypes);
  if ((train_dtype && rt_dtype_parse_train(train_dtype, &dtypes, &e)) ||
      (infer_dtype && rt_dtype_parse_infer(infer_dtype, &dtypes, &e)) ||
      (fp8_block && rt_dtype_parse_block(fp8_block, &dtypes, &e)) ||
      (fp8_scales && rt_dtype_parse_scales(fp8_scales, &dtypes, &e)))
    return fail_usage("%s%s", e.msg, "");
  if ((fp8_block || fp8_scales) && dtypes.infer != RS_DTYPE_F8_E4M3)
    return fail_usage("%s applies only with --infer-dtype fp8 (the "
                      "inference dtype is %s)",
                      fp8_block ? "--fp8-block" : "--fp8-scales",
                      rt_dtype_word(dtypes.infer));
  rt_cluster cl;
  if (rt_cluster_load(cluster, &cl, &e)) {
    fprintf(stderr, "%s: error: %s\n", prog, e.msg);
    return 2;
  }
  rt_job job;
  rt_job_spec spec = {model, NULL, train, infer, &cl, place, (int)domain_gpus};
  if (rt_job_init(&job, &spec, &e)) {
    fprintf(stderr, "%s: error: %s\n", prog, e.msg);
    return 2;
  }
  if (rt_job_set_dtypes(&job, &dtypes, &e)) {
    fprintf(stderr, "%s: error: %s\n", prog, e.msg);
    rt_job_free(&job);
    return 2;
  }
  rt_options opt = {0};
  opt.staging_bytes = (int64_t)staging_mib << 20;
  opt.rounds = rounds_rule;
  opt.bucket_bytes = (double)bucket_mib * 1024 * 1024;
  opt.matrix = svg != NULL;
  opt.plan_json = plan_json;
  opt.progress = progress < 0 ? isatty(STDERR_FILENO) : progress;
  rt_report r;
  if (rt_report_run(&job, &opt, &r, &e)) {
    fprintf(stderr, "%s: error: %s\n", prog, e.msg);
    rt_job_free(&job);
    return 1;
  }
  int rc = 0;
  if (json) {
    char *text = rt_report_json(&r);
    printf("%s\n", text);
    free(text);
  } else {
    rt_report_print(&r, stdout);
  }
  if (svg) {
    if (rt_svg_write(&r, svg, &e)) {
      fprintf(stderr, "%s: error: %s\n", prog, e.msg);
      rc = 1;
    } else if (!json) {
      printf("svg    : traffic matrix and link loads written to %s\n", svg);
    }
  }
  rt_report_free(&r);
  rt_job_free(&job);
  return rc;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage_main(stderr);
    return 2;
  }
  const char *cmd = argv[1];
  if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
    if (argc > 2 && !strcmp(argv[2], "plan"))
      usage_plan(stdout);
    else
      usage_main(stdout);
    return 0;
  }
  if (!strcmp(cmd, "--version")) {
    printf("reshard %s (libreshard %s)\n", rs_version_string(),
           rs_version_string());
    return 0;
  }
  if (!strcmp(cmd, "plan")) return cmd_plan(argc - 2, argv + 2);
  for (int i = 2; i < argc; i++)
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      usage_main(stdout);
      return 0;
    }
  if (argc > 2)
    return fail_usage("'%s' takes no arguments (got '%s')", cmd, argv[2]);
  if (!strcmp(cmd, "models")) return cmd_models();
  if (!strcmp(cmd, "clusters")) return cmd_clusters();
  if (!strcmp(cmd, "configs")) return cmd_configs();
  return fail_usage("unknown command '%s'%s", cmd, "");
}
