/* SPDX-License-Identifier: Apache-2.0 */
/* The `reshard` program: help, errors with messages and exit status, a
 * small plan as a table, as JSON and as SVG. RESHARD_CLI is its path. */
#include <criterion/criterion.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct run_out {
  int status; /* exit status, or -1 when killed by a signal */
  char *out, *err;
} run_out;

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  cr_assert_not_null(f, "%s", path);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)n + 1);
  size_t got = fread(buf, 1, (size_t)n, f);
  buf[got] = '\0';
  fclose(f);
  return buf;
}

static run_out run(const char *args) {
  char dir[] = "/tmp/reshard-cli-XXXXXX";
  cr_assert_not_null(mkdtemp(dir));
  char cmd[4096], o[128], e[128];
  snprintf(o, sizeof o, "%s/out", dir);
  snprintf(e, sizeof e, "%s/err", dir);
  snprintf(cmd, sizeof cmd, "'%s' %s >'%s' 2>'%s'", RESHARD_CLI, args, o, e);
  int st = system(cmd);
  run_out r;
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  r.out = slurp(o);
  r.err = slurp(e);
  unlink(o);
  unlink(e);
  rmdir(dir);
  return r;
}

static void done(run_out *r) {
  free(r->out);
  free(r->err);
}

Test(cli, help_documents_every_option) {
  run_out r = run("--help");
  cr_expect_eq(r.status, 0);
  for (const char *w = "plan\0models\0clusters\0configs\0--version\0"; *w;
       w += strlen(w) + 1)
    cr_expect(strstr(r.out, w) != NULL, "--help lacks %s", w);
  done(&r);
  r = run("plan --help");
  cr_expect_eq(r.status, 0);
  const char *opts[] = {"--model", "--train", "--infer", "--cluster",
                        "--config", "--placement", "--domain-gpus",
                        "--staging-mib", "--bucket-mib", "--json", "--svg",
                        "--plan-json",
                        "--progress", "--quiet", "--help", "--colocate",
                        "--train-dtype", "--infer-dtype", "--fp8-block",
                        "--fp8-scales", "ue8m0", "_scale_inv", "--rounds",
                        "by-domain-pair",
                        "tp", "cp", "pp", "ep", "etp", "dp", "edp", "gpus",
                        "fsdp"};
  for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++)
    cr_expect(strstr(r.out, opts[i]) != NULL, "plan --help lacks %s", opts[i]);
  done(&r);
  r = run("help plan");
  cr_expect_eq(r.status, 0);
  cr_expect(strstr(r.out, "--staging-mib") != NULL);
  done(&r);
  r = run("--version");
  cr_expect_eq(r.status, 0);
  cr_expect(strstr(r.out, "reshard") != NULL);
  done(&r);
}

static void expect_failure(const char *args, const char *needle) {
  run_out r = run(args);
  cr_expect(r.status > 0, "'%s' exited %d (want a nonzero exit, no signal)",
            args, r.status);
  cr_expect(strstr(r.err, needle) != NULL, "'%s': '%s' not in: %s", args,
            needle, r.err);
  done(&r);
}

Test(cli, bad_input_exits_nonzero_with_a_message) {
  expect_failure("", "usage");
  expect_failure("frobnicate", "unknown command 'frobnicate'");
  expect_failure("plan --bogus", "unknown option '--bogus'");
  expect_failure("plan --model", "--model needs a value");
  expect_failure("plan --train tp=2 --infer tp=2 --cluster dgx-h100",
                 "--model is required");
  expect_failure("plan --model GPT-9 --train tp=2 --infer tp=2 --cluster dgx-h100",
                 "unknown model 'GPT-9'");
  expect_failure("plan --model Qwen3-32B --train tp=3 --infer tp=8 --cluster dgx-h100",
                 "tp=3 does not divide num_attention_heads (64)");
  expect_failure("plan --model Qwen3-32B --train tp=2,pp=4,gpus=6 --infer tp=8 "
                 "--cluster dgx-h100",
                 "does not divide");
  expect_failure("plan --model Qwen3-32B --train tp=2 --infer tp=2 --cluster nowhere",
                 "neither a preset");
  expect_failure("plan --model Qwen3-32B --train tp=2 --infer tp=2 "
                 "--cluster /nonexistent.json",
                 "cannot open");
  expect_failure("plan --config no-such-config", "unknown configuration");
  expect_failure("plan --config qwen235b-bench-128gpus-gb200 --placement odd",
                 "not split or packed");
  expect_failure("plan --config qwen235b-bench-128gpus-gb200 --rounds odd",
                 "not packed or by-domain-pair");
  expect_failure("plan --config qwen235b-bench-128gpus-gb200 --staging-mib 0",
                 "expected an integer");
  expect_failure("plan --config qwen235b-bench-128gpus-gb200 --domain-gpus 100",
                 "--domain-gpus");
  expect_failure("models extra", "takes no arguments");
}

Test(cli, malformed_cluster_file) {
  char path[] = "/tmp/reshard-bad-XXXXXX";
  int fd = mkstemp(path);
  cr_assert(fd >= 0);
  FILE *f = fdopen(fd, "w");
  fputs("{\"gpus_per_domain\": 8, \"nvlink_gbps\": 450,, }", f);
  fclose(f);
  char args[512];
  snprintf(args, sizeof args,
           "plan --model Llama-3.1-8B --train tp=2 --infer tp=2 --cluster %s",
           path);
  expect_failure(args, "not valid JSON");
  unlink(path);
}

Test(cli, plan_table_json_and_svg) {
  const char *base = "plan --model Llama-3.1-8B --train tp=2,pp=2,dp=2 "
                     "--infer tp=4,dp=2 --cluster dgx-h100 --quiet";
  run_out r = run(base);
  cr_expect_eq(r.status, 0, "%s", r.err);
  for (const char *w = "ours (libreshard plan)\0reference hierarchical\0"
                       "direct point-to-point\0gather+broadcast (RL frameworks)\0"
                       "gather+broadcast (ideal)\0lower bound\0plan quality\0"
                       "across domains\0";
       *w; w += strlen(w) + 1)
    cr_expect(strstr(r.out, w) != NULL, "table lacks '%s'", w);
  done(&r);

  char args[512], svg[] = "/tmp/reshard-svg-XXXXXX";
  int fd = mkstemp(svg);
  cr_assert(fd >= 0);
  close(fd);
  snprintf(args, sizeof args, "%s --json --svg %s", base, svg);
  r = run(args);
  cr_expect_eq(r.status, 0, "%s", r.err);
  json_object *root = json_tokener_parse(r.out);
  cr_assert_not_null(root, "not JSON: %.200s", r.out);
  json_object *q = NULL, *s = NULL;
  cr_expect(json_object_object_get_ex(root, "plan_quality", &q));
  cr_expect(json_object_get_double(q) >= 1.0);
  cr_expect(json_object_object_get_ex(root, "strategies", &s));
  cr_expect_eq(json_object_array_length(s), 6);
  json_object_put(root);
  done(&r);
  char *pic = slurp(svg);
  cr_expect(strstr(pic, "<svg") != NULL);
  cr_expect(strstr(pic, "</svg>") != NULL);
  cr_expect(strstr(pic, "NIC out") != NULL);
  free(pic);
  unlink(svg);

  r = run("models");
  cr_expect_eq(r.status, 0);
  cr_expect(strstr(r.out, "DeepSeek-V3") != NULL);
  done(&r);
  r = run("clusters");
  cr_expect_eq(r.status, 0);
  cr_expect(strstr(r.out, "gb200-nvl72") != NULL);
  done(&r);
  r = run("configs");
  cr_expect_eq(r.status, 0);
  cr_expect(strstr(r.out, "dsv3-bench-256gpus-gb200") != NULL);
  done(&r);
}

static double plan_figure(json_object *root, const char *key) {
  json_object *p = NULL, *v = NULL;
  cr_assert(json_object_object_get_ex(root, "plan", &p));
  cr_assert(json_object_object_get_ex(p, key, &v), "plan.%s missing", key);
  return json_object_get_double(v);
}

/* --rounds by-domain-pair prices the same bytes over the same links as
 * packed rounds, in other rounds, within the same staging setting. */
Test(cli, rounds_by_domain_pair_move_the_same_bytes) {
  const char *base = "plan --config qwen3-32b-tp8-to-tp2-32gpus-b200 --quiet "
                     "--json --rounds";
  char args[256];
  json_object *t[2];
  for (int k = 0; k < 2; k++) {
    snprintf(args, sizeof args, "%s %s", base, k ? "by-domain-pair" : "packed");
    run_out r = run(args);
    cr_assert_eq(r.status, 0, "%s: %s", args, r.err);
    t[k] = json_tokener_parse(r.out);
    cr_assert_not_null(t[k], "not JSON: %.200s", r.out);
    done(&r);
  }
  const char *same[] = {"bytes_needed", "bytes_local", "bytes_intra",
                        "bytes_inter", "staging_setting_bytes"};
  for (size_t i = 0; i < sizeof same / sizeof same[0]; i++)
    cr_expect_eq(plan_figure(t[0], same[i]), plan_figure(t[1], same[i]),
                 "plan.%s differs by domain pair", same[i]);
  cr_expect_neq(plan_figure(t[0], "rounds"), plan_figure(t[1], "rounds"));
  cr_expect_leq(plan_figure(t[1], "staging_peak_bytes"),
                plan_figure(t[1], "staging_setting_bytes"));
  json_object_put(t[0]);
  json_object_put(t[1]);
}

/* --plan-json writes the library's own description of the plan the table
 * models: the same moves and rounds, its bytes across domains the table's. */
Test(cli, plan_json_writes_the_plan_itself) {
  const char *base = "plan --model Llama-3.1-8B --train tp=2,pp=2,dp=2 "
                     "--infer tp=4,dp=2 --cluster dgx-h100 --quiet --json";
  char path[] = "/tmp/reshard-plan-XXXXXX", args[512];
  int fd = mkstemp(path);
  cr_assert(fd >= 0);
  close(fd);
  snprintf(args, sizeof args, "%s --plan-json %s", base, path);
  run_out r = run(args);
  cr_assert_eq(r.status, 0, "%s", r.err);
  json_object *table = json_tokener_parse(r.out);
  cr_assert_not_null(table, "not JSON: %.200s", r.out);
  char *text = slurp(path);
  json_object *plan = json_tokener_parse(text);
  cr_assert_not_null(plan, "--plan-json wrote no JSON: %.200s", text);
  json_object *moves = NULL, *rounds = NULL, *boxes = NULL;
  cr_assert(json_object_object_get_ex(plan, "moves", &moves));
  cr_assert(json_object_object_get_ex(plan, "rounds", &rounds));
  cr_assert(json_object_object_get_ex(plan, "boxes", &boxes));
  size_t n = json_object_array_length(moves);
  cr_expect_eq((double)n, plan_figure(table, "moves"));
  cr_expect_eq(json_object_get_double(rounds), plan_figure(table, "rounds"));
  cr_expect(!json_object_get_boolean(boxes), "the CLI plans without boxes");
  double inter = 0;
  /* a rank's calls: the (round, stage) pairs it sends or receives in */
  enum { MAX_RANKS = 64, MAX_STEPS = 4096 };
  static bool in_step[MAX_RANKS][MAX_STEPS];
  memset(in_step, 0, sizeof in_step);
  int calls[MAX_RANKS] = {0};
  for (size_t i = 0; i < n; i++) {
    json_object *m = json_object_array_get_idx(moves, i), *v = NULL;
    for (const char *k = "round\0stage\0bytes\0src\0dst\0"; *k;
         k += strlen(k) + 1)
      cr_assert(json_object_object_get_ex(m, k, &v), "move %zu lacks %s", i,
                k);
    cr_assert(json_object_object_get_ex(m, "route", &v));
    const char *route = json_object_get_string(v);
    if (!strcmp(route, "inter")) {
      json_object_object_get_ex(m, "bytes", &v);
      inter += json_object_get_double(v);
    }
    if (!strcmp(route, "local")) continue;
    json_object_object_get_ex(m, "round", &v);
    int step = json_object_get_int(v) * 2;
    json_object_object_get_ex(m, "stage", &v);
    step += json_object_get_int(v);
    cr_assert_lt(step, MAX_STEPS);
    for (const char *end = "src\0dst\0"; *end; end += 4) {
      json_object *e = NULL, *rank = NULL;
      json_object_object_get_ex(m, end, &e);
      cr_assert(json_object_object_get_ex(e, "rank", &rank));
      int r = json_object_get_int(rank);
      cr_assert(r >= 0 && r < MAX_RANKS);
      calls[r] += !in_step[r][step];
      in_step[r][step] = true;
    }
  }
  cr_expect(inter > 0);
  cr_expect_eq(inter, plan_figure(table, "bytes_inter"));
  /* the table prices the hot spot's calls, one a step, after its link */
  json_object *strategies = NULL, *ours = NULL, *hot = NULL, *v = NULL;
  cr_assert(json_object_object_get_ex(table, "strategies", &strategies));
  ours = json_object_array_get_idx(strategies, 0);
  cr_assert(json_object_object_get_ex(ours, "hot_spot", &hot));
  cr_assert(json_object_object_get_ex(hot, "rank", &v));
  int hot_rank = json_object_get_int(v);
  cr_assert(hot_rank >= 0 && hot_rank < MAX_RANKS);
  cr_assert(json_object_object_get_ex(hot, "calls", &v));
  cr_expect_eq(json_object_get_double(v), calls[hot_rank]);
  cr_expect_gt(calls[hot_rank], 0);
  double link_s, calls_s, time_s;
  cr_assert(json_object_object_get_ex(hot, "time_s", &v));
  link_s = json_object_get_double(v);
  cr_assert(json_object_object_get_ex(hot, "calls_s", &v));
  calls_s = json_object_get_double(v);
  cr_assert(json_object_object_get_ex(ours, "time_s", &v));
  time_s = json_object_get_double(v);
  cr_expect_float_eq(calls_s, calls[hot_rank] * 3.7e-6, 1e-12,
                     "dgx-h100: 3.7 us a call at the point");
  cr_expect_float_eq(time_s, link_s + calls_s, 1e-12);
  json_object_put(plan);
  json_object_put(table);
  free(text);
  done(&r);
  unlink(path);
  expect_failure("plan --model Llama-3.1-8B --train tp=2 --infer tp=2 "
                 "--cluster dgx-h100 --quiet --plan-json /nonexistent/p.json",
                 "--plan-json: cannot write '/nonexistent/p.json'");
}

/* local + intra + inter == needed, and local as expected */
static void expect_byte_figures(const char *args, bool local) {
  run_out r = run(args);
  cr_assert_eq(r.status, 0, "%s: %s", args, r.err);
  json_object *root = json_tokener_parse(r.out);
  cr_assert_not_null(root, "not JSON: %.200s", r.out);
  double l = plan_figure(root, "bytes_local"),
         intra = plan_figure(root, "bytes_intra"),
         inter = plan_figure(root, "bytes_inter"),
         need = plan_figure(root, "bytes_needed");
  cr_expect_gt(need, 0, "%s", args);
  cr_expect_float_eq(l + intra + inter, need, 0.5,
                     "%s: local %.0f + intra %.0f + inter %.0f != %.0f", args,
                     l, intra, inter, need);
  if (local)
    cr_expect_gt(l, 0, "%s", args);
  else
    cr_expect_eq(l, 0, "%s: nothing is local between disjoint ranks", args);
  json_object *cl = NULL, *co = NULL;
  cr_assert(json_object_object_get_ex(root, "cluster", &cl));
  cr_assert(json_object_object_get_ex(cl, "colocated", &co));
  cr_expect_eq(json_object_get_boolean(co), local, "%s", args);
  json_object_put(root);
  done(&r);
}

Test(cli, colocate_reports_local_intra_and_inter_bytes) {
  expect_byte_figures("plan --model Llama-3.1-8B --train tp=1,dp=8,fsdp=1 "
                      "--infer tp=2,dp=4 --cluster dgx-h100 --colocate --json "
                      "--quiet",
                      true);
  /* identical shardings: all is at home already */
  expect_byte_figures("plan --model Llama-3.1-8B --train tp=2 --infer tp=2 "
                      "--cluster dgx-h100 --colocate --json --quiet",
                      true);
  expect_byte_figures("plan --config qwen3-32b-fsdp8-to-tp4dp2-colocated-h100 "
                      "--json --quiet",
                      true);
  expect_byte_figures("plan --model Llama-3.1-8B --train tp=2,pp=2,dp=2 "
                      "--infer tp=4,dp=2 --cluster dgx-h100 --json --quiet",
                      false);

  run_out r = run("plan --model Llama-3.1-8B --train tp=1,dp=8,fsdp=1 "
                  "--infer tp=2,dp=4 --cluster dgx-h100 --colocate --json "
                  "--quiet");
  json_object *root = json_tokener_parse(r.out), *s = NULL;
  cr_assert_not_null(root);
  cr_assert(json_object_object_get_ex(root, "strategies", &s));
  json_object *hier = json_object_array_get_idx(s, 1), *v = NULL;
  cr_assert(json_object_object_get_ex(hier, "applicable", &v));
  cr_expect(!json_object_get_boolean(v), "the reference has no colocated mode");
  cr_expect(json_object_object_get_ex(hier, "time_s", &v) && v == NULL,
            "time_s is null");
  json_object_put(root);
  done(&r);

  r = run("plan --model Llama-3.1-8B --train tp=1,dp=8,fsdp=1 "
          "--infer tp=2,dp=4 --cluster dgx-h100 --colocate --quiet");
  cr_expect_eq(r.status, 0, "%s", r.err);
  for (const char *w = "stay on the GPU\0inside domains\0across domains\0"
                       "colocated\0n/a\0all-gathered\0";
       *w; w += strlen(w) + 1)
    cr_expect(strstr(r.out, w) != NULL, "table lacks '%s'", w);
  done(&r);
}

Test(cli, colocate_needs_as_many_trainer_as_inference_gpus) {
  run_out r = run("plan --model Llama-3.1-8B --train tp=1,dp=8,fsdp=1 "
                  "--infer tp=4,dp=4 --cluster dgx-h100 --colocate");
  cr_expect_eq(r.status, 2, "a usage error");
  cr_expect(strstr(r.err, "trainer uses 8 GPUs") != NULL, "%s", r.err);
  cr_expect(strstr(r.err, "inference engine 16") != NULL, "%s", r.err);
  done(&r);
  expect_failure("plan --config qwen3-32b-fsdp8-to-tp4dp2-colocated-h100 "
                 "--colocate --placement packed",
                 "exclude each other");
}

Test(cli, colocated_svg_draws_the_copies) {
  char args[512], svg[] = "/tmp/reshard-svg-XXXXXX";
  int fd = mkstemp(svg);
  cr_assert(fd >= 0);
  close(fd);
  snprintf(args, sizeof args,
           "plan --model Llama-3.1-8B --train tp=1,dp=8,fsdp=1 --infer "
           "tp=2,dp=4 --cluster dgx-h100 --colocate --quiet --svg %s",
           svg);
  run_out r = run(args);
  cr_expect_eq(r.status, 0, "%s", r.err);
  done(&r);
  char *pic = slurp(svg);
  cr_expect(strstr(pic, "GPU memory copy") != NULL);
  cr_expect(strstr(pic, "colocated") != NULL);
  cr_expect(strstr(pic, "</svg>") != NULL);
  free(pic);
  unlink(svg);
}

/* A usage error (exit 2) whose message names the option. */
static void expect_usage_error(const char *args, const char *option) {
  run_out r = run(args);
  cr_expect_eq(r.status, 2, "'%s' exited %d", args, r.status);
  cr_expect(strstr(r.err, option) != NULL, "'%s': '%s' not in: %s", args,
            option, r.err);
  done(&r);
}

Test(cli, bad_dtype_options_are_usage_errors) {
  const char *base = "plan --model Llama-3.1-8B --train tp=2 --infer tp=2 "
                     "--cluster dgx-h100 --quiet ";
  const struct {
    const char *opts, *option;
  } bad[] = {
      {"--infer-dtype fp4", "--infer-dtype: 'fp4' is not bf16, fp32 or fp8"},
      {"--infer-dtype=", "--infer-dtype"},
      {"--train-dtype fp8", "--train-dtype: 'fp8' is not bf16 or fp32"},
      {"--infer-dtype fp8 --fp8-block 128", "--fp8-block: '128'"},
      {"--infer-dtype fp8 --fp8-block 0,128", "--fp8-block"},
      {"--infer-dtype fp8 --fp8-block 128,x", "--fp8-block"},
      {"--infer-dtype fp8 --fp8-block 128,128,1", "--fp8-block"},
      {"--infer-dtype fp8 --fp8-scales max", "--fp8-scales: 'max'"},
      {"--fp8-block 64,64", "--fp8-block applies only with --infer-dtype fp8"},
      {"--infer-dtype bf16 --fp8-scales ue8m0", "--fp8-scales applies only"},
      {"--infer-dtype", "--infer-dtype needs a value"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char args[512];
    snprintf(args, sizeof args, "%s%s", base, bad[i].opts);
    expect_usage_error(args, bad[i].option);
  }
}

static json_object *member(json_object *o, const char *key) {
  json_object *v = NULL;
  cr_assert(json_object_object_get_ex(o, key, &v), "no '%s'", key);
  return v;
}

Test(cli, fp8_json_carries_conversion_per_rank) {
  run_out r = run("plan --model Llama-3.1-8B --train tp=1,dp=8,fsdp=1 "
                  "--infer tp=2,dp=4 --cluster dgx-h100 --infer-dtype fp8 "
                  "--fp8-scales ue8m0 --json --quiet");
  cr_assert_eq(r.status, 0, "%s", r.err);
  json_object *root = json_tokener_parse(r.out);
  cr_assert_not_null(root, "not JSON: %.200s", r.out);
  json_object *d = member(root, "dtypes"), *fp8 = member(d, "fp8");
  cr_expect_str_eq(json_object_get_string(member(d, "infer")), "fp8");
  cr_expect_str_eq(json_object_get_string(member(fp8, "scales")), "ue8m0");
  cr_expect_eq(json_object_get_int(member(fp8, "block_rows")), 128);
  cr_expect_eq(json_object_get_int(member(fp8, "tensors_quantized")),
               32 * 7, "q k v o gate up down of 32 layers");
  json_object *p = member(root, "plan");
  double sending = json_object_get_double(member(p, "converted_sending"));
  double receiving = json_object_get_double(member(p, "converted_receiving"));
  cr_expect_gt(sending + receiving, 6e9, "the linear weights, at least once");
  json_object *ranks = member(p, "conversion_ranks");
  cr_assert_gt(json_object_array_length(ranks), 0);
  double sum = 0;
  for (size_t i = 0; i < json_object_array_length(ranks); i++) {
    json_object *k = json_object_array_get_idx(ranks, i);
    sum += json_object_get_double(member(k, "converted_sending")) +
           json_object_get_double(member(k, "converted_receiving"));
    cr_expect_gt(json_object_get_double(member(k, "convert_s")), 0);
    member(k, "rank_name");
  }
  cr_expect_float_eq(sum, sending + receiving, 0.5);
  /* fp8 against the same sync in bf16 */
  json_object *w = member(root, "without_conversion");
  double plain = json_object_get_double(member(w, "bytes_inter")) +
                 json_object_get_double(member(w, "bytes_intra"));
  double ours = json_object_get_double(member(p, "bytes_inter")) +
                json_object_get_double(member(p, "bytes_intra"));
  cr_expect(ours < 0.6 * plain && ours > 0.45 * plain, "%g vs %g", ours,
            plain);
  json_object *s = member(root, "strategies");
  bool seen_plain = false, seen_gb = false;
  for (size_t i = 0; i < json_object_array_length(s); i++) {
    const char *key = json_object_get_string(
        member(json_object_array_get_idx(s, i), "key"));
    seen_plain |= !strcmp(key, "ours_plain");
    seen_gb |= !strcmp(key, "gb_convert");
  }
  cr_expect(seen_plain && seen_gb);
  cr_expect_gt(json_object_get_double(member(member(root, "speedups"),
                                             "vs_without_conversion")),
               1);
  cr_expect_gt(json_object_get_double(
                   member(member(root, "cluster"), "convert_bytes_per_s")),
               0);
  json_object_put(root);
  done(&r);

  /* the table says what fp8 saves */
  r = run("plan --model Llama-3.1-8B --train tp=1,dp=8,fsdp=1 --infer "
          "tp=2,dp=4 --cluster dgx-h100 --infer-dtype fp8 --quiet");
  cr_expect_eq(r.status, 0, "%s", r.err);
  for (const char *x = "dtypes : trainer bf16 -> inference fp8\0convert: "
                       "\0compare: \0ours, bf16 -> bf16 (no conversion)\0"
                       "gather, quantize, broadcast (RL)\0";
       *x; x += strlen(x) + 1)
    cr_expect(strstr(r.out, x) != NULL, "table lacks '%s'", x);
  done(&r);
}

/* Every prediction comes with its range: the same model at the ends of the
 * cluster's point-to-point ranges, bracketing the point figure. */
static void expect_ranges(const char *args) {
  run_out r = run(args);
  cr_assert_eq(r.status, 0, "%s", r.err);
  json_object *root = json_tokener_parse(r.out), *s = NULL, *v = NULL;
  cr_assert_not_null(root);
  cr_assert(json_object_object_get_ex(root, "strategies", &s));
  size_t n = json_object_array_length(s);
  cr_assert_geq(n, 6);
  for (size_t i = 0; i < n; i++) {
    json_object *x = json_object_array_get_idx(s, i), *t, *lo, *hi;
    cr_assert(json_object_object_get_ex(x, "time_s", &t));
    cr_assert(json_object_object_get_ex(x, "time_low", &lo), "time_low");
    cr_assert(json_object_object_get_ex(x, "time_high", &hi), "time_high");
    if (!t) {
      cr_expect_null(lo, "null where the strategy does not apply");
      cr_expect_null(hi);
      continue;
    }
    double a = json_object_get_double(lo), p = json_object_get_double(t),
           b = json_object_get_double(hi);
    const char *key = json_object_get_string(
        json_object_object_get(x, "key"));
    cr_expect_leq(a, p * (1 + 1e-12), "%s: low %g <= point %g", key, a, p);
    cr_expect_leq(p, b * (1 + 1e-12), "%s: point %g <= high %g", key, p, b);
    if (!strcmp(key, "ours"))
      cr_expect_gt(b, p * 1.05, "ours: the slow end is slower: %g vs %g", b,
                   p);
  }
  cr_expect(json_object_object_get_ex(root, "speedups_at_ends", &v) && v);
  cr_expect(json_object_object_get_ex(root, "ranges", &v) && v);
  json_object_put(root);
  done(&r);
}

Test(cli, predictions_carry_their_range) {
  expect_ranges("plan --model Llama-3.1-8B --train tp=2,pp=2,dp=2 "
                "--infer tp=4,dp=2 --cluster dgx-h100 --json --quiet");
  expect_ranges("plan --model Llama-3.1-8B --train tp=1,dp=8,fsdp=1 "
                "--infer tp=2,dp=4 --cluster dgx-h100 --colocate --json "
                "--quiet");
  run_out r = run("plan --model Llama-3.1-8B --train tp=2,pp=2,dp=2 "
                  "--infer tp=4,dp=2 --cluster dgx-h100 --quiet");
  cr_assert_eq(r.status, 0, "%s", r.err);
  for (const char *w = "time [s] (range)\0at the ends of the ranges\0"
                       "p2p_nvlink_fraction\0uncalibrated\0";
       *w; w += strlen(w) + 1)
    cr_expect(strstr(r.out, w) != NULL, "table lacks '%s'", w);
  done(&r);

  /* a cluster file's range reaches the prediction */
  char path[] = "/tmp/reshard-range-XXXXXX";
  int fd = mkstemp(path);
  cr_assert(fd >= 0);
  FILE *f = fdopen(fd, "w");
  fputs("{\"gpus_per_domain\": 8, \"nvlink_gbps\": 400, \"nic_gbps\": 50, "
        "\"p2p_nvlink_fraction\": [0.25, 1], \"p2p_nic_fraction\": [0.5, 1],"
        " \"source\": \"test\"}",
        f);
  fclose(f);
  char args[512];
  snprintf(args, sizeof args,
           "plan --model Llama-3.1-8B --train tp=2,pp=2,dp=2 --infer tp=4,dp=2 "
           "--cluster %s --json --quiet",
           path);
  expect_ranges(args);
  unlink(path);

  /* a bad range: an error naming the key */
  fd = mkstemp(strcpy(path, "/tmp/reshard-range-XXXXXX"));
  cr_assert(fd >= 0);
  f = fdopen(fd, "w");
  fputs("{\"gpus_per_domain\": 8, \"nvlink_gbps\": 400, \"nic_gbps\": 50, "
        "\"p2p_nvlink_fraction\": [0.9, 0.4]}",
        f);
  fclose(f);
  snprintf(args, sizeof args,
           "plan --model Llama-3.1-8B --train tp=2 --infer tp=2 --cluster %s",
           path);
  expect_failure(args, "'p2p_nvlink_fraction' is a range [low, high] but its "
                       "low end (0.9) is above its high end (0.4)");
  unlink(path);
}
