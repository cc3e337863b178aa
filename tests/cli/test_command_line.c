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
                        "--progress", "--quiet", "--help", "tp", "cp", "pp",
                        "ep", "etp", "dp", "edp", "gpus", "fsdp"};
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
