/* The transport conformance suite between processes (tcase.h): a
 * transport module loaded by name (rsi_module_load) and created through
 * its versioned rsi_module_args, one rank per process, MPI only to start
 * the processes and bring them together (no Criterion: it forks, which
 * MPI does not survive).
 *
 *   mpirun -np N transport_procs MODULE [--only CASE] [--needs-gpu]
 *
 * Rank 0 prints one line per case (PASS, SKIP with why, or FAIL with the
 * first failure of the lowest failing rank) and a closing line
 * "N passed, N failed"; the exit code is 0 when nothing failed, 77 (a
 * skip for ctest) with --needs-gpu on a machine without a GPU, 1 else.
 *
 * A transport joins by a row in `modules` below (what it declares, how its
 * creation arguments are made on MPI_COMM_WORLD) and a line in
 * CMakeLists.txt. */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tcase.h"

typedef struct proc_module {
  const char *name;
  bool has_control, has_integrity;
  /* Fill what the module reads (a fresh transport per case). */
  void (*args)(rsi_module_args *a);
} proc_module;

/* The Fortran handle of MPI_COMM_WORLD, as core/context.c hands it on. */
static void mpi_args(rsi_module_args *a) {
  a->engine = (int64_t)MPI_Comm_c2f(MPI_COMM_WORLD);
}

static const proc_module modules[] = {
    {"mpi", true, true, mpi_args},
    /* A GPU transport joins here, e.g. {"nccl", true, <its checksums>,
     * nccl_args}, where nccl_args sets rank, world and device and shares
     * rank 0's engine id over MPI; its CMakeLists.txt line carries
     * --needs-gpu and the label gpu. */
};

typedef struct procs {
  const proc_module *m;
  const rsi_module *module;
  int rank, world;
} procs;

static rs_status create(void *arg, rsi_transport **out, rsi_err *err) {
  procs *p = arg;
  rsi_module_args a = rsi_module_args_init();
  p->m->args(&a);
  int rank = -1, world = -1, *hosts = NULL;
  RSI_TRY(p->module->create(&a, out, &rank, &world, &hosts, err));
  free(hosts);
  if (rank == p->rank && world == p->world) return RS_OK;
  (*out)->ops->destroy(*out);
  *out = NULL;
  return RSI_FAIL(err, RS_ERR_INTERNAL,
                  "the module made rank %d of %d; MPI says %d of %d", rank,
                  world, p->rank, p->world);
}

static bool all(void *arg, bool ok) {
  (void)arg;
  int mine = ok, every = 0;
  MPI_Allreduce(&mine, &every, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
  return every != 0;
}

/* Combine one case's verdicts: the worst wins; rank 0 prints it, with the
 * reason of the lowest rank that has it. */
static tc_verdict run_case(const procs *p, const tc_driver *d,
                           const tc_case *c) {
  char why[TC_WHY_BYTES] = "";
  int v = (int)tc_run(d, c, why, sizeof why), worst = v;
  MPI_Allreduce(MPI_IN_PLACE, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  int first = v == worst ? p->rank : p->world;
  MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Bcast(why, sizeof why, MPI_CHAR, first, MPI_COMM_WORLD);
  static const char *word[] = {"PASS", "SKIP", "FAIL"};
  if (p->rank == 0 && worst == TC_PASS) printf("PASS %s\n", c->name);
  else if (p->rank == 0)
    printf("%s %s: [rank %d] %s\n", word[worst], c->name, first, why);
  fflush(stdout);
  return (tc_verdict)worst;
}

static const proc_module *find_module(const char *name) {
  for (size_t i = 0; i < sizeof modules / sizeof *modules; i++)
    if (strcmp(modules[i].name, name) == 0) return &modules[i];
  return NULL;
}

/* The device nodes of an NVIDIA driver: without them no GPU is usable. */
static bool gpu_present(void) { return access("/dev/nvidiactl", F_OK) == 0; }

/* Load the module and run the cases (all, or `only`); the exit code. */
static int run_suite(procs *p, const char *only) {
  tc_driver d = {.transport = p->m->name,
                 .world = p->world,
                 .ranks = &p->rank,
                 .nranks = 1,
                 .has_control = p->m->has_control,
                 .has_integrity = p->m->has_integrity,
                 .wait_ms = 10000,
                 .create = create,
                 .all = all,
                 .arg = p};
  int passed = 0, failed = 0, skipped = 0;
  for (int i = 0; i < TC_NCASES; i++) {
    if (only && strcmp(only, tc_cases[i].name) != 0) continue;
    tc_verdict v = run_case(p, &d, &tc_cases[i]);
    passed += v == TC_PASS;
    skipped += v == TC_SKIP;
    failed += v == TC_FAIL;
  }
  if (p->rank == 0) {
    if (skipped) printf("%d skipped\n", skipped);
    printf("%d passed, %d failed\n", passed, failed);
  }
  return failed || passed + skipped == 0 ? 1 : 0;
}

static int usage(int rank) {
  if (rank == 0)
    fprintf(stderr, "usage: transport_procs MODULE [--only CASE] "
                    "[--needs-gpu]\n");
  return 2;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  procs p = {0};
  MPI_Comm_rank(MPI_COMM_WORLD, &p.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &p.world);
  const char *only = NULL;
  bool needs_gpu = false, bad = argc < 2;
  for (int i = 2; i < argc && !bad; i++) {
    if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) only = argv[++i];
    else if (strcmp(argv[i], "--needs-gpu") == 0) needs_gpu = true;
    else bad = true;
  }
  int rc = 0;
  rsi_err err = {0};
  if (bad || !(p.m = find_module(argv[1]))) {
    rc = usage(p.rank);
  } else if (needs_gpu && !all(NULL, gpu_present())) {
    if (p.rank == 0) printf("SKIP %s: no GPU on some rank\n", p.m->name);
    rc = 77;
  } else if (!all(NULL, rsi_module_load(p.m->name, &p.module, &err) ==
                           RS_OK)) {
    printf("FAIL loading %s on rank %d: %s\n", p.m->name, p.rank,
           err.msg[0] ? err.msg : "another rank could not");
    rc = 1;
  } else {
    rc = run_suite(&p, only);
  }
  MPI_Finalize();
  return rc;
}
