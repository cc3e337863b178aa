/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libreshard: move tensors from one distributed layout straight into another.
 *
 * This is the umbrella header of the public C ABI. Everything here is an
 * opaque handle, an enum with pinned values, or a function returning
 * rs_status. See docs/ABI.md for the stability promise.
 *
 * The flow:
 *   rs_context_create_local(world, &ctx)        -- who takes part, domains
 *   rs_layout_create(ctx, &src) / (&dst)        -- who holds which boxes
 *   rs_layout_add_tensor / rs_layout_add_shard / rs_layout_add_dtensor
 *   rs_plan_create(src, dst, &plan)             -- what moves where, when
 *   rs_plan_stat / rs_plan_to_json              -- look before you leap
 *   rs_plan_bind(plan, side, rank, buffer, ptr, bytes)
 *   rs_plan_execute(plan)                       -- move the bytes
 *
 * Conventions:
 * - Every fallible call returns rs_status; results come through trailing
 *   out-parameters, which are set to 0/NULL on failure.
 * - On failure a detailed message is recorded on the context of the handle
 *   involved (rs_context_last_error) and, where no context is at hand, in a
 *   per-thread buffer (rs_last_error).
 * - Destroy functions accept NULL. Layouts and plans hold a reference on
 *   their context, so handles may be destroyed in any order. Any use of a
 *   handle after its destroy call is illegal.
 * - One context and the handles made from it may be used by one thread at a
 *   time; distinct contexts are independent.
 */
#ifndef RESHARD_H
#define RESHARD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* RS_API marks every public function. libreshard is built with hidden
 * visibility and exports what RS_API marks (with a linker version script,
 * capi/reshard.map, naming each). Define RS_API before including this
 * header to override it, as zstd's ZSTDLIB_API allows: for example
 * -DRS_API= when building libreshard statically into a shared library of
 * your own that must not re-export the rs_* symbols (docs/ABI.md). */
#ifndef RS_API
#  if defined(_WIN32)
#    define RS_API
#  elif defined(__GNUC__) && __GNUC__ >= 4
#    define RS_API __attribute__((visibility("default")))
#  else
#    define RS_API
#  endif
#endif

/* ------------------------------------------------------------------------ */
/* Version                                                                  */
/* ------------------------------------------------------------------------ */

#define RS_VERSION_MAJOR 0
#define RS_VERSION_MINOR 6
#define RS_VERSION_PATCH 0
/* The three lines above are the one place the version is written: the
 * build (CMakeLists.txt) reads them, so they must stay one plain number
 * each. */
/** major*10000 + minor*100 + patch, e.g. 0.2.0 -> 200. */
#define RS_VERSION_NUMBER \
  (RS_VERSION_MAJOR * 10000 + RS_VERSION_MINOR * 100 + RS_VERSION_PATCH)

/** Runtime twin of RS_VERSION_NUMBER (of the loaded library). @since 0.1 */
RS_API unsigned rs_version_number(void);
/** Major version of the loaded library. @since 0.1 */
RS_API unsigned rs_version_major(void);
/** Minor version of the loaded library. @since 0.1 */
RS_API unsigned rs_version_minor(void);
/** Patch version of the loaded library. @since 0.1 */
RS_API unsigned rs_version_patch(void);
/** "MAJOR.MINOR.PATCH" of the loaded library; static storage. @since 0.1 */
RS_API const char *rs_version_string(void);

/* ------------------------------------------------------------------------ */
/* Status                                                                   */
/* ------------------------------------------------------------------------ */

/**
 * Status codes. Values are pinned and never renumbered; new codes are added
 * inside their range. 1xx: the caller's arguments; 2xx: the layouts do not
 * fit together; 3xx: supported-feature limits; 4xx: resources; 5xx: the
 * transport and the other ranks; 9xx: bugs in libreshard.
 */
typedef enum rs_status {
  RS_OK = 0,

  RS_ERR_INVALID_ARGUMENT = 100, /**< a value out of its allowed range */
  RS_ERR_NULL_POINTER = 101,     /**< a required pointer was NULL */
  RS_ERR_BAD_SHAPE = 102,        /**< zero/negative size, or bad ndim */
  RS_ERR_TOO_MANY_DIMS = 103,    /**< more than RS_MAX_DIMS dimensions */
  RS_ERR_OUT_OF_BOUNDS = 104,    /**< a box reaches outside its tensor */
  RS_ERR_OVERFLOW = 105,         /**< a size or offset overflows int64 */
  RS_ERR_OVERLAP = 106,          /**< memory written twice / self-overlap */
  RS_ERR_DUPLICATE_NAME = 107,   /**< a tensor name given twice */
  RS_ERR_UNKNOWN_TENSOR = 108,   /**< a name no tensor has */
  RS_ERR_UNKNOWN_RANK = 109,     /**< rank outside [0, world size) */
  RS_ERR_UNKNOWN_BUFFER = 110,   /**< buffer index not used, or not bound */
  RS_ERR_BUFFER_TOO_SMALL = 111, /**< bound buffer smaller than its shards */
  RS_ERR_BAD_PARAM = 112,        /**< unknown parameter or value */
  RS_ERR_WRONG_CONTEXT = 113,    /**< handles from different contexts */
  RS_ERR_WRONG_MEMORY = 114,     /**< a buffer in memory of another kind
                                      than the context moves (@since 0.2) */

  RS_ERR_INCOMPATIBLE = 200,     /**< names, shapes differ between layouts */
  RS_ERR_NOT_COVERED = 201,      /**< a destination element has no source */

  RS_ERR_UNSUPPORTED = 300,      /**< valid, but not supported (yet) */

  RS_ERR_NO_MEMORY = 400,        /**< an allocation failed */

  RS_ERR_TRANSPORT = 500,        /**< the transport engine reported an error */
  RS_ERR_TIMEOUT = 501,          /**< a peer did not answer in time */
  RS_ERR_MISMATCH = 502,         /**< ranks disagree on layouts or plan */
  RS_ERR_CORRUPT = 503,          /**< received bytes failed their check */

  RS_ERR_INTERNAL = 900          /**< a bug in libreshard; please report */
} rs_status;

/**
 * Short, static description of a status ("box outside its tensor").
 * Never NULL; unknown values give "unknown status". @since 0.1
 */
RS_API const char *rs_status_string(rs_status status);
/** The enumerator's name ("RS_ERR_OUT_OF_BOUNDS"); never NULL. @since 0.1 */
RS_API const char *rs_status_name(rs_status status);

/**
 * Detail of the last failure on this thread that had no context to record
 * into (for example a NULL handle, or a failed rs_context_create_local).
 * Never NULL; "" when there was none. Valid until the next failing call on
 * this thread. @since 0.1
 */
RS_API const char *rs_last_error(void);

/* ------------------------------------------------------------------------ */
/* Data types                                                               */
/* ------------------------------------------------------------------------ */

/** Element types. Pinned values. @since 0.1 */
typedef enum rs_dtype {
  RS_DTYPE_U8 = 1,
  RS_DTYPE_I8 = 2,
  RS_DTYPE_U16 = 3,
  RS_DTYPE_I16 = 4,
  RS_DTYPE_U32 = 5,
  RS_DTYPE_I32 = 6,
  RS_DTYPE_U64 = 7,
  RS_DTYPE_I64 = 8,
  RS_DTYPE_F16 = 9,
  RS_DTYPE_BF16 = 10,
  RS_DTYPE_F32 = 11,
  RS_DTYPE_F64 = 12,
  RS_DTYPE_F8_E4M3 = 13,
  RS_DTYPE_F8_E5M2 = 14,
  RS_DTYPE_BOOL = 15
} rs_dtype;

/** Size of one element in bytes; 0 for an unknown dtype. @since 0.1 */
RS_API size_t rs_dtype_size(rs_dtype dtype);
/** Lower-case name ("bf16"); "unknown" for an unknown dtype. @since 0.1 */
RS_API const char *rs_dtype_name(rs_dtype dtype);

/** Largest number of tensor dimensions a layout accepts. */
#define RS_MAX_DIMS 16
/** Buffer indices of a rank run from 0 to RS_MAX_BUFFERS - 1. */
#define RS_MAX_BUFFERS 65536

/* ------------------------------------------------------------------------ */
/* Handles                                                                  */
/* ------------------------------------------------------------------------ */

/** Who takes part (world size, domains), settings, transport. */
typedef struct rs_context rs_context;
/** Which rank holds which boxes of which tensors, and where in memory. */
typedef struct rs_layout rs_layout;
/** What moves from where to where, in which round. Self-contained. */
typedef struct rs_plan rs_plan;

/* ------------------------------------------------------------------------ */
/* Context                                                                  */
/* ------------------------------------------------------------------------ */

/** Transports a context can drive. Pinned values. @since 0.1 */
typedef enum rs_transport_kind {
  RS_TRANSPORT_LOCAL = 1, /**< every rank lives in the calling process */
  RS_TRANSPORT_MPI = 2,   /**< one rank per MPI process (reshard_mpi.h) */
  RS_TRANSPORT_NCCL = 3   /**< one GPU per rank (reshard_nccl.h) */
} rs_transport_kind;

/** rs_context_rank() of a context that drives every rank itself. */
#define RS_ALL_RANKS (-1)

/**
 * Create a context whose @p world_size ranks all live in the calling
 * process (the in-process transport). Every rank starts in its own domain.
 * The caller owns *out and frees it with rs_context_destroy().
 * Errors: RS_ERR_NULL_POINTER, RS_ERR_INVALID_ARGUMENT (world_size < 1 or
 * above 1<<24), RS_ERR_NO_MEMORY. Details in rs_last_error(). @since 0.1
 */
RS_API rs_status rs_context_create_local(int world_size, rs_context **out);

/**
 * Drop the caller's reference. The context is freed once no layout or plan
 * made from it remains. NULL does nothing. @since 0.1
 */
RS_API void rs_context_destroy(rs_context *ctx);

/**
 * Detail of the last failure recorded on @p ctx: what was wrong, with the
 * offending values. Never NULL; "" when none; rs_last_error() text when ctx
 * is NULL. Valid until the next failing call on the context. @since 0.1
 */
RS_API const char *rs_context_last_error(const rs_context *ctx);

/** Number of ranks. Errors: RS_ERR_NULL_POINTER. @since 0.1 */
RS_API rs_status rs_context_world_size(const rs_context *ctx, int *out);
/** This process's rank, or RS_ALL_RANKS for the in-process transport.
 *  Errors: RS_ERR_NULL_POINTER. @since 0.1 */
RS_API rs_status rs_context_rank(const rs_context *ctx, int *out);
/** The transport this context drives. Errors: RS_ERR_NULL_POINTER.
 *  @since 0.1 */
RS_API rs_status rs_context_transport(const rs_context *ctx,
                                      rs_transport_kind *out);

/**
 * Put @p rank in domain @p domain (any integer >= 0 naming a set of ranks
 * with a fast local fabric between them: an NVLink domain, or one host).
 * Plans made afterwards use it; existing plans keep what they saw.
 * Errors: RS_ERR_NULL_POINTER, RS_ERR_UNKNOWN_RANK, RS_ERR_INVALID_ARGUMENT
 * (domain < 0). @since 0.1
 */
RS_API rs_status rs_context_set_domain(rs_context *ctx, int rank, int domain);
/** Domain of @p rank. Errors: RS_ERR_NULL_POINTER, RS_ERR_UNKNOWN_RANK.
 *  @since 0.1 */
RS_API rs_status rs_context_get_domain(const rs_context *ctx, int rank,
                                       int *domain);
/**
 * Group consecutive ranks into domains of @p ranks_per_domain (rank r goes
 * to domain r / ranks_per_domain), as launchers place ranks on nodes.
 * Errors: RS_ERR_NULL_POINTER, RS_ERR_INVALID_ARGUMENT (< 1). @since 0.1
 */
RS_API rs_status rs_context_set_domain_size(rs_context *ctx,
                                            int ranks_per_domain);

/**
 * Settings, zstd style: enum values grouped by hundreds, each with bounds
 * (rs_param_bounds) and a default. Pinned values. @since 0.1
 */
typedef enum rs_param {
  /** Staging memory a rank may use for one execution, in bytes.
   *  Default 256 MiB; bounds [64 KiB, 1 TiB]. Read by rs_plan_create,
   *  which fills each round to at most half of it, so that the executor
   *  can pack round k+1 while round k is in flight. What a rank really
   *  allocates (at its first execution, kept by the plan) is
   *  RS_STAT_STAGING_BYTES, never more than this. */
  RS_PARAM_STAGING_BYTES = 100,
  /** Deprecated since 0.2, no effect: every transport moves each piece
   *  of a round whole (a large contiguous piece straight from and into
   *  user memory), and RS_PARAM_STAGING_BYTES alone bounds memory. Still
   *  accepted and stored, with its old bounds [4 KiB, 1 GiB] and default
   *  4 MiB, so that programs written for 0.1 run unchanged. */
  RS_PARAM_SLICE_BYTES = 101,
  /** Threads that copy host memory during an execution: a batch of
   *  copies of at least 1 MiB is cut into this many parts of about equal
   *  bytes. 1 (the default): the calling thread alone; 0: one per CPU
   *  this process may run on. Bounds [0, 256]. Read at every batch, not
   *  by rs_plan_create (ranks may differ); no effect on device memory.
   *  When it pays, and fork(): docs/ABI.md, "Settings and figures in
   *  full". @since 0.5 */
  RS_PARAM_COPY_THREADS = 102,
  /** 1: on a host context (in process, MPI) rs_plan_execute_async hands
   *  the execution to a progress thread of the context and returns, so
   *  that it goes on while the caller does other work; rs_plan_test then
   *  only looks whether it ended, and rs_plan_wait blocks until it did.
   *  0 (the default): the execution advances inside rs_plan_test and
   *  rs_plan_wait only. Bounds [0, 1]. Read by rs_plan_execute_async;
   *  rs_plan_execute runs on the calling thread either way. The thread is
   *  started by the first execution handed to it (RS_ERR_NO_MEMORY when it
   *  cannot be) and joined when the context is destroyed. While the
   *  thread runs an execution, the caller may call, on that context and
   *  the handles made from it, only rs_plan_test, rs_plan_wait and
   *  rs_plan_destroy on that plan (destroy waits first),
   *  rs_context_last_error, and rs_context_abort; rs_plan_execute,
   *  rs_plan_execute_async, rs_plan_bind and rs_context_set_param are
   *  refused (RS_ERR_INVALID_ARGUMENT), anything else is illegal until
   *  the caller saw it end. Errors of rs_context_set_param for 1:
   *  RS_ERR_UNSUPPORTED on NCCL contexts (their work is already
   *  asynchronous on the stream) and on MPI contexts where MPI was not
   *  initialised with MPI_THREAD_MULTIPLE (MPI_Init_thread; the message
   *  names the level). docs/ABI.md, "Settings and figures in full".
   *  @since 0.6 */
  RS_PARAM_PROGRESS_THREAD = 103,
  /** How long to wait for a peer before RS_ERR_TIMEOUT, in milliseconds.
   *  Default 60000, or RESHARD_TIMEOUT_MS where it is set within the
   *  bounds (since 0.5; docs/ABI.md); bounds [1, 86400000]. After a
   *  timeout the context is done (see rs_plan_execute). How waits end:
   *  docs/RELIABILITY.md, "Bounded waits". */
  RS_PARAM_TIMEOUT_MS = 200,
  /** 1: every message between processes carries an XXH3-64 checksum that
   *  the receiver verifies; a mismatch gives RS_ERR_CORRUPT. 0: off.
   *  Default 0; bounds [0, 1]. Read by rs_plan_create (all ranks must
   *  agree). Not on NCCL contexts (RS_ERR_UNSUPPORTED): device memory is
   *  not checksummed. @since 0.1 */
  RS_PARAM_INTEGRITY = 201,
  /** Which part of a plan rs_plan_create keeps: -1 (the default) the
   *  whole plan; a rank r >= 0 only the whole plan's moves with r at
   *  either end, in the same order. Bounds [-1, 2^31 - 1]. In a context
   *  that drives one rank (MPI, NCCL) r must be that rank; in process a
   *  part is for inspection only. Not part of the fingerprint. What a part
   *  describes, and per-rank planning: docs/ABI.md, "Settings and figures
   *  in full". @since 0.5 */
  RS_PARAM_PLAN_PART = 300,
  /** Whether rs_plan_create keeps the box of every move. 1 (the
   *  default): it does, and the plan can run. 0: it keeps none, for a plan
   *  to inspect or price, not to run: all else is as with boxes, bit for
   *  bit; rs_plan_move_box and rs_plan_execute give RS_ERR_UNSUPPORTED.
   *  Bounds [0, 1]; not part of the fingerprint. docs/ABI.md, "Settings
   *  and figures in full". @since 0.5 */
  RS_PARAM_PLAN_BOXES = 301,
  /** How rs_plan_create cuts the plan into rounds: an rs_rounds.
   *  RS_ROUNDS_PACKED (0, the default) or RS_ROUNDS_BY_DOMAIN_PAIR (1).
   *  Bounds [0, 1]. Read by rs_plan_create; part of the fingerprint (all
   *  ranks must agree). @since 0.5 */
  RS_PARAM_ROUNDS = 302
} rs_param;

/**
 * Values of RS_PARAM_ROUNDS: who decides the round a message runs in.
 * Both move the same bytes between the same ranks, and both fit every
 * round to RS_PARAM_STAGING_BYTES. @since 0.5
 */
typedef enum rs_rounds {
  /** Rounds packed over the whole job at once: each fills every rank's
   *  half of the staging as far as it can, mixing many peers. A
   *  message's round depends on every other rank's traffic. */
  RS_ROUNDS_PACKED = 0,
  /** A round is a label (relay depth, chunk, domain offset) that the two
   *  domains a message runs between decide from their own traffic, so
   *  that a rank can plan its own part (per-rank planning, see
   *  rs_plan_create). rs_plan_create refuses it (RS_ERR_UNSUPPORTED) where
   *  a label cannot hold the plan. The rule, its cost and its limits:
   *  docs/ABI.md, "Settings and figures in full", and docs/PLANNING.md. */
  RS_ROUNDS_BY_DOMAIN_PAIR = 1
} rs_rounds;

/**
 * Set a parameter. Errors: RS_ERR_NULL_POINTER, RS_ERR_BAD_PARAM (unknown
 * parameter, or value outside rs_param_bounds; the setting is unchanged),
 * RS_ERR_UNSUPPORTED (RS_PARAM_INTEGRITY on a transport that cannot
 * checksum: NCCL; RS_PARAM_PROGRESS_THREAD = 1 on a context that cannot
 * have one, since 0.6), RS_ERR_INVALID_ARGUMENT (an execution runs on
 * the context's progress thread, since 0.6). @since 0.1
 */
RS_API rs_status rs_context_set_param(rs_context *ctx, rs_param param,
                                      int64_t value);
/** Read a parameter. Errors: RS_ERR_NULL_POINTER, RS_ERR_BAD_PARAM.
 *  @since 0.1 */
RS_API rs_status rs_context_get_param(const rs_context *ctx, rs_param param,
                                      int64_t *value);
/** Allowed range [lo, hi] of a parameter. Errors: RS_ERR_NULL_POINTER,
 *  RS_ERR_BAD_PARAM. @since 0.1 */
RS_API rs_status rs_param_bounds(rs_param param, int64_t *lo, int64_t *hi);

/* ------------------------------------------------------------------------ */
/* Layout                                                                   */
/* ------------------------------------------------------------------------ */

/**
 * Create an empty layout on @p ctx. It holds a reference on the context.
 * Free with rs_layout_destroy(). Errors: RS_ERR_NULL_POINTER,
 * RS_ERR_NO_MEMORY. @since 0.1
 */
RS_API rs_status rs_layout_create(rs_context *ctx, rs_layout **out);
/** Free a layout; plans made from it stay valid. NULL does nothing.
 *  @since 0.1 */
RS_API void rs_layout_destroy(rs_layout *layout);

/**
 * Declare a logical tensor: a unique non-empty @p name (copied), a dtype and
 * a shape of @p ndim (1..RS_MAX_DIMS) sizes, each >= 1. The name must be
 * well-formed UTF-8 (RFC 3629: shortest forms, no surrogates, nothing above
 * U+10FFFF) without ASCII control bytes (below 0x20, and 0x7f), so that it
 * appears as it is in rs_plan_to_json and in error messages. Looking a name
 * up takes about the same time however the names were chosen.
 * Errors: RS_ERR_NULL_POINTER, RS_ERR_DUPLICATE_NAME, RS_ERR_TOO_MANY_DIMS,
 * RS_ERR_BAD_SHAPE, RS_ERR_INVALID_ARGUMENT (unknown dtype, empty name, a
 * name that is not UTF-8 or holds a control byte: the message gives the
 * byte offset of the first bad byte), RS_ERR_OVERFLOW (total bytes above
 * INT64_MAX), RS_ERR_NO_MEMORY. @since 0.1
 */
RS_API rs_status rs_layout_add_tensor(rs_layout *layout, const char *name,
                                      rs_dtype dtype, int ndim,
                                      const int64_t *shape);

/**
 * Say that @p rank holds the box [offset, offset+extent) of tensor @p name,
 * stored in its local buffer number @p buffer (0..RS_MAX_BUFFERS-1; you
 * bind the memory of each (rank, buffer) to a plan later) starting
 * @p byte_offset bytes in, with element @p strides per dimension (NULL:
 * dense row-major). A rank may hold several boxes of one tensor, and one
 * buffer may hold shards of several tensors (a fused qkv_proj is three
 * shards in one buffer). Strides must be >= 1 and must not make the shard
 * overlap itself (checked with a sufficient rule: sorted by size, each
 * stride steps past all that the smaller ones reach).
 * Errors: RS_ERR_NULL_POINTER, RS_ERR_UNKNOWN_TENSOR, RS_ERR_UNKNOWN_RANK,
 * RS_ERR_UNKNOWN_BUFFER (buffer outside 0..RS_MAX_BUFFERS-1),
 * RS_ERR_BAD_SHAPE (extent < 1), RS_ERR_OUT_OF_BOUNDS, RS_ERR_OVERFLOW,
 * RS_ERR_OVERLAP, RS_ERR_INVALID_ARGUMENT (negative byte_offset, stride
 * < 1), RS_ERR_NO_MEMORY. @since 0.1
 */
RS_API rs_status rs_layout_add_shard(rs_layout *layout, const char *name,
                                     int rank, const int64_t *offset,
                                     const int64_t *extent, int buffer,
                                     int64_t byte_offset,
                                     const int64_t *strides);

/** Placement of a mesh axis that replicates the tensor (DTensor Replicate). */
#define RS_REPLICATE (-1)

/**
 * Add the shards of tensor @p name laid out DTensor style: a device mesh of
 * @p mesh_ndim axes with sizes @p mesh_shape, whose ranks in row-major mesh
 * order are @p mesh_ranks (product of mesh_shape entries), and one placement
 * per mesh axis: RS_REPLICATE or a tensor dimension d (Shard(d)). Uneven
 * sizes follow torch.chunk: chunk = ceil(size / n), trailing shards may be
 * short or empty (empty shards are skipped). Several axes sharding the same
 * dim nest left to right, as DTensor does. Each rank's local shard is dense
 * row-major in its buffer @p buffer at @p byte_offset. (torch's
 * _StridedShard: rs_layout_add_dtensor_strided, since 0.6.)
 * Errors: as rs_layout_add_shard, plus RS_ERR_INVALID_ARGUMENT (placement
 * not a dim of the tensor, mesh axis < 1, duplicate rank in the mesh,
 * mesh_ndim outside 1..RS_MAX_DIMS, more ranks in the mesh or one of its
 * axes than in the world). @since 0.1
 */
RS_API rs_status rs_layout_add_dtensor(rs_layout *layout, const char *name,
                                       int mesh_ndim,
                                       const int64_t *mesh_shape,
                                       const int *mesh_ranks,
                                       const int *placements, int buffer,
                                       int64_t byte_offset);

/**
 * The box a DTensor placement gives the mesh coordinate @p coord (mesh_ndim
 * entries) of a tensor of shape @p shape: offset and extent, ndim entries
 * each, written by the caller-provided arrays. An empty shard has extent 0
 * in the sharded dim. On failure both arrays (those not NULL) are all
 * zero, whichever check failed; with ndim outside 1..RS_MAX_DIMS their
 * length is unknown and they are left alone.
 * Errors: RS_ERR_NULL_POINTER, RS_ERR_BAD_SHAPE, RS_ERR_TOO_MANY_DIMS,
 * RS_ERR_INVALID_ARGUMENT (coordinate outside the mesh, bad placement, a
 * mesh axis < 1, mesh_ndim outside 1..RS_MAX_DIMS). Details in
 * rs_last_error(). @since 0.1
 */
RS_API rs_status rs_dtensor_local_box(int ndim, const int64_t *shape,
                                      int mesh_ndim,
                                      const int64_t *mesh_shape,
                                      const int *placements,
                                      const int64_t *coord, int64_t *offset,
                                      int64_t *extent);

/**
 * Which memory order a tensor with StridedShard placements was made in
 * (rs_layout_add_dtensor_strided, rs_dtensor_local_boxes). The two keep
 * the same elements on every coordinate where the sizes along the strided
 * dims divide evenly, and different ones where they do not. Pinned
 * values. @since 0.6
 */
typedef enum rs_strided_order {
  /** Either, where the two orders agree; refused where they do not (or
   *  where the FSDP2 order does not apply). */
  RS_STRIDED_AUTO = 0,
  /** distribute_tensor's: the placements apply left to right over the
   *  mesh axes; a StridedShard(d, f) axis cuts dim d into f pieces,
   *  each piece into as many chunks as the axis has coordinates, and
   *  coordinate i holds chunk i of every piece. */
  RS_STRIDED_DISTRIBUTE = 1,
  /** FSDP2 over TP's (fully_shard): each StridedShard(d, f) axis chunks
   *  what the later Shard(d) axes, whose sizes multiply to f, left. */
  RS_STRIDED_FSDP2 = 2
} rs_strided_order;

/**
 * rs_layout_add_dtensor with torch's _StridedShard (what FSDP2 over TP
 * stores): for every rank of the mesh, the elements of tensor @p name its
 * mesh coordinate holds. @p split_factors (NULL: all 1) has one entry per
 * mesh axis; an entry f > 1 makes that axis's Shard(d) placement a
 * StridedShard(d, f), an entry 1 leaves it as it is. @p order says which
 * memory order the tensor was made in (rs_strided_order); it matters only
 * with a StridedShard. Each rank's local tensor is dense row-major at
 * @p byte_offset of its buffer @p buffer; where its elements are several
 * boxes of the tensor (rs_dtensor_local_boxes), each is added as a shard
 * of that buffer with the local tensor's row-major strides at its own
 * byte offset; where they are one box, it is added dense (no strides).
 * Ranks with an empty shard get none. All or nothing: on failure the
 * layout is as it was.
 * Errors: as rs_layout_add_dtensor, plus RS_ERR_INVALID_ARGUMENT (a split
 * factor < 1, or > 1 on a Replicate axis; an unknown order; RS_STRIDED_AUTO
 * where the two orders keep different elements on some coordinate, or
 * where the FSDP2 order does not apply: the message names the tensor and
 * both orders), RS_ERR_UNSUPPORTED (RS_STRIDED_FSDP2 where a StridedShard
 * axis's split factor is not the product of the sizes of later Shard axes
 * of its dim; a coordinate holding more than 2^20 boxes, or a dim cut into
 * more than 2^20 pieces; RS_STRIDED_AUTO checking a mesh whose axes over
 * strided dims hold more than 2^20 coordinates). @since 0.6
 */
RS_API rs_status rs_layout_add_dtensor_strided(
    rs_layout *layout, const char *name, int mesh_ndim,
    const int64_t *mesh_shape, const int *mesh_ranks, const int *placements,
    const int *split_factors, rs_strided_order order, int buffer,
    int64_t byte_offset);

/**
 * What the mesh coordinate @p coord (mesh_ndim entries) holds of a tensor
 * of shape @p shape (ndim entries) under @p placements, @p split_factors
 * (NULL: all 1) and @p order, as rs_layout_add_dtensor_strided reads them:
 * its dense local shape into @p local_shape (ndim entries), and its boxes
 * of the tensor, row-major over the dims' runs: box i's global offset,
 * extent and position in the local tensor at [i*ndim, (i+1)*ndim) of
 * @p offsets, @p extents and @p local_offsets. Plain placements give one
 * box, a StridedShard possibly several; an empty shard none (a 0 in
 * local_shape). *@p num_boxes is always set to the number of boxes the
 * coordinate holds (0 where a failure leaves it unknown). With
 * @p max_boxes 0 the call only counts: it writes local_shape and
 * *num_boxes, and the three box arrays may be NULL. The output arrays are
 * untouched on any failure.
 * Errors: RS_ERR_NULL_POINTER (shape, mesh_shape, placements, coord,
 * local_shape, num_boxes; the box arrays when max_boxes > 0),
 * RS_ERR_BAD_SHAPE, RS_ERR_TOO_MANY_DIMS, RS_ERR_INVALID_ARGUMENT (as
 * rs_dtensor_local_box; a split factor < 1 or > 1 on a Replicate axis; an
 * unknown order; RS_STRIDED_AUTO where the orders disagree on some
 * coordinate of the mesh; max_boxes < 0, or 0 < max_boxes < the boxes
 * needed: the message gives both numbers), RS_ERR_UNSUPPORTED (as
 * rs_layout_add_dtensor_strided). Details in rs_last_error(). @since 0.6
 */
RS_API rs_status rs_dtensor_local_boxes(
    int ndim, const int64_t *shape, int mesh_ndim, const int64_t *mesh_shape,
    const int *placements, const int *split_factors, rs_strided_order order,
    const int64_t *coord, int64_t *local_shape, int max_boxes, int *num_boxes,
    int64_t *offsets, int64_t *extents, int64_t *local_offsets);

/* ------------------------------------------------------------------------ */
/* Changing dtype on the way                                                */
/* ------------------------------------------------------------------------ */

/*
 * A destination tensor may have another dtype than its source; the plan
 * converts on the way, where it makes the fewest bytes travel.
 *
 * Plain casts, declared by giving the destination tensor another dtype:
 * between f32, bf16 and f16 in any direction, each element rounded to
 * nearest, ties to even; out of range becomes infinity as IEEE does; a NaN
 * stays a NaN. The sender converts when the destination dtype is the
 * narrower, the receiver otherwise.
 *
 * Block-scaled fp8: a destination tensor in RS_DTYPE_F8_E4M3 (OCP E4M3FN,
 * largest 448) from a f32, bf16 or f16 source, with a companion f32 scale
 * tensor declared by rs_layout_set_block_scales. Where one source rank
 * holds every block of a piece whole, it converts before sending (1 byte
 * an element on the wire, and 4 per block for the scales); where blocks
 * are split across source shards, their parts travel in the source dtype
 * and the receiver converts once the block has arrived.
 *
 * Any other pair gives RS_ERR_UNSUPPORTED from rs_plan_create.
 */

/** How the scale of a block is chosen (rs_layout_set_block_scales).
 *  Pinned values. @since 0.4 */
typedef enum rs_scale_rule {
  RS_SCALE_AMAX = 1, /**< scale = amax / 448 */
  RS_SCALE_UE8M0 = 2 /**< scale = 2^ceil(log2(amax / 448)), a power of two
                          (the "UE8M0" scales engines use on Blackwell) */
} rs_scale_rule;

/**
 * Declare that tensor @p values (RS_DTYPE_F8_E4M3) is quantized in blocks
 * of @p block_rows x @p block_cols elements over its last two dims (a 1-D
 * tensor: blocks of @p block_cols, with @p block_rows 1; leading dims are
 * independent; a block at an edge holds what is there), with one f32
 * scale per block in tensor @p scales, whose shape is the values' with the
 * last two dims divided by the block, rounded up. Both tensors must be
 * declared first; the scales are placed with shards like any tensor
 * (vLLM keeps weight_scale_inv beside weight) and are not in the source
 * layout. Declare it in the destination layout. The rule, per block, over
 * the block's source values taken to f32 exactly:
 *
 *     amax  = max |x|               (a NaN in the block makes it NaN)
 *     scale = amax / 448            (RS_SCALE_AMAX)
 *             2^ceil(log2(amax/448)) (RS_SCALE_UE8M0); 1 when amax is 0
 *     value = saturate(round_nearest_even(x / scale)) to +-448,
 *             x / scale an f32 division
 *
 * and a reader takes value * scale. (A NaN amax gives a NaN scale and an
 * all-NaN block; an amax / 448 that underflows to 0 gives the smallest
 * positive f32; UE8M0 scales are at least 2^-127, the format's smallest.)
 * rs_plan_create then needs every
 * destination shard of @p values to hold whole blocks, and the ranks of a
 * block to hold its values and its scale together: a rank holding a
 * block's scale in a destination shard holds that block's values in one
 * too, and a rank holding a block's values holds its scale
 * (RS_ERR_UNSUPPORTED names the tensor and block). Travels with
 * rs_layout_serialize and rs_layout_allgather. Declaring the same thing
 * again is a no-op.
 * Errors: RS_ERR_NULL_POINTER, RS_ERR_UNKNOWN_TENSOR, RS_ERR_INVALID_ARGUMENT
 * (values not f8_e4m3, scales not f32 or of another shape, block size < 1,
 * unknown rule, a tensor already in another declaration). @since 0.4
 */
RS_API rs_status rs_layout_set_block_scales(rs_layout *layout,
                                            const char *values,
                                            const char *scales,
                                            int64_t block_rows,
                                            int64_t block_cols,
                                            rs_scale_rule rule);

/** Number of tensors declared. Errors: RS_ERR_NULL_POINTER. @since 0.1 */
RS_API rs_status rs_layout_num_tensors(const rs_layout *layout, int *out);
/** Number of shards added. Errors: RS_ERR_NULL_POINTER. @since 0.1 */
RS_API rs_status rs_layout_num_shards(const rs_layout *layout, int64_t *out);

/**
 * Encode every tensor and shard of @p layout in libreshard's layout wire
 * format (versioned, little-endian, with a checksum), to exchange layouts
 * over a channel of your own (torch.distributed, a file). *bytes is owned
 * by the caller and freed with rs_free(); *length gets its size.
 * Errors: RS_ERR_NULL_POINTER, RS_ERR_NO_MEMORY. @since 0.1
 */
RS_API rs_status rs_layout_serialize(const rs_layout *layout, void **bytes,
                                     size_t *length);

/**
 * Decode @p length bytes made by rs_layout_serialize and add what they hold
 * to @p layout: tensors it does not have are declared as by
 * rs_layout_add_tensor (the same rules for names), tensors it has must
 * agree in dtype and shape, and every shard is validated as by
 * rs_layout_add_shard. On any failure the layout is unchanged. The work is
 * proportional to @p length, not to what @p layout already holds, so a
 * layout may be assembled from many pieces, one call each.
 * Errors: RS_ERR_NULL_POINTER, RS_ERR_CORRUPT (malformed, truncated or
 * checksum-failing bytes, or another wire version), RS_ERR_MISMATCH (a
 * tensor declared differently, or a block-scale declaration that
 * conflicts with the layout's), every status of rs_layout_add_tensor
 * (RS_ERR_INVALID_ARGUMENT for a bad name, RS_ERR_TOO_MANY_DIMS, ...) and
 * every status of rs_layout_add_shard.
 * @since 0.1
 */
RS_API rs_status rs_layout_deserialize(rs_layout *layout, const void *bytes,
                                       size_t length);

/* ------------------------------------------------------------------------ */
/* Plan                                                                     */
/* ------------------------------------------------------------------------ */

/**
 * Compute the plan that turns layout @p src into layout @p dst (both from
 * the same context): which source replica sends each piece, which pieces
 * cross between domains once and are forwarded inside them, and how the work
 * is cut into rounds that fit RS_PARAM_STAGING_BYTES per rank. Every rank
 * computes the same plan from the same inputs. The plan copies what it
 * needs: the layouts may be destroyed afterwards. With RS_PARAM_PLAN_PART
 * set to a rank (since 0.5) it keeps only that rank's part. Free with
 * rs_plan_destroy().
 * Per-rank planning (since 0.5): in a context that drives one rank (MPI,
 * NCCL) with RS_PARAM_PLAN_PART set to its rank and RS_PARAM_ROUNDS to
 * RS_ROUNDS_BY_DOMAIN_PAIR, a rank computes only what lands in its own
 * domain and learns the rest of its part from its peers in one all-to-all
 * exchange: then rs_plan_create is
 * collective, every rank of the context calls it with the same settings
 * (a rank whose own planning fails still takes part, and every rank
 * returns an error), and a peer that does not call within
 * RS_PARAM_TIMEOUT_MS gives RS_ERR_TIMEOUT. What a rank receives there
 * travels sealed (a digest over each payload) and every move it is told of
 * is checked against its own layouts before any of it is used: a rank
 * that finds anything wrong returns RS_ERR_CORRUPT, and every other rank
 * the failure of the lowest rank that failed, naming it. Only when the
 * last word of the exchange (every rank's verdict) reaches a rank damaged
 * does that rank fail alone: it then tells its peers and its context is
 * done, so their next call on the context fails at once (over MPI; NCCL
 * carries no such notice yet: there at their timeout). The part, its
 * figures and its rounds are those the whole plan would give.
 * Errors: RS_ERR_NULL_POINTER, RS_ERR_WRONG_CONTEXT, RS_ERR_INCOMPATIBLE
 * (names or shapes differ, or the source layout holds a tensor that is the
 * block scales of a destination tensor, which are computed on the way),
 * RS_ERR_UNSUPPORTED (a dtype change libreshard does not make, an fp8
 * block not held whole (see rs_layout_set_block_scales), a plan that needs
 * more memory to make than planning may take, a piece or scale block that
 * does not fit the staging, a round label RS_ROUNDS_BY_DOMAIN_PAIR cannot
 * hold: the message says which, and what to raise),
 * RS_ERR_NOT_COVERED (a destination element no source holds; the message
 * names the tensor and element), RS_ERR_OVERLAP (two destination shards of
 * one rank share bytes), RS_ERR_UNKNOWN_RANK (RS_PARAM_PLAN_PART names a
 * rank outside the world), RS_ERR_INVALID_ARGUMENT (RS_PARAM_PLAN_PART
 * names another rank than the one a context driving one rank drives),
 * RS_ERR_NO_MEMORY; with per-rank planning also RS_ERR_CORRUPT (a damaged
 * or inconsistent exchange), RS_ERR_TIMEOUT, RS_ERR_TRANSPORT (the
 * context is done, or used in a child of fork()), RS_ERR_UNSUPPORTED (over
 * MPI, an exchange of more than 2 GiB) and, on the other ranks, the status
 * of the lowest rank that failed. @since 0.1
 */
RS_API rs_status rs_plan_create(const rs_layout *src, const rs_layout *dst,
                                rs_plan **out);
/**
 * Free a plan. NULL does nothing. A plan whose execution has not ended
 * (rs_plan_execute_async not yet seen done by rs_plan_test or
 * rs_plan_wait) is waited for first, as rs_plan_wait would, within
 * RS_PARAM_TIMEOUT_MS; if that execution fails, the context is done (its
 * peers are told) and its next call says why. @since 0.1 (the wait since
 * 0.5)
 */
RS_API void rs_plan_destroy(rs_plan *plan);

/** Per-rank figures of a plan, read with rs_plan_stat(). @since 0.1 */
typedef enum rs_stat {
  RS_STAT_BYTES_SENT_INTRA = 1,  /**< to other ranks of the same domain */
  RS_STAT_BYTES_SENT_INTER = 2,  /**< to ranks of other domains */
  RS_STAT_BYTES_RECV_INTRA = 3,
  RS_STAT_BYTES_RECV_INTER = 4,
  RS_STAT_BYTES_LOCAL = 5,       /**< copied inside the rank itself, from
                                      what it holds (since 0.5 without
                                      RS_STAT_BYTES_COPIED_FROM_RELAY) */
  RS_STAT_MESSAGES_SENT = 6,
  RS_STAT_MESSAGES_RECV = 7,
  RS_STAT_ROUNDS = 8,            /**< rounds of the whole plan */
  RS_STAT_STAGING_BYTES = 9,     /**< staging the rank allocates to
                                      execute the plan (two halves, each
                                      as large as its largest step needs;
                                      at most RS_PARAM_STAGING_BYTES) */
  RS_STAT_MOVES = 10,            /**< moves the rank takes part in */
  RS_STAT_CONVERTED_SENDING = 11,  /**< elements the rank converts to
                                        another dtype before sending them
                                        (fp8 scales count one a block)
                                        (@since 0.4) */
  RS_STAT_CONVERTED_RECEIVING = 12, /**< elements it converts once they
                                        arrived, or in a copy inside the
                                        rank (@since 0.4) */
  RS_STAT_BYTES_COPIED_FROM_RELAY = 13, /**< copied inside the rank out
                                        of a relay slot: bytes it received
                                        once into staging, forwards to
                                        others of its domain and needs
                                        itself (@since 0.5) */
  RS_STAT_BYTES_PACKED = 14,     /**< of the bytes it sends, those it
                                      copies into staging first, as they
                                      are; the rest go straight
                                      (docs/ABI.md) (@since 0.5) */
  RS_STAT_BYTES_UNPACKED = 15    /**< of the bytes it receives, those it
                                      copies out of staging, as they are
                                      (converted ones are in
                                      RS_STAT_CONVERTED_RECEIVING)
                                      (@since 0.5) */
} rs_stat;

/**
 * Read figure @p stat of @p rank; rank RS_ALL_RANKS sums over ranks (for
 * RS_STAT_ROUNDS and RS_STAT_STAGING_BYTES: the maximum).
 * Errors: RS_ERR_NULL_POINTER, RS_ERR_UNKNOWN_RANK, RS_ERR_INVALID_ARGUMENT
 * (unknown stat). @since 0.1
 */
RS_API rs_status rs_plan_stat(const rs_plan *plan, int rank, rs_stat stat,
                              int64_t *value);

/** How a move travels. Pinned values. @since 0.1 */
typedef enum rs_route {
  RS_ROUTE_LOCAL = 0, /**< inside one rank: a copy */
  RS_ROUTE_INTRA = 1, /**< between ranks of one domain */
  RS_ROUTE_INTER = 2  /**< between domains */
} rs_route;

/** Number of moves (box copies) in the plan; in a plan's part
 *  (RS_PARAM_PLAN_PART), in that part. Errors: RS_ERR_NULL_POINTER.
 *  @since 0.1 */
RS_API rs_status rs_plan_num_moves(const rs_plan *plan, int64_t *out);

/**
 * Describe move @p index (0 <= index < rs_plan_num_moves): its tensor (index
 * into the plan's tensors, see rs_plan_tensor_info), source and destination
 * ranks, route, round, and whether it forwards bytes that crossed into the
 * domain earlier in the round (forwarded = 1). Any out pointer may be NULL.
 * Moves are numbered in the order the plan runs them, message by message:
 * by round, then stage (direct and first-hop moves before the forwards
 * inside a domain), then source rank, then destination rank; so the moves
 * of one message (one round, stage, sender and receiver) are consecutive.
 * A plan's part (RS_PARAM_PLAN_PART) holds the whole plan's moves that have
 * its rank at either end, numbered in the same order.
 * Errors: RS_ERR_NULL_POINTER (plan), RS_ERR_INVALID_ARGUMENT (index).
 * @since 0.1 (the order is promised since 0.5)
 */
RS_API rs_status rs_plan_move_info(const rs_plan *plan, int64_t index,
                                   int *tensor, int *src_rank, int *dst_rank,
                                   rs_route *route, int *round,
                                   int *forwarded);
/**
 * The box a move carries, in the tensor's global coordinates: @p offset and
 * @p extent must each have room for the tensor's ndim entries. On failure
 * their entries are zeroed: the move's tensor's ndim of them, or for a bad
 * index as many as the plan's tensor of fewest dimensions has.
 * Errors: RS_ERR_NULL_POINTER, RS_ERR_INVALID_ARGUMENT (index),
 * RS_ERR_UNSUPPORTED (a plan made with RS_PARAM_PLAN_BOXES = 0, since 0.5).
 * @since 0.1
 */
RS_API rs_status rs_plan_move_box(const rs_plan *plan, int64_t index,
                                  int64_t *offset, int64_t *extent);

/** Number of tensors the plan moves. Errors: RS_ERR_NULL_POINTER.
 *  @since 0.1 */
RS_API rs_status rs_plan_num_tensors(const rs_plan *plan, int *out);
/**
 * Name (owned by the plan, valid while it lives) and ndim of tensor
 * @p tensor of the plan. Either out pointer may be NULL.
 * Errors: RS_ERR_NULL_POINTER, RS_ERR_INVALID_ARGUMENT. @since 0.1
 */
RS_API rs_status rs_plan_tensor_info(const rs_plan *plan, int tensor,
                                     const char **name, int *ndim);

/**
 * A 64-bit fingerprint of everything the plan was computed from (tensors,
 * shards, domains, staging setting). Ranks that agree on it compute the same
 * plan. Errors: RS_ERR_NULL_POINTER. @since 0.1
 */
RS_API rs_status rs_plan_fingerprint(const rs_plan *plan, uint64_t *out);

/**
 * The whole plan as JSON (tensors, per-rank figures, every move with its
 * box, ranks, route and round). "ranks" holds an object only for each rank
 * that takes part (sends, receives, copies or stages anything), in rank
 * order, each naming its "rank"; "idle_ranks" counts the others (since
 * 0.4; before, every rank had an entry), so the text grows with the work,
 * not with the world size. Where the plan changes dtype (since 0.4) a
 * tensor names its "dst_dtype" (and its "scales" tensor, "block" and
 * "scale_rule", or for a scale tensor "scales_of"), a rank its
 * "converted_sending" / "converted_receiving" elements, and a move that
 * converts its "wire_dtype" and where it "converts": "sender", "receiver"
 * or "copy" (inside one rank); a move that computes block scales from
 * values says "computes_scales". "part" (since 0.5) is -1, or the rank
 * whose part the plan holds (RS_PARAM_PLAN_PART): then "moves" lists that
 * part's moves and everything else still describes the whole plan.
 * "boxes" (since 0.5) is false for a plan made with RS_PARAM_PLAN_BOXES =
 * 0, whose moves have no "offset" and "extent". *json
 * is NUL-terminated, owned by the caller
 * and freed with rs_free(); *length (may be NULL) gets its length.
 * Errors: RS_ERR_NULL_POINTER, RS_ERR_NO_MEMORY. @since 0.1
 */
RS_API rs_status rs_plan_to_json(const rs_plan *plan, char **json,
                                 size_t *length);

/** Free memory libreshard handed to the caller. NULL does nothing.
 *  @since 0.1 */
RS_API void rs_free(void *ptr);

/** Which layout a buffer belongs to. Pinned values. @since 0.1 */
typedef enum rs_side {
  RS_SIDE_SRC = 0,
  RS_SIDE_DST = 1
} rs_side;

/**
 * Tell the plan where buffer @p buffer of @p rank on @p side lives: @p ptr,
 * @p bytes long (host memory for the local and MPI transports). A later
 * bind of the same (side, rank, buffer) replaces the earlier one; a bind
 * refused with RS_ERR_BUFFER_TOO_SMALL leaves that buffer unbound (the
 * earlier memory is forgotten), so rs_plan_execute refuses to run until it
 * is bound again. A context driving one rank accepts only its own rank, and
 * a plan's part (RS_PARAM_PLAN_PART) only its part's rank. While an
 * execution of the plan has not ended (see rs_plan_destroy) no binding
 * changes: RS_ERR_INVALID_ARGUMENT, nothing changed (since 0.5).
 * The memory must stay valid while the plan executes; libreshard never
 * frees it.
 * Errors: RS_ERR_NULL_POINTER, RS_ERR_UNKNOWN_RANK (outside the world, not
 * driven by this process, or not the plan's part), RS_ERR_UNKNOWN_BUFFER
 * (no shard of that side and rank uses the buffer), RS_ERR_BUFFER_TOO_SMALL
 * (a shard reaches past @p bytes), RS_ERR_INVALID_ARGUMENT (bad side, or
 * an execution in flight), RS_ERR_WRONG_MEMORY (a context that moves
 * device memory: bind with rs_plan_bind_memory), RS_ERR_TRANSPORT (a
 * context between processes used in a child of fork()).
 * @since 0.1
 */
RS_API rs_status rs_plan_bind(rs_plan *plan, rs_side side, int rank,
                              int buffer, void *ptr, size_t bytes);

/**
 * Move the bytes: afterwards every destination shard holds its box of the
 * source tensors, bit-exact. The plan is checked whole before any
 * destination byte is written: every buffer the driven ranks need must be
 * bound, and no bound destination buffer may overlap a bound source buffer
 * of the same rank. A plan may be executed again (after the source weights
 * changed) without re-planning.
 *
 * Between processes (MPI), every rank executes the same plans in the same
 * order: plans are paired across ranks by the order of their first
 * execution, and executions of a plan by their count. A rank returns RS_OK
 * only when every byte it received came from its peers' execution of the
 * same plan and the same count, and every peer of the plan finished its
 * transfers of that execution: before any data moves, and again after its
 * own transfers, each rank exchanges (plan, count) with the peers of the
 * plan, and a rank that gives up tells them why. A peer running another
 * plan or another count gives RS_ERR_MISMATCH; a peer that gave up gives
 * RS_ERR_TRANSPORT naming the rank that gave up first and its reason; a
 * wait without progress for RS_PARAM_TIMEOUT_MS gives RS_ERR_TIMEOUT
 * naming the rank that went silent first where that can be known (the
 * rank waited for, or the one it was waiting for in turn). Every rank
 * returns within the timeout plus a quarter of it (at most 200 ms, spent
 * learning who went silent first) plus at most 50 ms to abandon what is
 * posted.
 *
 * A rank whose own checks (above) refuse the execution still tells the
 * others, so that none waits out the timeout for it. At a plan's first
 * execution the refusal travels in the agreement: the refusing rank returns
 * its own status (say RS_ERR_UNKNOWN_BUFFER) and message, every other rank
 * RS_ERR_MISMATCH with the message "rank N: <its message>; it refused
 * (<its status>) ...", within milliseconds; nothing moved and every
 * context stays usable (bind what was missing and execute again on every
 * rank). At a later execution the refusing rank returns its own status but
 * gives up as after a failure: the plan's peers get RS_ERR_TRANSPORT naming
 * it and its status (over MPI at once; over NCCL, which carries no
 * notices, after their timeout), and every context involved is done.
 *
 * After RS_ERR_TIMEOUT, RS_ERR_TRANSPORT, RS_ERR_CORRUPT, a mismatch found
 * in the hello of an agreed plan, or rs_context_abort, the context is done
 * (fail-stop): every later rs_plan_execute, rs_plan_execute_async and
 * rs_layout_allgather on it returns RS_ERR_TRANSPORT at once with the first
 * reason, without taking part in anything, and destination buffers may be
 * partly written. What to do next: destroy every plan and layout made from
 * the context and the context itself (any order); create a new context (on
 * MPI from a communicator that every live rank calls with: the same one
 * when every process lives, else a new one such as an MPI_Comm_split or
 * ULFM-shrunk one; on NCCL from a new NCCL communicator); build the
 * layouts again (rs_layout_allgather), plan, bind and execute. A failure
 * in the agreement of a new plan's inputs (RS_ERR_MISMATCH naming the
 * differing section, or the rank that refused) leaves the context usable.
 *
 * A dead peer does not end this process: while this call (and every other
 * that talks to peers: rs_plan_execute_async, rs_plan_test, rs_plan_wait,
 * rs_layout_allgather, context creation, and the destruction of a
 * context's last reference) runs, SIGPIPE is blocked on the calling thread
 * and one raised by a write to a closed connection is discarded; the
 * thread's signal mask is as it was when the call returns (since 0.5;
 * docs/RELIABILITY.md, finding 17).
 * Errors: RS_ERR_NULL_POINTER, RS_ERR_UNKNOWN_BUFFER (a needed buffer is
 * not bound; the message names side, rank and buffer), RS_ERR_OVERLAP,
 * RS_ERR_NO_MEMORY (staging), RS_ERR_MISMATCH (ranks disagree, or another
 * rank refused the plan's first execution), RS_ERR_TRANSPORT (a peer gave
 * up, the context is done, or a context between processes is used in a
 * child of fork()), RS_ERR_TIMEOUT, RS_ERR_CORRUPT,
 * RS_ERR_UNSUPPORTED (a plan's part, RS_PARAM_PLAN_PART, on a context that
 * drives every rank: there a part is for inspection; a plan made with
 * RS_PARAM_PLAN_BOXES = 0, since 0.5), RS_ERR_INVALID_ARGUMENT (an
 * execution started by rs_plan_execute_async is still in flight on the
 * context; on a GPU context, a converted element not aligned to its size),
 * RS_ERR_INTERNAL (a bug in libreshard; please report). @since 0.1
 */
RS_API rs_status rs_plan_execute(rs_plan *plan);

/**
 * Exchange shards between processes (MPI and NCCL contexts, declared in
 * reshard.h since 0.3, in reshard_mpi.h before): afterwards the layout on
 * every rank holds the tensors and shards every rank had added, in rank
 * order, so all ranks hold the same layout and compute the same plan.
 * Before the call each rank may hold only shards of its own rank (and
 * tensors, which must agree in dtype and shape where several ranks
 * declare the same name). Collective over the context's
 * ranks; a rank that does not call within RS_PARAM_TIMEOUT_MS gives
 * RS_ERR_TIMEOUT on the others. Bytes received are decoded by a versioned,
 * size-checked wire format and validated like rs_layout_add_shard; they
 * travel sealed (a digest over each rank's bytes), and a rank's layout
 * changes only once every rank has said it decoded all of them: a
 * damaged contribution gives RS_ERR_CORRUPT on the rank that found it and
 * that failure, naming the rank, on every other, no layout changed (since
 * 0.5; where the last word of the call reaches one rank damaged, that rank
 * fails alone, its context is done and its peers' next call fails).
 * A rank whose own layout is refused (a shard of another rank, no memory
 * to encode it) still takes part, so that no rank waits out the timeout
 * for it: it returns its own status and message, and every other rank,
 * within milliseconds, RS_ERR_MISMATCH with the message "rank N: <its
 * message>; it refused (<its status>) ..."; no layout changes and the
 * context stays usable. A rank whose context is done (after a timeout or
 * a transport failure) takes part in nothing: it returns RS_ERR_TRANSPORT
 * at once.
 * Errors: RS_ERR_NULL_POINTER, RS_ERR_INVALID_ARGUMENT (a shard of another
 * rank), RS_ERR_UNSUPPORTED (a context that drives every rank itself),
 * RS_ERR_MISMATCH (two ranks declare one tensor differently, or another
 * rank refused its layout), RS_ERR_CORRUPT (malformed bytes),
 * RS_ERR_TIMEOUT, RS_ERR_TRANSPORT (the context is done, or used in a
 * child of fork()), RS_ERR_NO_MEMORY, and every status of
 * rs_layout_add_tensor and rs_layout_add_shard (a contribution decoded);
 * over MPI also RS_ERR_UNSUPPORTED (more than 2 GiB of layouts in all).
 * After RS_ERR_TIMEOUT or RS_ERR_TRANSPORT the
 * context is done (see rs_plan_execute for what to do next). On failure
 * the layout is unchanged. @since 0.1
 */
RS_API rs_status rs_layout_allgather(rs_layout *layout);

/**
 * Detail of the last failure recorded on the context of @p layout (or of
 * @p plan): rs_context_last_error of that context, for callers that hold
 * only the layout or plan (language bindings). NULL gives rs_last_error().
 * Never NULL; valid until the next failure on that context. @since 0.3
 */
RS_API const char *rs_layout_last_error(const rs_layout *layout);
/** See rs_layout_last_error. @since 0.3 */
RS_API const char *rs_plan_last_error(const rs_plan *plan);

/* ------------------------------------------------------------------------ */
/* Memory kinds and asynchronous execution                                  */
/* ------------------------------------------------------------------------ */

/** Where a bound buffer lives. Pinned values. @since 0.2 */
typedef enum rs_memory {
  RS_MEMORY_HOST = 0, /**< ordinary host memory */
  RS_MEMORY_CUDA = 1  /**< memory of a CUDA device (GPU transports) */
} rs_memory;

/**
 * rs_plan_bind for memory of a stated kind: @p memory and, for
 * RS_MEMORY_CUDA, the CUDA @p device it lives on (ignored for host
 * memory). A context moves one kind of memory: host for the in-process and
 * MPI transports, CUDA device memory for GPU transports; a buffer of the
 * other kind is refused before anything is recorded. rs_plan_bind(...) is
 * rs_plan_bind_memory(..., RS_MEMORY_HOST, -1).
 * Errors: those of rs_plan_bind, RS_ERR_WRONG_MEMORY (the context moves
 * another kind; the message names both), RS_ERR_INVALID_ARGUMENT (unknown
 * memory kind, negative device for device memory). @since 0.2
 */
RS_API rs_status rs_plan_bind_memory(rs_plan *plan, rs_side side, int rank,
                                     int buffer, void *ptr, size_t bytes,
                                     rs_memory memory, int device);

/**
 * Start an execution of @p plan and return without waiting for it: the
 * same checks as rs_plan_execute are made first (nothing is written when
 * they fail), then the work is started. @p queue is where a GPU transport
 * orders the work (a cudaStream_t, NULL for the legacy default stream):
 * the call returns once all of it is enqueued after what is already on
 * the stream, and the destination is ready when the stream reaches that
 * point (reshard_nccl.h); host contexts take NULL. Afterwards call
 * rs_plan_test or rs_plan_wait until the execution ends: on a host context
 * it makes progress only inside those calls (and rs_plan_execute), unless
 * RS_PARAM_PROGRESS_THREAD is 1, which hands it to the context's progress
 * thread (since 0.6; what the caller may do meanwhile is said there). One
 * execution may be in flight per context (on a GPU context of one process,
 * an enqueued execution no longer counts: the next may be enqueued at
 * once); the bound buffers must stay valid and the sources unchanged until
 * it ended.
 * Errors: those of rs_plan_execute, and RS_ERR_INVALID_ARGUMENT (an
 * execution is already in flight on the context; a queue on a host
 * context). @since 0.2
 */
RS_API rs_status rs_plan_execute_async(rs_plan *plan, void *queue);

/**
 * Advance the execution in flight without waiting. *done becomes 1 once it
 * ended (on a GPU context: once its stream got past it), and the call then
 * returns its status (as rs_plan_execute would have); 0 while it goes on
 * (status RS_OK). With no execution in flight,
 * *done = 1 and the status of the last one (RS_OK when there was none).
 * Errors: RS_ERR_NULL_POINTER, and those of rs_plan_execute. @since 0.2
 */
RS_API rs_status rs_plan_test(rs_plan *plan, int *done);

/**
 * Advance the execution in flight until it ended (for a queue: until the
 * queue reached its end) and return its status; with none in flight, the
 * status of the last one. rs_plan_execute is rs_plan_execute_async(plan,
 * NULL) then rs_plan_wait(plan).
 * Errors: RS_ERR_NULL_POINTER, and those of rs_plan_execute. @since 0.2
 */
RS_API rs_status rs_plan_wait(rs_plan *plan);

/**
 * Make the execution in flight on @p ctx (or the next one) fail at once
 * with RS_ERR_TRANSPORT, as when a peer is known to be dead: the waiting
 * call returns within milliseconds, tells the peers (between processes),
 * and the context is done (fail-stop, as after any transport failure:
 * every later rs_plan_execute and rs_layout_allgather on it returns
 * RS_ERR_TRANSPORT; destroy its plans, layouts and the context, and create
 * a new one, see rs_plan_execute). The one call that may be made from
 * another thread while the context is in use. NULL does nothing.
 * Errors: none (RS_OK). @since 0.2
 */
RS_API rs_status rs_context_abort(rs_context *ctx);

/* ------------------------------------------------------------------------ */
/* Logging                                                                  */
/* ------------------------------------------------------------------------ */

/*
 * libreshard logs what it does the way NCCL does, off unless asked for. The
 * environment sets it when the library is loaded:
 *   RESHARD_DEBUG=WARN|INFO|TRACE   the level (case does not matter)
 *   RESHARD_DEBUG_SUBSYS=PLAN,EXEC  the subsystems (CONTEXT, LAYOUT, PLAN,
 *                                   EXEC, TRANSPORT, ALL; a leading ^ keeps
 *                                   all but those named); default ALL
 *   RESHARD_DEBUG_FILE=/tmp/rs.%h.%p  where lines go (%h: host name, %p:
 *                                   process id, %%: %); default stderr
 * A line reads "host:pid:tid [rank] RESHARD INFO plan: ...", rank "-" where
 * none applies. WARN lines name every failure where it is recorded (the
 * rs_last_error() text), INFO the life of contexts, plans and executions,
 * TRACE each round of an execution. A message is formatted only when its
 * level and subsystem are on.
 */

/** Log levels, each including those before it. Pinned values. @since 0.6 */
typedef enum rs_log_level {
  RS_LOG_NONE = 0,
  RS_LOG_WARN = 1,
  RS_LOG_INFO = 2,
  RS_LOG_TRACE = 3
} rs_log_level;

/** Subsystems, a bit each (pinned), for rs_log_set_level and the
 *  callback. @since 0.6 */
#define RS_LOG_CONTEXT 0x01u   /* contexts, settings, the C API's checks */
#define RS_LOG_LAYOUT 0x02u    /* layouts, DTensor placements, the wire */
#define RS_LOG_PLAN 0x04u      /* planning */
#define RS_LOG_EXEC 0x08u      /* executions and copies */
#define RS_LOG_TRANSPORT 0x10u /* transports and their modules */
#define RS_LOG_ALL 0xffffffffu /* every subsystem, later ones included */

/**
 * Where log messages go instead of the file or stderr: called with
 * @p user, the message's level, its one subsystem bit, the rank it is
 * about (-1: none) and the text (no trailing newline, valid during the
 * call only). It may be called from any thread of the library, several
 * at once, and must not call back into libreshard except rs_log_*.
 * @since 0.6
 */
typedef void (*rs_log_fn)(void *user, rs_log_level level, unsigned subsys,
                          int rank, const char *message);

/**
 * Set the level and the subsystems (RS_LOG_* bits; 0 logs nothing) of the
 * whole process, overriding RESHARD_DEBUG and RESHARD_DEBUG_SUBSYS.
 * Errors: RS_ERR_INVALID_ARGUMENT (a level outside RS_LOG_NONE..
 * RS_LOG_TRACE; nothing changes). Details in rs_last_error(). @since 0.6
 */
RS_API rs_status rs_log_set_level(rs_log_level level, unsigned subsystems);

/**
 * The level and subsystems now in force (either pointer may be NULL).
 * Errors: none (RS_OK). @since 0.6
 */
RS_API rs_status rs_log_get_level(rs_log_level *level, unsigned *subsystems);

/**
 * Send every message to @p fn with @p user from now on (NULL: back to
 * RESHARD_DEBUG_FILE or stderr). A message being written while the
 * callback changes may still reach the one before: keep its @p user valid
 * until no execution, plan or context of the process is in use.
 * Errors: none (RS_OK). @since 0.6
 */
RS_API rs_status rs_log_set_callback(rs_log_fn fn, void *user);

#ifdef __cplusplus
}
#endif

#endif /* RESHARD_H */
