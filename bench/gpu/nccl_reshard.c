/* SPDX-License-Identifier: Apache-2.0 */
/* nccl_reshard: libreshard's NCCL transport on one real GPU, through the
 * public API only (reshard.h, reshard_nccl.h) and the CUDA runtime.
 *
 * One in-process NCCL context of one rank on device 0
 * (rs_context_create_nccl_devices), checks (a) to (c), then (d) on a
 * second context:
 *
 * (a) Two Qwen3-32B decoder layers (hidden 5120, q 64x128 = 8192, k/v
 *     8x128 = 1024, intermediate 25600, bf16; about 0.97 GB a layer).
 *     Source: trainer-style TP=4 shards, column-parallel q/k/v/gate/up
 *     split on dim 0, row-parallel o/down split on dim 1 (strided in the
 *     full tensor), norms replicated; TP shard tp packed in source buffer
 *     tp, all four buffers on rank 0. Destination: vLLM-style fused
 *     buffers in one destination buffer of rank 0: per layer qkv_proj (q,
 *     k, v rows back to back), o_proj, gate_up_proj (gate, up), down_proj,
 *     the norms; 256-byte gaps between the groups and a 1 MiB tail that
 *     nothing may write. Sources hold value_at(tensor, global element
 *     index); the destination is poisoned with 0xA5 bytes; after the
 *     execution EVERY destination element is compared with its expected
 *     value and every gap/tail byte with the poison. Then timed: 2
 *     warm-ups, 10 executions back to back on one stream (execute_async
 *     each, one rs_plan_wait), beside cudaMemcpyAsync device-to-device of
 *     the same bytes; verified again after those 12 runs.
 * (c) The same layers to fp8: every 2-D weight becomes f8_e4m3 with one
 *     f32 scale per 128 x 128 block (RS_SCALE_AMAX) beside it in the
 *     destination buffer, the norms stay bf16; sources hold weight-like
 *     bf16 (weight_at: never NaN). The same plan run once in process on
 *     the CPU (the host engine, core/copy/convert.c) gives the expected bytes;
 *     the GPU's destination must equal them byte for byte (values, scales
 *     and the poison around them) after the first execution and after the
 *     timed ones; time per execution beside (a)'s bf16 -> bf16.
 * (b) Fixed cost: a plan of one 4 KiB tensor (one source shard, one
 *     destination shard at byte offset 4096) on the same context; checked
 *     once, then 1000 rs_plan_execute_async back to back and one
 *     rs_plan_wait: host time per call, and per execution until the wait
 *     returned (target < 50 us), beside 1000 cudaMemcpyAsync of 4 KiB.
 *
 * (d) Per-rank planning: a context of one rank made from a unique id
 *     (rs_context_create_nccl_id, as between processes), rounds by domain
 *     pair and the part of its own rank: the part of (c)'s fp8 layers must
 *     be the whole plan move for move, and (a) runs again on that context
 *     with its layers planned that way (its rows say d:per-rank; each
 *     execution is waited for, as between processes).
 *
 * It ends with one table (header "== libreshard GPU check =="). Exit
 * status: 0 when every correctness check passed (timings only say whether
 * their target was met), 1 on any libreshard or CUDA error, 2 when a check
 * failed (a wrong element or byte, or back-to-back executions refused), 3 when the watchdog fired, 77 when no CUDA device is usable.
 *
 * Usage: nccl_reshard [--layers N] [--reps N] [--tiny-reps N]
 *                     [--device D] [--watchdog SECONDS] [--host]
 *   --host: a dry run of the same layouts and checks on the CPU with the
 *   in-process transport and host memory (no GPU needed; its timings are
 *   not GPU figures). --self-test: spoil one destination element and one
 *   gap byte after the first execution of (a), and one fp8 byte after that of
 *   (c), to see the checks fail (exit 2).
 *   Built by bench/CMakeLists.txt when the NCCL module
 *   is (target nccl_reshard); bench/gpu/check.sh builds and runs it. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "../bench_common.h"

#include <cuda_runtime_api.h>
#include <reshard/reshard.h>
#include <reshard/reshard_nccl.h>

#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>

/* ---- model ---------------------------------------------------------------- */

enum { TP = 4, HIDDEN = 5120, Q_OUT = 8192, KV_OUT = 1024, INTER = 25600 };
enum { HEAD_DIM = 128, MAX_T = 11 * 16, NGROUPS = 8 };
#define ALIGN 256
#define GAP 256                        /* poisoned bytes between dst groups */
#define TAIL ((int64_t)1 << 20)        /* poisoned bytes after the last one */
#define POISON_BYTE 0xA5
#define POISON16 ((uint16_t)0xA5A5)
#define ESIZE 2                        /* bf16 */

typedef struct tensor {
  char name[96];
  const char *group;  /* the destination's fused parameter */
  int layer, gid, member;
  int ndim;
  int64_t shape[2];
  int split;          /* TP-sharded dim, -1 replicated */
  int64_t numel;
  int64_t src_off;    /* byte offset in every TP source buffer */
  int64_t dst_off;    /* byte offset in the destination buffer */
} tensor;

static tensor T[MAX_T];
static int NT;
static int64_t SRC_TP_BYTES;  /* one TP source buffer */
static int64_t DST_END;       /* end of the last destination tensor */
static int64_t PAYLOAD;       /* bytes of all tensors (destination bytes) */

static const char *GROUP_NAMES[NGROUPS] = {
    "qkv_proj", "o_proj", "gate_up_proj", "down_proj", "input_layernorm",
    "post_attention_layernorm", "q_norm", "k_norm"};

static int64_t align_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

/* Tensors are added in the trainer's (checkpoint) order; that is the order
 * of a TP source buffer. */
static void add(int layer, const char *suffix, int gid, int member, int ndim,
                int64_t d0, int64_t d1, int split) {
  tensor *t = &T[NT++];
  snprintf(t->name, sizeof t->name, "model.layers.%d.%s", layer, suffix);
  t->group = GROUP_NAMES[gid];
  t->layer = layer;
  t->gid = gid;
  t->member = member;
  t->ndim = ndim;
  t->shape[0] = d0;
  t->shape[1] = ndim > 1 ? d1 : 1;
  t->split = split;
  t->numel = d0 * t->shape[1];
  int64_t local = split < 0 ? t->numel : t->numel / TP;
  t->src_off = SRC_TP_BYTES;
  SRC_TP_BYTES = align_up(SRC_TP_BYTES + local * ESIZE, ALIGN);
  PAYLOAD += t->numel * ESIZE;
}

static void build_model(int layers) {
  NT = 0;
  SRC_TP_BYTES = PAYLOAD = 0;
  for (int l = 0; l < layers; l++) {
    add(l, "input_layernorm.weight", 4, 0, 1, HIDDEN, 1, -1);
    add(l, "self_attn.q_proj.weight", 0, 0, 2, Q_OUT, HIDDEN, 0);
    add(l, "self_attn.k_proj.weight", 0, 1, 2, KV_OUT, HIDDEN, 0);
    add(l, "self_attn.v_proj.weight", 0, 2, 2, KV_OUT, HIDDEN, 0);
    add(l, "self_attn.o_proj.weight", 1, 0, 2, HIDDEN, Q_OUT, 1);
    add(l, "self_attn.q_norm.weight", 6, 0, 1, HEAD_DIM, 1, -1);
    add(l, "self_attn.k_norm.weight", 7, 0, 1, HEAD_DIM, 1, -1);
    add(l, "post_attention_layernorm.weight", 5, 0, 1, HIDDEN, 1, -1);
    add(l, "mlp.gate_proj.weight", 2, 0, 2, INTER, HIDDEN, 0);
    add(l, "mlp.up_proj.weight", 2, 1, 2, INTER, HIDDEN, 0);
    add(l, "mlp.down_proj.weight", 3, 0, 2, HIDDEN, INTER, 1);
  }
  /* The destination: per layer, group by group (vLLM's order), members of
   * a group back to back, a poisoned gap before every group. */
  int64_t off = 0;
  for (int l = 0; l < layers; l++)
    for (int g = 0; g < NGROUPS; g++) {
      off = align_up(off + GAP, ALIGN);
      for (int m = 0; m < 3; m++)
        for (int i = 0; i < NT; i++)
          if (T[i].layer == l && T[i].gid == g && T[i].member == m) {
            T[i].dst_off = off;
            off += T[i].numel * ESIZE;
          }
    }
  DST_END = off;
}

/* The element every tensor holds at a global (row-major) index. Never the
 * poison, so that an element left unwritten is always seen. */
static inline uint16_t value_at(int t, int64_t index) {
  uint64_t x = (uint64_t)index * 0x9E3779B97F4A7C15ull ^
               (uint64_t)(t + 1) * 0xBF58476D1CE4E5B9ull;
  x ^= x >> 31;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 29;
  uint16_t v = (uint16_t)(x >> 48);
  return v == POISON16 ? (uint16_t)0x5A5A : v;
}

/* The box of tensor t that TP rank tp holds. */
static void local_box(const tensor *t, int tp, int64_t off[2],
                      int64_t ext[2]) {
  off[0] = off[1] = 0;
  ext[0] = t->shape[0];
  ext[1] = t->shape[1];
  if (t->split >= 0) {
    ext[t->split] = t->shape[t->split] / TP;
    off[t->split] = ext[t->split] * tp;
  }
}

/* ---- results table, failure, watchdog ------------------------------------- */

typedef struct row {
  char cas[16], fig[44], meas[24], base[30], tgt[22], verdict[16];
} row;
static row ROWS[96];
static int NROWS;
static bool HOST;         /* --host: a CPU dry run */
static bool CORRUPT;      /* --self-test: spoil bytes to prove the checks */
static int BAD_CHECKS;    /* correctness checks that failed */
static rs_context *CTX;   /* for rs_context_last_error */
static const char *volatile PHASE = "start";

static void add_row(const char *cas, const char *fig, const char *meas,
                    const char *base, const char *tgt, const char *verdict) {
  if (NROWS >= (int)(sizeof ROWS / sizeof ROWS[0])) return;
  row *r = &ROWS[NROWS++];
  snprintf(r->cas, sizeof r->cas, "%s", cas);
  snprintf(r->fig, sizeof r->fig, "%s", fig);
  snprintf(r->meas, sizeof r->meas, "%s", meas);
  snprintf(r->base, sizeof r->base, "%s", base);
  snprintf(r->tgt, sizeof r->tgt, "%s", tgt);
  snprintf(r->verdict, sizeof r->verdict, "%s", verdict);
}

static void print_table(int exit_code) {
  printf("\n== libreshard GPU check ==%s\n",
         HOST ? " (HOST DRY RUN: CPU, in-process transport; not GPU figures)"
              : "");
  printf("%-10s %-44s %-24s %-30s %-22s %s\n", "case", "figure", "measured",
         "baseline", "ratio/target", "result");
  printf("%-10s %-44s %-24s %-30s %-22s %s\n", "----------",
         "--------------------------------------------",
         "------------------------", "------------------------------",
         "----------------------", "------");
  for (int i = 0; i < NROWS; i++)
    printf("%-10s %-44s %-24s %-30s %-22s %s\n", ROWS[i].cas, ROWS[i].fig,
           ROWS[i].meas, ROWS[i].base, ROWS[i].tgt, ROWS[i].verdict);
  printf("PASS/FAIL: correctness and the API's promises (set the exit status); "
         "PASS/FAIL (timing): a speed target, reported only\n");
  printf("nccl_reshard: exit %d: %s\n", exit_code,
         exit_code == 0   ? "PASS (every correctness check passed)"
         : exit_code == 2 ? "FAIL (a correctness check failed)"
         : exit_code == 77 ? "SKIP (no usable CUDA device)"
                           : "FAIL (an error stopped the check)");
  fflush(stdout);
}

static void die(const char *what) {
  fflush(stdout);
  fprintf(stderr, "nccl_reshard: FAILED in phase '%s': %s\n", PHASE, what);
  add_row("error", PHASE, "FAILED", "see the message above", "", "FAIL");
  print_table(1);
  fflush(stderr);
  _exit(1); /* no exit handlers: a faulted CUDA context must not hang us */
}

static void die_rs(const char *call, rs_status st, const char *file,
                   int line) {
  char msg[2048];
  const char *detail = CTX ? rs_context_last_error(CTX) : "";
  snprintf(msg, sizeof msg,
           "%s:%d: %s returned %s (%s)\n  context error: %s\n"
           "  thread error : %s",
           file, line, call, rs_status_name(st), rs_status_string(st),
           detail[0] ? detail : "(none)",
           rs_last_error()[0] ? rs_last_error() : "(none)");
  if (!HOST) {
    cudaError_t e = cudaPeekAtLastError();
    if (e != cudaSuccess)
      fprintf(stderr, "  CUDA's last error: %s (%s)\n", cudaGetErrorString(e),
              cudaGetErrorName(e));
  }
  die(msg);
}

static void die_cuda(const char *call, cudaError_t e, const char *file,
                     int line) {
  char msg[1024];
  snprintf(msg, sizeof msg, "%s:%d: %s: %s (%s)", file, line, call,
           cudaGetErrorString(e), cudaGetErrorName(e));
  die(msg);
}

#define RS(call)                                              \
  do {                                                        \
    rs_status rs_st_ = (call);                                \
    if (rs_st_ != RS_OK) die_rs(#call, rs_st_, __FILE__, __LINE__); \
  } while (0)

#define CU(call)                                                  \
  do {                                                            \
    cudaError_t cu_e_ = (call);                                   \
    if (cu_e_ != cudaSuccess) die_cuda(#call, cu_e_, __FILE__, __LINE__); \
  } while (0)

static void phase(const char *p) {
  PHASE = p;
  printf("-- %s\n", p);
  fflush(stdout);
}

static void put(const char *s) {
  size_t n = 0;
  while (s[n]) n++;
  ssize_t w = write(2, s, n);
  (void)w;
}

static void on_alarm(int sig) {
  (void)sig;
  put("\nnccl_reshard: WATCHDOG: no end in sight, still in phase '");
  put(PHASE);
  put("'; giving up (exit 3)\n");
  _exit(3);
}

/* ---- memory of either kind ------------------------------------------------ */

static int DEV;
static cudaStream_t STREAM;

static void *dalloc(size_t bytes) {
  void *p = NULL;
  if (HOST) {
    if (posix_memalign(&p, 4096, bytes ? bytes : 1) != 0) die("out of host memory");
  } else {
    CU(cudaMalloc(&p, bytes ? bytes : 1));
  }
  return p;
}

static void dfree(void *p) {
  if (!p) return;
  if (HOST) free(p);
  else CU(cudaFree(p));
}

static void h2d(void *d, const void *h, size_t n) {
  if (HOST) memcpy(d, h, n);
  else CU(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice));
}

static void d2h(void *h, const void *d, size_t n) {
  if (HOST) memcpy(h, d, n);
  else CU(cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost));
}

static void poison(void *d, size_t n) {
  if (HOST) {
    memset(d, POISON_BYTE, n);
  } else {
    CU(cudaMemset(d, POISON_BYTE, n));
    CU(cudaDeviceSynchronize());
  }
}

static rs_memory MEM(void) { return HOST ? RS_MEMORY_HOST : RS_MEMORY_CUDA; }
static int MEMDEV(void) { return HOST ? -1 : DEV; }
static void *QUEUE(void) { return HOST ? NULL : (void *)STREAM; }

/* Start one execution; a host context takes one at a time, so it waits
 * here too. An in-process NCCL context takes the next execution at once
 * (reshard_nccl.h); should it refuse, that is a failed check, and from
 * then on every execution is waited for, so that the other figures still
 * come. */
static bool B2B_REFUSED;
/* (d): a context between processes takes one execution at a time
 * (reshard_nccl.h), so each is waited for */
static bool WAIT_EACH;
static void start(rs_plan *p) {
  rs_status st = rs_plan_execute_async(p, QUEUE());
  if (st == RS_ERR_INVALID_ARGUMENT && !HOST && !B2B_REFUSED && !WAIT_EACH) {
    printf("   BACK-TO-BACK REFUSED: rs_plan_execute_async with an execution "
           "in flight: %s: %s\n   (waiting for every execution from here on; "
           "the timings below include those waits)\n",
           rs_status_name(st), rs_context_last_error(CTX));
    B2B_REFUSED = true;
    BAD_CHECKS++;
    add_row("api", "execute_async back to back (in-process)", "refused", "-",
            "accepted", "FAIL");
    RS(rs_plan_wait(p));
    st = rs_plan_execute_async(p, QUEUE());
  }
  if (st != RS_OK) die_rs("rs_plan_execute_async(p, QUEUE())", st, __FILE__,
                          __LINE__);
  if (HOST || B2B_REFUSED || WAIT_EACH) RS(rs_plan_wait(p));
}

/* A stream-ordered stopwatch: CUDA events on the GPU, the clock on host. */
typedef struct watch {
  cudaEvent_t a, b;
  double ta, tb;
} watch;

static void watch_init(watch *w) {
  memset(w, 0, sizeof *w);
  if (!HOST) {
    CU(cudaEventCreate(&w->a));
    CU(cudaEventCreate(&w->b));
  }
}
static void watch_start(watch *w) {
  if (!HOST) CU(cudaEventRecord(w->a, STREAM));
  w->ta = bench_now();
}
static void watch_stop(watch *w) {
  if (!HOST) CU(cudaEventRecord(w->b, STREAM));
  w->tb = bench_now();
}
/* Milliseconds between the marks, once the stream reached the second. */
static double watch_ms(watch *w) {
  if (HOST) return (w->tb - w->ta) * 1e3;
  float ms = 0;
  CU(cudaEventSynchronize(w->b));
  CU(cudaEventElapsedTime(&ms, w->a, w->b));
  return ms;
}
static void watch_free(watch *w) {
  if (!HOST) {
    CU(cudaEventDestroy(w->a));
    CU(cudaEventDestroy(w->b));
  }
}

/* Seconds per execution of `reps` back to back (after `warmups`, into a
 * freshly poisoned destination), each way of timing it. */
typedef struct b2b {
  double stream; /* on the stream (CUDA events; host clock on host) */
  double enqueue; /* host time per rs_plan_execute_async */
  double done;    /* until rs_plan_wait returned */
} b2b;

static b2b back_to_back(rs_plan *plan, void *dst, size_t dst_bytes,
                        int warmups, int reps) {
  poison(dst, dst_bytes);
  for (int k = 0; k < warmups; k++) start(plan);
  RS(rs_plan_wait(plan));
  watch w;
  watch_init(&w);
  watch_start(&w);
  for (int k = 0; k < reps; k++) start(plan);
  double t_enq = bench_now();
  watch_stop(&w);
  RS(rs_plan_wait(plan));
  double t_done = bench_now();
  b2b r = {watch_ms(&w) * 1e-3 / reps, (t_enq - w.ta) / reps,
           (t_done - w.ta) / reps};
  watch_free(&w);
  return r;
}

/* ---- (a) two layers --------------------------------------------------------- */

typedef uint16_t (*value_fn)(int t, int64_t index);

static void fill_source(uint16_t *buf, int tp, value_fn value) {
  memset(buf, 0, (size_t)SRC_TP_BYTES);
  for (int i = 0; i < NT; i++) {
    const tensor *t = &T[i];
    int64_t off[2], ext[2];
    local_box(t, tp, off, ext);
    uint16_t *p = buf + t->src_off / ESIZE;
    int64_t cols = t->shape[1];
    if (t->split <= 0) { /* whole rows: one run of global indices */
      int64_t first = off[0] * cols, n = ext[0] * cols;
      for (int64_t k = 0; k < n; k++) p[k] = value(i, first + k);
    } else {
      for (int64_t r = 0; r < ext[0]; r++) {
        uint16_t *q = p + r * ext[1];
        int64_t first = r * cols + off[1];
        for (int64_t c = 0; c < ext[1]; c++) q[c] = value(i, first + c);
      }
    }
  }
}

/* The trainer's side: every tensor in bf16, TP shard tp in source buffer tp
 * of rank 0. */
static void add_sources(rs_layout *src) {
  for (int i = 0; i < NT; i++) {
    const tensor *tn = &T[i];
    RS(rs_layout_add_tensor(src, tn->name, RS_DTYPE_BF16, tn->ndim, tn->shape));
    for (int tp = 0; tp < TP; tp++) {
      int64_t off[2], ext[2];
      local_box(tn, tp, off, ext);
      RS(rs_layout_add_shard(src, tn->name, 0, off, ext, tp, tn->src_off,
                             NULL));
    }
  }
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* Every element of every destination tensor, and every byte around them.
 * Returns wrong elements + stray bytes; prints the first few. */
static int64_t verify_layers(const unsigned char *dst, int64_t dst_bytes,
                             const char *when, int64_t *stray_out,
                             bool quiet) {
  int64_t wrong = 0, shown = 0;
  for (int i = 0; i < NT; i++) {
    const tensor *t = &T[i];
    const uint16_t *p = (const uint16_t *)(dst + t->dst_off);
    int64_t bad = 0;
    for (int64_t k = 0; k < t->numel; k++) {
      uint16_t want = value_at(i, k);
      if (p[k] != want) {
        if (shown < 8 && !quiet) {
          printf("   WRONG %s: %s [%" PRId64 ", %" PRId64 "] (in %s at byte %"
                 PRId64 "): 0x%04x, expected 0x%04x\n",
                 when, t->name, k / t->shape[1], k % t->shape[1], t->group,
                 t->dst_off + 2 * k, (unsigned)p[k], (unsigned)want);
          shown++;
        }
        bad++;
      }
    }
    if (bad && !quiet)
      printf("   %s: %" PRId64 " of %" PRId64 " elements wrong\n", t->name, bad,
             t->numel);
    wrong += bad;
  }
  /* Gaps and the tail must still hold the poison. */
  int64_t spans[2 * MAX_T], stray = 0, cursor = 0;
  for (int i = 0; i < NT; i++) {
    spans[2 * i] = T[i].dst_off;
    spans[2 * i + 1] = T[i].numel * ESIZE;
  }
  qsort(spans, (size_t)NT, 2 * sizeof(int64_t), cmp_i64);
  for (int i = 0; i <= NT; i++) {
    int64_t end = i < NT ? spans[2 * i] : dst_bytes;
    for (int64_t b = cursor; b < end; b++)
      if (dst[b] != POISON_BYTE) {
        if (stray < 4 && !quiet)
          printf("   STRAY WRITE %s: byte %" PRId64 " outside every tensor is "
                 "0x%02x\n", when, b, (unsigned)dst[b]);
        stray++;
      }
    if (i < NT) cursor = spans[2 * i] + spans[2 * i + 1];
  }
  *stray_out = stray;
  return wrong;
}

static void correctness_row(const char *cas, const char *fig, int64_t wrong,
                            int64_t total, const char *unit) {
  char m[64], t[64];
  snprintf(m, sizeof m, "%" PRId64 " wrong", wrong);
  snprintf(t, sizeof t, "0 of %" PRId64 " %s", total, unit);
  add_row(cas, fig, m, "-", t, wrong ? "FAIL" : "PASS");
  if (wrong) BAD_CHECKS++;
}

static void check_layers(const char *cas, const unsigned char *dev_dst,
                         unsigned char *host_dst, int64_t dst_bytes,
                         const char *when, const char *fig) {
  const unsigned char *view = dev_dst;
  if (!HOST) {
    d2h(host_dst, dev_dst, (size_t)dst_bytes);
    view = host_dst;
  }
  double t0 = bench_now();
  int64_t stray = 0;
  int64_t wrong = verify_layers(view, dst_bytes, when, &stray, false);
  int64_t elems = PAYLOAD / ESIZE;
  printf("   verify %s: %" PRId64 " of %" PRId64 " elements wrong, %" PRId64
         " stray bytes (%.1f s)\n",
         when, wrong, elems, stray, bench_now() - t0);
  if ((wrong || stray) && !HOST) { /* late, or wrong? */
    int64_t stray2 = 0;
    CU(cudaDeviceSynchronize());
    d2h(host_dst, dev_dst, (size_t)dst_bytes);
    int64_t wrong2 = verify_layers(view, dst_bytes, when, &stray2, true);
    printf("   the same after cudaDeviceSynchronize: %" PRId64 " wrong, %"
           PRId64 " stray bytes%s\n", wrong2, stray2,
           wrong2 || stray2 ? ""
                            : " (so rs_plan_wait returned before the copies "
                              "had landed)");
  }
  correctness_row(cas, fig, wrong, elems, "elems");
  char f2[64];
  snprintf(f2, sizeof f2, "%s: gaps+tail untouched", when);
  correctness_row(cas, f2, stray, dst_bytes - PAYLOAD, "bytes");
}

/* Returns the time of one execution (ms). */
/* (a) on the context CTX; cas names its rows. */
static double run_layers(const char *cas, int layers, int reps) {
  char m[64], b[64], t[64];
  phase("a: layouts and plan");
  printf("   %d Qwen3-32B decoder layers, %d bf16 tensors, %.3f GB; source "
         "TP=%d buffers of %.3f GB on rank 0; destination one buffer of "
         "%.3f GB (fused qkv_proj, gate_up_proj)\n",
         layers, NT, (double)PAYLOAD / 1e9, TP, (double)SRC_TP_BYTES / 1e9,
         (double)(DST_END + TAIL) / 1e9);
  double t0 = bench_now();
  rs_layout *src = NULL, *dst = NULL;
  RS(rs_layout_create(CTX, &src));
  RS(rs_layout_create(CTX, &dst));
  add_sources(src);
  for (int i = 0; i < NT; i++) {
    const tensor *tn = &T[i];
    RS(rs_layout_add_tensor(dst, tn->name, RS_DTYPE_BF16, tn->ndim, tn->shape));
    const int64_t zero[2] = {0, 0};
    RS(rs_layout_add_shard(dst, tn->name, 0, zero, tn->shape, 0, tn->dst_off,
                           NULL));
  }
  rs_plan *plan = NULL;
  RS(rs_plan_create(src, dst, &plan));
  double t_plan = bench_now() - t0;
  rs_layout_destroy(src);
  rs_layout_destroy(dst);
  int64_t rounds = 0, staging = 0, moves = 0, local = 0;
  RS(rs_plan_stat(plan, RS_ALL_RANKS, RS_STAT_ROUNDS, &rounds));
  RS(rs_plan_stat(plan, RS_ALL_RANKS, RS_STAT_STAGING_BYTES, &staging));
  RS(rs_plan_stat(plan, RS_ALL_RANKS, RS_STAT_MOVES, &moves));
  RS(rs_plan_stat(plan, RS_ALL_RANKS, RS_STAT_BYTES_LOCAL, &local));
  printf("   plan: %.1f ms; %" PRId64 " moves, %" PRId64 " round(s), %.1f MiB "
         "staging, %.3f GB copied inside the rank\n",
         t_plan * 1e3, moves, rounds, (double)staging / BENCH_MIB,
         (double)local / 1e9);
  snprintf(m, sizeof m, "%.1f ms", t_plan * 1e3);
  snprintf(b, sizeof b, "%" PRId64 " moves, %" PRId64 " rounds", moves, rounds);
  add_row(cas, "plan create (host)", m, b, "info", "-");

  phase("a: allocate, fill and bind");
  int64_t stride = align_up(SRC_TP_BYTES, (int64_t)1 << 20);
  int64_t src_all_bytes = stride * TP, dst_bytes = DST_END + TAIL;
  if (!HOST) {
    size_t free_b = 0, total_b = 0;
    CU(cudaMemGetInfo(&free_b, &total_b));
    printf("   device memory: %.1f GiB free of %.1f GiB; need %.2f GiB\n",
           (double)free_b / BENCH_GIB, (double)total_b / BENCH_GIB,
           (double)(src_all_bytes + dst_bytes) / BENCH_GIB);
    if ((double)free_b < (double)(src_all_bytes + dst_bytes) + 2.0 * BENCH_GIB)
      die("not enough free device memory for the layer check (lower --layers)");
  }
  unsigned char *src_all = dalloc((size_t)src_all_bytes);
  unsigned char *dbuf = dalloc((size_t)dst_bytes);
  uint16_t *hsrc = bench_xmalloc((size_t)SRC_TP_BYTES);
  unsigned char *hdst = HOST ? NULL : bench_xmalloc((size_t)dst_bytes);
  t0 = bench_now();
  for (int tp = 0; tp < TP; tp++) {
    fill_source(hsrc, tp, value_at);
    h2d(src_all + tp * stride, hsrc, (size_t)SRC_TP_BYTES);
    RS(rs_plan_bind_memory(plan, RS_SIDE_SRC, 0, tp, src_all + tp * stride,
                           (size_t)SRC_TP_BYTES, MEM(), MEMDEV()));
  }
  free(hsrc);
  RS(rs_plan_bind_memory(plan, RS_SIDE_DST, 0, 0, dbuf, (size_t)dst_bytes,
                         MEM(), MEMDEV()));
  printf("   filled and uploaded %.3f GB of sources in %.1f s\n",
         (double)(SRC_TP_BYTES * TP) / 1e9, bench_now() - t0);

  phase("a: first execution");
  poison(dbuf, (size_t)dst_bytes);
  t0 = bench_now();
  RS(rs_plan_execute_async(plan, QUEUE()));
  RS(rs_plan_wait(plan));
  double t_first = bench_now() - t0;
  printf("   first execution: %.2f ms (includes one-time setup)\n",
         t_first * 1e3);
  snprintf(m, sizeof m, "%.2f ms", t_first * 1e3);
  add_row(cas, "first execution incl. setup (host clock)", m, "-", "info", "-");
  if (CORRUPT) { /* one element of the 5th tensor and one gap byte */
    uint16_t bad = (uint16_t)(value_at(4, 12345) ^ 0x0100);
    unsigned char g = 0x00;
    h2d(dbuf + T[4].dst_off + 2 * 12345, &bad, sizeof bad);
    h2d(dbuf + T[4].dst_off - 1, &g, 1);
    printf("   --self-test: spoiled %s [%" PRId64 ", %" PRId64 "] and byte %"
           PRId64 "; both checks must FAIL\n", T[4].name,
           (int64_t)12345 / T[4].shape[1], (int64_t)12345 % T[4].shape[1],
           T[4].dst_off - 1);
  }
  phase("a: verify the first execution");
  check_layers(cas, dbuf, hdst, dst_bytes, "after run 1",
               "every element, run 1");

  phase("a: 2 warm-ups and timed executions");
  b2b timed = back_to_back(plan, dbuf, (size_t)dst_bytes, 2, reps);
  double ms = timed.stream * 1e3;
  double host_ms = timed.done * 1e3;
  double enq_us = timed.enqueue * 1e6;
  printf("   %d executions back to back: %.3f ms each (%s), %.3f ms each "
         "until rs_plan_wait returned; enqueue %.1f us each\n",
         reps, ms, HOST ? "host clock" : "CUDA events", host_ms, enq_us);
  char fig2[64];
  snprintf(fig2, sizeof fig2, "every element, after %d runs", reps + 3);
  phase("a: verify after the timed executions");
  check_layers(cas, dbuf, hdst, dst_bytes, "after the timed runs", fig2);

  phase("a: baseline memcpy of the same bytes");
  watch wb;
  watch_init(&wb);
  int64_t copy_bytes = PAYLOAD < src_all_bytes ? PAYLOAD : src_all_bytes;
  if (copy_bytes > dst_bytes) copy_bytes = dst_bytes;
  for (int k = 0; k < 2 + reps; k++) {
    if (k == 2) watch_start(&wb);
    if (HOST)
      memcpy(dbuf, src_all, (size_t)copy_bytes);
    else
      CU(cudaMemcpyAsync(dbuf, src_all, (size_t)copy_bytes,
                         cudaMemcpyDeviceToDevice, STREAM));
  }
  watch_stop(&wb);
  double base_ms = watch_ms(&wb) / reps;
  if (!HOST) CU(cudaStreamSynchronize(STREAM));
  double gbs = (double)PAYLOAD / (ms * 1e-3) / 1e9;
  double base_gbs = (double)copy_bytes / (base_ms * 1e-3) / 1e9;
  printf("   baseline %s of %.3f GB: %.3f ms, %.1f GB/s; reshard %.1f GB/s "
         "(%.2fx of it)\n",
         HOST ? "memcpy" : "cudaMemcpyAsync D2D", (double)copy_bytes / 1e9,
         base_ms, base_gbs, gbs, gbs / base_gbs);

  const char *bname = HOST ? "memcpy" : "memcpyAsync D2D";
  snprintf(m, sizeof m, "%.3f ms", ms);
  snprintf(b, sizeof b, "%.3f ms (%s)", base_ms, bname);
  snprintf(t, sizeof t, "%.2fx of baseline", ms / base_ms);
  snprintf(fig2, sizeof fig2, "time per execution (x%d %s)", reps,
           WAIT_EACH ? "each waited for" : "back to back");
  add_row(cas, fig2, m, b, t, "-");
  snprintf(m, sizeof m, "%.3f ms", host_ms);
  add_row(cas, "time per execution until wait returned", m, "-", "info", "-");
  snprintf(m, sizeof m, "%.1f GB/s", gbs);
  snprintf(b, sizeof b, "%.1f GB/s (%s)", base_gbs, bname);
  snprintf(t, sizeof t, "%.2fx (>= 0.50x)", gbs / base_gbs);
  add_row(cas, "bandwidth (destination bytes / time)", m, b, t,
          gbs / base_gbs >= 0.5 ? "PASS (timing)" : "FAIL (timing)");
  snprintf(m, sizeof m, "%.1f us", enq_us);
  add_row(cas, "host time per rs_plan_execute_async", m, "-", "info", "-");

  watch_free(&wb);
  rs_plan_destroy(plan);
  dfree(src_all);
  dfree(dbuf);
  free(hdst);
  return ms;
}

/* ---- (c) the same layers to fp8 ------------------------------------------- */

/* Every 2-D weight becomes f8_e4m3 with one f32 scale per 128 x 128 block
 * (RS_SCALE_AMAX), as an fp8 checkpoint is served (vLLM's
 * weight_scale_inv beside weight); the norms stay bf16. A group's scales
 * follow its values in the destination buffer. */
enum { F8_BLOCK = 128 };

typedef struct f8_tensor {
  char scale_name[112];
  int64_t dst_off, scale_off;
  int64_t scale_shape[2];
} f8_tensor;

static f8_tensor F8[MAX_T];
static int64_t F8_END;     /* end of the last destination tensor */
static int64_t F8_PAYLOAD; /* destination bytes of values and scales */

static bool is_f8(const tensor *t) { return t->ndim == 2; }

static void build_fp8(int layers) {
  int64_t off = 0;
  F8_PAYLOAD = 0;
  for (int l = 0; l < layers; l++)
    for (int g = 0; g < NGROUPS; g++) {
      off = align_up(off + GAP, ALIGN);
      for (int pass = 0; pass < 2; pass++) /* the values, then the scales */
        for (int m = 0; m < 3; m++)
          for (int i = 0; i < NT; i++) {
            const tensor *t = &T[i];
            if (t->layer != l || t->gid != g || t->member != m) continue;
            f8_tensor *f = &F8[i];
            if (pass == 0) {
              f->dst_off = off;
              off += t->numel * (is_f8(t) ? 1 : ESIZE);
              F8_PAYLOAD += t->numel * (is_f8(t) ? 1 : ESIZE);
            } else if (is_f8(t)) {
              snprintf(f->scale_name, sizeof f->scale_name, "%.96s_scale_inv",
                       t->name);
              f->scale_shape[0] = (t->shape[0] + F8_BLOCK - 1) / F8_BLOCK;
              f->scale_shape[1] = (t->shape[1] + F8_BLOCK - 1) / F8_BLOCK;
              off = align_up(off, 16);
              f->scale_off = off;
              off += f->scale_shape[0] * f->scale_shape[1] * 4;
              F8_PAYLOAD += f->scale_shape[0] * f->scale_shape[1] * 4;
            }
          }
    }
  F8_END = off;
}

/* Weight-like bf16, never NaN or infinite (one NaN makes its whole block
 * NaN): magnitudes 2^-12 to 2^-1, one value in 256 up to 2^3. */
static uint16_t weight_at(int t, int64_t index) {
  uint16_t h = value_at(t, index);
  uint32_t sel = ((uint32_t)h >> 7) & 0xffu;
  uint32_t e = sel == 0xffu ? 127u + (h & 3u) : 115u + sel % 12u;
  return (uint16_t)(((uint32_t)h & 0x8000u) | e << 7 | ((uint32_t)h & 0x7fu));
}

static rs_plan *fp8_plan(rs_context *ctx) {
  rs_layout *src = NULL, *dst = NULL;
  RS(rs_layout_create(ctx, &src));
  RS(rs_layout_create(ctx, &dst));
  add_sources(src);
  const int64_t zero[2] = {0, 0};
  for (int i = 0; i < NT; i++) {
    const tensor *t = &T[i];
    const f8_tensor *f = &F8[i];
    RS(rs_layout_add_tensor(dst, t->name,
                            is_f8(t) ? RS_DTYPE_F8_E4M3 : RS_DTYPE_BF16,
                            t->ndim, t->shape));
    RS(rs_layout_add_shard(dst, t->name, 0, zero, t->shape, 0, f->dst_off,
                           NULL));
    if (!is_f8(t)) continue;
    RS(rs_layout_add_tensor(dst, f->scale_name, RS_DTYPE_F32, 2,
                            f->scale_shape));
    RS(rs_layout_set_block_scales(dst, t->name, f->scale_name, F8_BLOCK,
                                  F8_BLOCK, RS_SCALE_AMAX));
    RS(rs_layout_add_shard(dst, f->scale_name, 0, zero, f->scale_shape, 0,
                           f->scale_off, NULL));
  }
  rs_plan *plan = NULL;
  RS(rs_plan_create(src, dst, &plan));
  rs_layout_destroy(src);
  rs_layout_destroy(dst);
  return plan;
}

/* What the host engine (core/copy/convert.c, not the CUDA kernels) makes of the
 * same sources: one execution in process on host memory. */
static unsigned char *fp8_expected(unsigned char *const hsrc[TP],
                                   int64_t dst_bytes) {
  rs_context *hctx = NULL;
  RS(rs_context_create_local(1, &hctx));
  rs_plan *plan = fp8_plan(hctx);
  unsigned char *want = bench_xmalloc((size_t)dst_bytes);
  memset(want, POISON_BYTE, (size_t)dst_bytes);
  for (int tp = 0; tp < TP; tp++)
    RS(rs_plan_bind_memory(plan, RS_SIDE_SRC, 0, tp, hsrc[tp],
                           (size_t)SRC_TP_BYTES, RS_MEMORY_HOST, -1));
  RS(rs_plan_bind_memory(plan, RS_SIDE_DST, 0, 0, want, (size_t)dst_bytes,
                         RS_MEMORY_HOST, -1));
  RS(rs_plan_execute_async(plan, NULL));
  RS(rs_plan_wait(plan));
  rs_plan_destroy(plan);
  rs_context_destroy(hctx);
  return want;
}

/* What byte b of the destination is, for messages. */
static void fp8_where(int64_t b, char *out, size_t n) {
  for (int i = 0; i < NT; i++) {
    const tensor *t = &T[i];
    const f8_tensor *f = &F8[i];
    int64_t vbytes = t->numel * (is_f8(t) ? 1 : ESIZE);
    if (b >= f->dst_off && b < f->dst_off + vbytes) {
      int64_t k = (b - f->dst_off) / (is_f8(t) ? 1 : ESIZE);
      snprintf(out, n, "%s [%" PRId64 ", %" PRId64 "]", t->name,
               k / t->shape[1], k % t->shape[1]);
      return;
    }
    int64_t sbytes = is_f8(t) ? f->scale_shape[0] * f->scale_shape[1] * 4 : 0;
    if (b >= f->scale_off && b < f->scale_off + sbytes) {
      int64_t k = (b - f->scale_off) / 4;
      snprintf(out, n, "%s [%" PRId64 ", %" PRId64 "]", f->scale_name,
               k / f->scale_shape[1], k % f->scale_shape[1]);
      return;
    }
  }
  snprintf(out, n, "outside every tensor");
}

/* Byte for byte against the host engine's result: values, scales and the
 * poison around them. Returns the bytes that differ. */
static int64_t compare_fp8(const unsigned char *dev_dst, unsigned char *got,
                           const unsigned char *want, int64_t n,
                           const char *when) {
  const unsigned char *view = dev_dst;
  if (!HOST) {
    d2h(got, dev_dst, (size_t)n);
    view = got;
  }
  int64_t bad = 0;
  for (int64_t b = 0; b < n; b++)
    if (view[b] != want[b]) {
      if (bad < 6) {
        char where[160];
        fp8_where(b, where, sizeof where);
        printf("   DIFFERS %s: byte %" PRId64 " (%s): 0x%02x, the host "
               "engine's 0x%02x\n",
               when, b, where, (unsigned)view[b], (unsigned)want[b]);
      }
      bad++;
    }
  printf("   compare %s: %" PRId64 " of %" PRId64 " bytes differ from the "
         "host engine's\n", when, bad, n);
  return bad;
}

static void run_fp8(int layers, int reps, double bf16_ms) {
  char cas[] = "c:fp8", m[64], b[64], t[64], f[64];
  phase("c: fp8 layouts and plan");
  build_fp8(layers);
  int64_t dst_bytes = F8_END + TAIL;
  double t0 = bench_now();
  rs_plan *plan = fp8_plan(CTX);
  double t_plan = bench_now() - t0;
  int64_t moves = 0;
  RS(rs_plan_stat(plan, RS_ALL_RANKS, RS_STAT_MOVES, &moves));
  printf("   the layers of a, every 2-D weight to f8_e4m3 with 128 x 128 "
         "block scales (amax / 448), norms bf16: %.3f GB of destination "
         "tensors (bf16: %.3f GB); plan %.1f ms, %" PRId64 " moves\n",
         (double)F8_PAYLOAD / 1e9, (double)PAYLOAD / 1e9, t_plan * 1e3, moves);

  phase("c: the expected bytes (the host engine, in process)");
  unsigned char *hsrc[TP];
  for (int tp = 0; tp < TP; tp++) {
    hsrc[tp] = bench_xmalloc((size_t)SRC_TP_BYTES);
    fill_source((uint16_t *)hsrc[tp], tp, weight_at);
  }
  t0 = bench_now();
  unsigned char *want = fp8_expected(hsrc, dst_bytes);
  printf("   host execution: %.2f s\n", bench_now() - t0);

  phase("c: allocate, upload and bind");
  int64_t stride = align_up(SRC_TP_BYTES, (int64_t)1 << 20);
  unsigned char *src_all = dalloc((size_t)(stride * TP));
  unsigned char *dbuf = dalloc((size_t)dst_bytes);
  unsigned char *got = HOST ? NULL : bench_xmalloc((size_t)dst_bytes);
  for (int tp = 0; tp < TP; tp++) {
    h2d(src_all + tp * stride, hsrc[tp], (size_t)SRC_TP_BYTES);
    RS(rs_plan_bind_memory(plan, RS_SIDE_SRC, 0, tp, src_all + tp * stride,
                           (size_t)SRC_TP_BYTES, MEM(), MEMDEV()));
    free(hsrc[tp]);
  }
  RS(rs_plan_bind_memory(plan, RS_SIDE_DST, 0, 0, dbuf, (size_t)dst_bytes,
                         MEM(), MEMDEV()));

  phase("c: first execution, compared");
  poison(dbuf, (size_t)dst_bytes);
  RS(rs_plan_execute_async(plan, QUEUE()));
  RS(rs_plan_wait(plan));
  if (CORRUPT) { /* one fp8 byte of q_proj: the comparison must FAIL */
    int64_t at = F8[1].dst_off + 777;
    unsigned char bad = (unsigned char)(want[at] ^ 0x01);
    h2d(dbuf + at, &bad, 1);
    printf("   --self-test: spoiled byte %" PRId64 "; the check must FAIL\n",
           at);
  }
  correctness_row(cas, "every byte = the host engine's, run 1",
                  compare_fp8(dbuf, got, want, dst_bytes, "after run 1"),
                  dst_bytes, "bytes");

  phase("c: 2 warm-ups and timed executions");
  double ms =
      back_to_back(plan, dbuf, (size_t)dst_bytes, 2, reps).stream * 1e3;
  printf("   %d executions back to back: %.3f ms each; bf16 -> bf16 (a) "
         "%.3f ms: %.2fx\n", reps, ms, bf16_ms, ms / bf16_ms);
  snprintf(f, sizeof f, "every byte after %d runs", reps + 3);
  correctness_row(cas, f,
                  compare_fp8(dbuf, got, want, dst_bytes, "after the timed "
                              "runs"),
                  dst_bytes, "bytes");
  snprintf(m, sizeof m, "%.3f ms", ms);
  snprintf(b, sizeof b, "%.3f ms (bf16 -> bf16, a)", bf16_ms);
  snprintf(t, sizeof t, "%.2fx of bf16", ms / bf16_ms);
  snprintf(f, sizeof f, "time per execution (x%d back to back)", reps);
  add_row(cas, f, m, b, t, "info");
  snprintf(m, sizeof m, "%.3f GB", (double)F8_PAYLOAD / 1e9);
  snprintf(b, sizeof b, "%.3f GB (bf16 -> bf16, a)", (double)PAYLOAD / 1e9);
  snprintf(t, sizeof t, "%.2fx", (double)F8_PAYLOAD / (double)PAYLOAD);
  add_row(cas, "destination bytes (values + scales)", m, b, t, "info");

  rs_plan_destroy(plan);
  dfree(src_all);
  dfree(dbuf);
  free(want);
  free(got);
}

/* ---- (b) fixed cost ----------------------------------------------------- */

enum { TINY_ELEMS = 2048, TINY_T = 1000 }; /* 4 KiB of bf16 */

static int64_t check_tiny(const unsigned char *dev_dst, const char *when,
                          bool again) {
  unsigned char h[2 * TINY_ELEMS * ESIZE];
  d2h(h, dev_dst, sizeof h);
  int64_t wrong = 0;
  for (int64_t b = 0; b < TINY_ELEMS * ESIZE; b++) wrong += h[b] != POISON_BYTE;
  const uint16_t *p = (const uint16_t *)(h + TINY_ELEMS * ESIZE);
  for (int64_t k = 0; k < TINY_ELEMS; k++)
    if (p[k] != value_at(TINY_T, k)) {
      if (wrong < 4 && !again)
        printf("   WRONG %s: tiny[%" PRId64 "] = 0x%04x, expected 0x%04x\n",
               when, k, (unsigned)p[k], (unsigned)value_at(TINY_T, k));
      wrong++;
    }
  printf("   verify %s%s: %" PRId64 " wrong (of %d elements + %d bytes "
         "that must keep the poison)\n", when,
         again ? " after cudaDeviceSynchronize" : "", wrong, TINY_ELEMS,
         TINY_ELEMS * ESIZE);
  if (wrong && !again && !HOST) {
    CU(cudaDeviceSynchronize());
    check_tiny(dev_dst, when, true);
  }
  return wrong;
}

static void run_tiny(int reps) {
  char cas[] = "b:4KiB", m[64], b[64], t[64], f[64];
  phase("b: tiny plan");
  const int64_t shape[1] = {TINY_ELEMS}, zero[1] = {0};
  rs_layout *src = NULL, *dst = NULL;
  RS(rs_layout_create(CTX, &src));
  RS(rs_layout_create(CTX, &dst));
  RS(rs_layout_add_tensor(src, "tiny.weight", RS_DTYPE_BF16, 1, shape));
  RS(rs_layout_add_tensor(dst, "tiny.weight", RS_DTYPE_BF16, 1, shape));
  RS(rs_layout_add_shard(src, "tiny.weight", 0, zero, shape, 0, 0, NULL));
  RS(rs_layout_add_shard(dst, "tiny.weight", 0, zero, shape, 0,
                         TINY_ELEMS * ESIZE, NULL));
  rs_plan *plan = NULL;
  RS(rs_plan_create(src, dst, &plan));
  rs_layout_destroy(src);
  rs_layout_destroy(dst);
  size_t sbytes = TINY_ELEMS * ESIZE, dbytes = 2 * sbytes;
  unsigned char *s = dalloc(sbytes), *d = dalloc(dbytes);
  uint16_t h[TINY_ELEMS];
  for (int64_t k = 0; k < TINY_ELEMS; k++) h[k] = value_at(TINY_T, k);
  h2d(s, h, sbytes);
  RS(rs_plan_bind_memory(plan, RS_SIDE_SRC, 0, 0, s, sbytes, MEM(), MEMDEV()));
  RS(rs_plan_bind_memory(plan, RS_SIDE_DST, 0, 0, d, dbytes, MEM(), MEMDEV()));

  phase("b: one execution, verified");
  poison(d, dbytes);
  RS(rs_plan_execute_async(plan, QUEUE()));
  RS(rs_plan_wait(plan));
  correctness_row(cas, "4 KiB tensor, bytes around untouched",
                  check_tiny(d, "once", false), TINY_ELEMS + sbytes, "elems+bytes");

  phase("b: latency of execute+wait");
  int lat_n = 100;
  for (int k = 0; k < 10; k++) {
    RS(rs_plan_execute_async(plan, QUEUE()));
    RS(rs_plan_wait(plan));
  }
  double t0 = bench_now();
  for (int k = 0; k < lat_n; k++) {
    RS(rs_plan_execute_async(plan, QUEUE()));
    RS(rs_plan_wait(plan));
  }
  double lat_us = (bench_now() - t0) * 1e6 / lat_n;
  printf("   execute_async + wait, one at a time: %.1f us each\n", lat_us);

  phase("b: back-to-back executions");
  b2b timed = back_to_back(plan, d, dbytes, 50, reps);
  double gpu_us = timed.stream * 1e6;
  double call_us = timed.enqueue * 1e6;
  double exec_us = timed.done * 1e6;
  printf("   %d back to back: %.2f us per call (enqueue), %.2f us per "
         "execution until the wait returned, %.2f us per execution on the "
         "stream (%s)\n",
         reps, call_us, exec_us, gpu_us, HOST ? "host clock" : "CUDA events");
  correctness_row(cas, "4 KiB tensor after the timed runs",
                  check_tiny(d, "after the timed runs", false), TINY_ELEMS + sbytes,
                  "elems+bytes");

  phase("b: baseline cudaMemcpyAsync of 4 KiB");
  for (int k = 0; k < 50; k++) {
    if (HOST) memcpy(d + sbytes, s, sbytes);
    else CU(cudaMemcpyAsync(d + sbytes, s, sbytes, cudaMemcpyDeviceToDevice,
                            STREAM));
  }
  if (!HOST) CU(cudaStreamSynchronize(STREAM));
  t0 = bench_now();
  for (int k = 0; k < reps; k++) {
    if (HOST) memcpy(d + sbytes, s, sbytes);
    else CU(cudaMemcpyAsync(d + sbytes, s, sbytes, cudaMemcpyDeviceToDevice,
                            STREAM));
  }
  double b_enq = bench_now();
  if (!HOST) CU(cudaStreamSynchronize(STREAM));
  double b_done = bench_now();
  double bcall_us = (b_enq - t0) * 1e6 / reps;
  double bexec_us = (b_done - t0) * 1e6 / reps;
  printf("   baseline: %.2f us per cudaMemcpyAsync call, %.2f us per copy "
         "until synchronized\n", bcall_us, bexec_us);

  const char *bn = HOST ? "memcpy" : "memcpyAsync";
  snprintf(m, sizeof m, "%.2f us", call_us);
  snprintf(b, sizeof b, "%.2f us (%s call)", bcall_us, bn);
  snprintf(t, sizeof t, "%.1fx of baseline", call_us / bcall_us);
  snprintf(f, sizeof f, "host time per execute_async (x%d)", reps);
  add_row(cas, f, m, b, t, "-");
  snprintf(m, sizeof m, "%.2f us", exec_us);
  snprintf(b, sizeof b, "%.2f us (%s+sync)", bexec_us, bn);
  snprintf(t, sizeof t, "< 50 us");
  snprintf(f, sizeof f, "time per execution incl. GPU (x%d)", reps);
  add_row(cas, f, m, b, t,
          exec_us < 50.0 ? "PASS (timing)" : "FAIL (timing)");
  snprintf(m, sizeof m, "%.2f us", gpu_us);
  add_row(cas, HOST ? "time per execution, loop (host clock)"
                    : "stream time per execution (CUDA events)",
          m, "-", "info", "-");
  snprintf(m, sizeof m, "%.1f us", lat_us);
  add_row(cas, "latency: execute_async + wait, one by one", m, "-", "info",
          "-");

  rs_plan_destroy(plan);
  dfree(s);
  dfree(d);
}

/* ---- main ------------------------------------------------------------------- */

static void usage(void) {
  fprintf(stderr,
          "usage: nccl_reshard [--layers N (1..16, 2)] [--reps N (10)] "
          "[--tiny-reps N (1000)] [--device D (0)] [--watchdog S (170)] "
          "[--host] [--self-test]\n");
  exit(1);
}

static long arg_long(int argc, char **argv, int *i, long lo, long hi) {
  if (*i + 1 >= argc) usage();
  char *end = NULL;
  long v = strtol(argv[++*i], &end, 10);
  if (!end || *end || v < lo || v > hi) usage();
  return v;
}

/* ---- (d) per-rank planning on a context of one process ------------------ */

/* The first way plans a and b differ (NULL: none): the fingerprint, the
 * moves, and each move's tensor, ranks, route, round and box. */
static const char *plan_difference(const rs_plan *a, const rs_plan *b) {
  static char why[128];
  uint64_t fa = 0, fb = 0;
  int64_t na = 0, nb = 0;
  RS(rs_plan_fingerprint(a, &fa));
  RS(rs_plan_fingerprint(b, &fb));
  if (fa != fb) return "fingerprints differ";
  RS(rs_plan_num_moves(a, &na));
  RS(rs_plan_num_moves(b, &nb));
  if (na != nb) {
    snprintf(why, sizeof why, "%" PRId64 " moves against %" PRId64, nb, na);
    return why;
  }
  for (int64_t i = 0; i < na; i++) {
    int ia[6], ib[6], ndim = 0;
    rs_route ra, rb;
    int64_t box[2][2][8] = {{{0}}};
    RS(rs_plan_move_info(a, i, &ia[0], &ia[1], &ia[2], &ra, &ia[3], &ia[4]));
    RS(rs_plan_move_info(b, i, &ib[0], &ib[1], &ib[2], &rb, &ib[3], &ib[4]));
    RS(rs_plan_tensor_info(a, ia[0], NULL, &ndim));
    if (ndim > 8) return "a tensor of more than 8 dimensions";
    if (memcmp(ia, ib, 5 * sizeof *ia) || ra != rb) {
      snprintf(why, sizeof why, "move %" PRId64 " differs", i);
      return why;
    }
    RS(rs_plan_move_box(a, i, box[0][0], box[0][1]));
    RS(rs_plan_move_box(b, i, box[1][0], box[1][1]));
    if (memcmp(box[0], box[1], sizeof box[0])) {
      snprintf(why, sizeof why, "move %" PRId64 "'s box differs", i);
      return why;
    }
  }
  return NULL;
}

/* A context of one rank made from a unique id, as between processes (its
 * control channel, the hello and done records of each execution), with
 * per-rank planning (RS_ROUNDS_BY_DOMAIN_PAIR, the part of its own rank):
 * the part must be the whole plan, move for move and box for box (fp8
 * layers), and (a)'s layers planned that way must land, element for
 * element. With one rank the exchange carries no told move: the
 * all-to-all of the counts (ncclAlltoAll) and the figures' allgather run,
 * the sends between pairs do not. */
static void run_per_rank(int layers, int reps) {
  const char *cas = "d:per-rank";
  phase("d: a one-rank context from a unique id");
  unsigned char id[RS_NCCL_UNIQUE_ID_BYTES];
  RS(rs_nccl_unique_id(id, sizeof id));
  rs_context *held = CTX, *ctx = NULL;
  RS(rs_context_create_nccl_id(id, sizeof id, 0, 1, DEV, &ctx));
  CTX = ctx; /* for the messages of RS() */
  RS(rs_context_set_param(ctx, RS_PARAM_ROUNDS, RS_ROUNDS_BY_DOMAIN_PAIR));
  phase("d: the whole plan, then the part its rank plans");
  rs_plan *whole = fp8_plan(ctx);
  RS(rs_context_set_param(ctx, RS_PARAM_PLAN_PART, 0));
  double t0 = bench_now();
  rs_plan *part = fp8_plan(ctx);
  double t_part = bench_now() - t0;
  const char *diff = plan_difference(whole, part);
  char m[160];
  snprintf(m, sizeof m, "%s (%.1f ms)", diff ? diff : "the same", t_part * 1e3);
  add_row(cas, "fp8 plan: the part against the whole plan", m, "-",
          "the same", diff ? "FAIL" : "PASS");
  if (diff) BAD_CHECKS++;
  rs_plan_destroy(part);
  rs_plan_destroy(whole);
  WAIT_EACH = true;
  run_layers(cas, layers, reps);
  WAIT_EACH = false;
  CTX = held;
  rs_context_destroy(ctx);
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  int layers = 2, reps = 10, tiny_reps = 1000, watchdog = 170;
  DEV = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--layers")) layers = (int)arg_long(argc, argv, &i, 1, 16);
    else if (!strcmp(argv[i], "--reps")) reps = (int)arg_long(argc, argv, &i, 1, 1000);
    else if (!strcmp(argv[i], "--tiny-reps")) tiny_reps = (int)arg_long(argc, argv, &i, 1, 1000000);
    else if (!strcmp(argv[i], "--device")) DEV = (int)arg_long(argc, argv, &i, 0, 1023);
    else if (!strcmp(argv[i], "--watchdog")) watchdog = (int)arg_long(argc, argv, &i, 0, 86400);
    else if (!strcmp(argv[i], "--host")) HOST = true;
    else if (!strcmp(argv[i], "--self-test")) CORRUPT = true;
    else usage();
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_alarm;
  sigaction(SIGALRM, &sa, NULL);
  if (watchdog > 0) alarm((unsigned)watchdog);

  bench_print_machine(HOST ? "nccl_reshard --host: CPU dry run of the GPU check"
                           : "nccl_reshard: the NCCL transport on one GPU");
  build_model(layers);

  phase("setup");
  if (!HOST) {
    int n = 0, rt = 0, drv = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n < 1 || DEV >= n) {
      printf("NO GPU: no usable CUDA device %d (%s; %d device(s) seen). "
             "Nothing to check here; run it on a machine with a GPU, or "
             "--host for a CPU dry run.\n",
             DEV, e != cudaSuccess ? cudaGetErrorString(e) : "no error", n);
      add_row("setup", "CUDA device", "none", "-", "-", "SKIP");
      print_table(77);
      return 77;
    }
    CU(cudaSetDevice(DEV));
    struct cudaDeviceProp prop;
    CU(cudaGetDeviceProperties(&prop, DEV));
    CU(cudaRuntimeGetVersion(&rt));
    CU(cudaDriverGetVersion(&drv));
    printf("gpu     : device %d of %d: %s, sm_%d%d, %d SMs, %.1f GiB; CUDA "
           "runtime %d, driver %d\n",
           DEV, n, prop.name, prop.major, prop.minor, prop.multiProcessorCount,
           (double)prop.totalGlobalMem / BENCH_GIB, rt, drv);
    CU(cudaStreamCreateWithFlags(&STREAM, cudaStreamNonBlocking));
    phase("create the NCCL context (rs_context_create_nccl_devices)");
    int devs[1] = {DEV};
    double t0 = bench_now();
    rs_status st = rs_context_create_nccl_devices(devs, 1, &CTX);
    if (st != RS_OK) {
      fprintf(stderr, "rs_context_create_nccl_devices: %s (%s): %s\n",
              rs_status_name(st), rs_status_string(st), rs_last_error());
      if (st == RS_ERR_UNSUPPORTED)
        fprintf(stderr, "(is libreshard-nccl.so.0 next to libreshard, or "
                "RESHARD_NCCL_MODULE set, and libnccl.so.2 on "
                "LD_LIBRARY_PATH?)\n");
      die("no NCCL context");
    }
    printf("   NCCL context made in %.2f s\n", bench_now() - t0);
  } else {
    RS(rs_context_create_local(1, &CTX));
  }
  rs_transport_kind kind = 0;
  int world = 0, rank = 0;
  RS(rs_context_transport(CTX, &kind));
  RS(rs_context_world_size(CTX, &world));
  RS(rs_context_rank(CTX, &rank));
  printf("context : transport %s, world %d, rank %d%s\n",
         kind == RS_TRANSPORT_NCCL   ? "nccl"
         : kind == RS_TRANSPORT_LOCAL ? "local"
                                      : "other",
         world, rank, rank == RS_ALL_RANKS ? " (all ranks in this process)" : "");
  if (kind != (HOST ? RS_TRANSPORT_LOCAL : RS_TRANSPORT_NCCL) || world != 1)
    die("the context is not what was asked for");

  double bf16_ms = run_layers("a:layers", layers, reps);
  run_fp8(layers, reps, bf16_ms);
  run_tiny(tiny_reps);
  if (HOST)
    add_row("d:per-rank", "a part planned by its rank (not in --host)",
            "-", "-", "-", "SKIP");
  else
    run_per_rank(layers, reps);

  if (!HOST && !B2B_REFUSED)
    add_row("api", "execute_async back to back (in-process)", "accepted", "-",
            "accepted", "PASS");
  phase("tear down");
  rs_context_destroy(CTX);
  CTX = NULL;
  if (!HOST) CU(cudaStreamDestroy(STREAM));
  alarm(0);
  int code = BAD_CHECKS ? 2 : 0;
  print_table(code);
  return code;
}
