/* SPDX-License-Identifier: Apache-2.0 */
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
 * skip for ctest) with --needs-gpu where some process sees fewer GPUs
 * than there are processes, 1 else.
 *
 * A transport joins by a row in `modules` below (what it declares, how its
 * creation arguments are made on MPI_COMM_WORLD) and a line in
 * CMakeLists.txt. A GPU transport (device memory) needs this program built
 * with the CUDA runtime (RESHARD_TRANSPORT_CUDA, where the build makes the
 * NCCL module): each process takes device rank % (devices it sees), and
 * payloads are staged between host and device on a stream of this
 * program's own. */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef RESHARD_TRANSPORT_CUDA
#include <cuda_runtime.h>
#endif

#include "tcase.h"

typedef struct procs procs;

typedef struct proc_module {
  const char *name;
  /* what the transport declares (tc_driver) */
  bool has_control, has_integrity, has_notices, ordered_only, queued;
  bool batched_control;
  bool gpu; /* moves device memory: one CUDA device per process */
  /* Fill what the module reads (a fresh transport per case; collective
   * over the processes, failing on all or none). */
  rs_status (*args)(procs *p, rsi_module_args *a, rsi_err *err);
} proc_module;

#define ENGINE_ID_BYTES 128 /* sizeof(ncclUniqueId) */

struct procs {
  const proc_module *m;
  const rsi_module *module;
  int rank, world;
  int device; /* this process's CUDA device, -1 for none */
  unsigned char id[ENGINE_ID_BYTES]; /* the engine id of this case's */
#ifdef RESHARD_TRANSPORT_CUDA
  cudaStream_t copies; /* staging copies, apart from the transport's */
#endif
};

/* The Fortran handle of MPI_COMM_WORLD, as capi/src/mpi_api.c hands it on. */
static rs_status mpi_args(procs *p, rsi_module_args *a, rsi_err *err) {
  (void)p;
  (void)err;
  a->engine = (int64_t)MPI_Comm_c2f(MPI_COMM_WORLD);
  return RS_OK;
}

#ifdef RESHARD_TRANSPORT_CUDA
/* A fresh NCCL unique id from rank 0 (through the module, which links
 * NCCL), shared over MPI; rank, world and device as MPI and main chose. */
static rs_status nccl_args(procs *p, rsi_module_args *a, rsi_err *err) {
  rs_status st = RS_OK;
  if (p->rank == 0)
    st = p->module->make_id
             ? p->module->make_id(p->id, sizeof p->id, err)
             : RSI_FAIL(err, RS_ERR_UNSUPPORTED,
                        "module '%s' makes no engine id", p->m->name);
  int made = st == RS_OK;
  MPI_Bcast(&made, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (!made)
    return p->rank == 0 ? st
                        : RSI_FAIL(err, RS_ERR_TRANSPORT,
                                   "rank 0 could not make an NCCL unique id");
  MPI_Bcast(p->id, (int)sizeof p->id, MPI_BYTE, 0, MPI_COMM_WORLD);
  a->engine_id = p->id;
  a->engine_id_bytes = sizeof p->id;
  a->rank = p->rank;
  a->world = p->world;
  a->device = p->device;
  return RS_OK;
}
#endif

static const proc_module modules[] = {
    {.name = "mpi",
     .has_control = true,
     .has_integrity = true,
     .has_notices = true,
     .args = mpi_args},
#ifdef RESHARD_TRANSPORT_CUDA
    /* NCCL: device memory, one GPU per process; a control channel whose
     * notices do not travel, no checksums, no tags (posting order per
     * pair), and queued (test says done once NCCL took a group). */
    {.name = "nccl",
     .has_control = true,
     .has_integrity = false,
     .has_notices = false,
     .ordered_only = true,
     .batched_control = true,
     .queued = true,
     .gpu = true,
     .args = nccl_args},
#endif
};

static rs_status create(void *arg, rsi_transport **out, rsi_err *err) {
  procs *p = arg;
  rsi_module_args a = rsi_module_args_init();
  RSI_TRY(p->m->args(p, &a, err));
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

/* ---- GPUs ----------------------------------------------------------------- */

#ifdef RESHARD_TRANSPORT_CUDA
static rs_status cuda_fail(rsi_err *err, cudaError_t e, const char *what) {
  return RSI_FAIL(err, RS_ERR_TRANSPORT, "%s failed: %s (%s)", what,
                  cudaGetErrorString(e), cudaGetErrorName(e));
}

/* The devices this process sees; 0 without a driver or a device. */
static int gpu_count(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError(); /* clear it */
    n = 0;
  }
  return n;
}

/* Device rank % n for this process, and the staging stream. */
static rs_status gpu_open(procs *p, int n, rsi_err *err) {
  p->device = p->rank % n;
  cudaError_t e = cudaSetDevice(p->device);
  if (e != cudaSuccess) return cuda_fail(err, e, "cudaSetDevice");
  e = cudaStreamCreateWithFlags(&p->copies, cudaStreamNonBlocking);
  return e == cudaSuccess ? RS_OK : cuda_fail(err, e, "cudaStreamCreate");
}

static void gpu_close(procs *p) {
  if (p->copies) cudaStreamDestroy(p->copies);
  p->copies = NULL;
}

/* One copy on the staging stream, complete on return. It waits for
 * nothing on the transport's queues: the kit drains those first. */
static rs_status staged(procs *p, void *dst, const void *src, size_t n,
                        enum cudaMemcpyKind kind, rsi_err *err) {
  cudaError_t e = cudaMemcpyAsync(dst, src, n, kind, p->copies);
  if (e == cudaSuccess) e = cudaStreamSynchronize(p->copies);
  return e == cudaSuccess ? RS_OK
                          : cuda_fail(err, e,
                                      kind == cudaMemcpyHostToDevice
                                          ? "staging a payload to the device"
                                          : "staging bytes to the host");
}

static rs_status to_device(void *arg, int me, void *dst, const void *src,
                           size_t n, rsi_err *err) {
  (void)me; /* this process's one rank, on p->device */
  return staged(arg, dst, src, n, cudaMemcpyHostToDevice, err);
}

static rs_status to_host(void *arg, int me, void *dst, const void *src,
                         size_t n, rsi_err *err) {
  (void)me;
  return staged(arg, dst, src, n, cudaMemcpyDeviceToHost, err);
}

/* Poll the transport's queue (a CUDA stream of the module's) until it is
 * idle or wait_ms passed. */
static rs_status drain(void *arg, void *queue, int64_t wait_ms, rsi_err *err) {
  (void)arg;
  int64_t until = tc_now_ms() + wait_ms;
  for (;;) {
    cudaError_t e = cudaStreamQuery((cudaStream_t)queue);
    if (e == cudaSuccess) return RS_OK;
    if (e != cudaErrorNotReady) return cuda_fail(err, e, "cudaStreamQuery");
    if (tc_now_ms() >= until)
      return RSI_FAIL(err, RS_ERR_TIMEOUT,
                      "the queue still held work after %lld ms",
                      (long long)wait_ms);
    tc_pause();
  }
}
#endif

/* Load the module and run the cases (all, or `only`); the exit code. */
static int run_suite(procs *p, const char *only) {
  tc_driver d = {.transport = p->m->name,
                 .world = p->world,
                 .ranks = &p->rank,
                 .nranks = 1,
                 .has_control = p->m->has_control,
                 .has_integrity = p->m->has_integrity,
                 .has_notices = p->m->has_notices,
                 .ordered_only = p->m->ordered_only,
                 .batched_control = p->m->batched_control,
                 .queued = p->m->queued,
                 .wait_ms = 10000,
                 .create = create,
                 .all = all,
                 .arg = p};
#ifdef RESHARD_TRANSPORT_CUDA
  if (p->m->gpu) {
    d.to_device = to_device;
    d.to_host = to_host;
    d.drain = drain;
  }
#endif
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

/* --needs-gpu and a GPU transport's device: 0 to go on, else the exit
 * code (77: skipped, printed). */
static int gpu_setup(procs *p, bool needs_gpu) {
  if (!needs_gpu && !p->m->gpu) return 0;
#ifdef RESHARD_TRANSPORT_CUDA
  int n = gpu_count(), fewest = n;
  MPI_Allreduce(&n, &fewest, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (needs_gpu && fewest < p->world) {
    if (p->rank == 0)
      printf("transport.%s: needs %d GPUs, this machine has %d: skipped\n",
             p->m->name, p->world, fewest);
    return 77;
  }
  if (!p->m->gpu) return 0;
  if (fewest < 1) {
    if (p->rank == 0)
      printf("FAIL %s: a process sees no GPU (run with --needs-gpu to skip "
             "instead)\n",
             p->m->name);
    return 1;
  }
  rsi_err err = {0};
  bool ok = gpu_open(p, n, &err) == RS_OK;
  if (!ok) printf("FAIL %s on rank %d: %s\n", p->m->name, p->rank, err.msg);
  return all(NULL, ok) ? 0 : 1;
#else
  if (p->rank == 0)
    printf("transport.%s: transport_procs was built without the CUDA "
           "runtime, which a GPU is used through: skipped\n",
           p->m->name);
  return 77;
#endif
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  procs p = {.device = -1};
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
  } else if ((rc = gpu_setup(&p, needs_gpu)) != 0) {
    /* skipped or failed, said */
  } else if (!all(NULL, rsi_module_load(p.m->name, &p.module, &err) ==
                           RS_OK)) {
    printf("FAIL loading %s on rank %d: %s\n", p.m->name, p.rank,
           err.msg[0] ? err.msg : "another rank could not");
    rc = 1;
  } else {
    rc = run_suite(&p, only);
  }
  fflush(stdout);
#ifdef RESHARD_TRANSPORT_CUDA
  gpu_close(&p);
#endif
  MPI_Finalize();
  return rc;
}
