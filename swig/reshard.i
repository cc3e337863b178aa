/* SPDX-License-Identifier: Apache-2.0 */
/* The one SWIG interface of libreshard, for Python, Go and Lua.
 *
 * It wraps rsw.h, the C API recast for bindings (every fallible call fills
 * an rsw_result; integer arrays are rsw_ints; C-allocated rsw_buffer), and
 * the public enumerations as constants. Each language finishes it with a
 * thin layer of its own (bindings/<language>/) that makes handles objects,
 * results errors, and lists of integers native lists.
 *
 * Per-language needs live here, each under its #ifdef:
 *   Lua   int64_t and uint64_t as Lua integers (SWIG 4.1 makes them
 *         floats, which lose exactness above 2^53).
 * Handles made by a call are read with rsw_result_context/_layout/_plan/
 * _buffer, typed, in every language. */
%module reshard

%{
#include "rsw.h"
%}

%include <stdint.i>

#ifdef SWIGLUA
/* Exact integers: lua_Integer both ways (SWIG 4.1 makes every C integer a
 * Lua float, which loses exactness above 2^53 and prints 3 as 3.0).
 * - An integer argument must be a Lua number with an exact integer value
 *   (3 or 3.0; not 3.5, not 2^63, not the string "3"); int arguments must
 *   also fit an int. Anything else is an argument error, never truncated.
 * - int64_t is lua_Integer itself. uint64_t travels as its 64-bit pattern:
 *   values from 2^63 up are negative Lua integers (math.ult and
 *   string.format("%x") read them as unsigned).
 * - Results (int, int64_t, uint64_t, and the int/int64_t fields of
 *   rsw_result) come back as Lua integers. */
%{
#include <limits.h>
static int rsw_lua_isint(lua_State *L, int i) {
  int ok = 0;
  if (lua_type(L, i) != LUA_TNUMBER) return 0;
  (void)lua_tointegerx(L, i, &ok);
  return ok;
}
static int rsw_lua_isint32(lua_State *L, int i) {
  int ok = 0;
  lua_Integer v;
  if (lua_type(L, i) != LUA_TNUMBER) return 0;
  v = lua_tointegerx(L, i, &ok);
  return ok && v >= INT_MIN && v <= INT_MAX;
}
%}
%typemap(in, checkfn = "rsw_lua_isint") int64_t
  %{ $1 = (int64_t)lua_tointeger(L, $input); %}
%typemap(in, checkfn = "rsw_lua_isint") uint64_t
  %{ $1 = (uint64_t)lua_tointeger(L, $input); %}
%typemap(in, checkfn = "rsw_lua_isint") const int64_t & (int64_t temp),
                                         const uint64_t & (uint64_t temp)
  %{ temp = ($*1_ltype)lua_tointeger(L, $input); $1 = &temp; %}
%typemap(in, checkfn = "rsw_lua_isint32") int
  %{ $1 = (int)lua_tointeger(L, $input); %}
%typemap(out) int, int64_t, uint64_t
  %{ lua_pushinteger(L, (lua_Integer)$1); SWIG_arg++; %}
%typemap(out) const int64_t &, const uint64_t &
  %{ lua_pushinteger(L, (lua_Integer)*$1); SWIG_arg++; %}
%typemap(typecheck, precedence = SWIG_TYPECHECK_INT64)
  int64_t, uint64_t, const int64_t &, const uint64_t &
  %{ $1 = rsw_lua_isint(L, $input); %}
%typemap(typecheck, precedence = SWIG_TYPECHECK_INT32) int
  %{ $1 = rsw_lua_isint32(L, $input); %}
#endif

#ifdef SWIGPYTHON
/* An input integer array (const rsw_ints *) also takes a Python list or
 * tuple of ints, copied into a temporary rsw_ints in one call: building
 * the vector element by element from Python costs a call per element,
 * which dominates describing a state dict. An rsw_ints (or None: NULL)
 * is still taken as it is. Elements must be Python ints fitting int64_t
 * (the Python layer converts and checks them first); anything else is a
 * TypeError or OverflowError naming the element. */
%{
static int rsw_py_ints(PyObject *seq, rsw_ints **out) {
  Py_ssize_t i, n = PyList_Check(seq) ? PyList_GET_SIZE(seq)
                                      : PyTuple_GET_SIZE(seq);
  rsw_ints *v = rsw_ints_new();
  if (!v) {
    PyErr_NoMemory();
    return -1;
  }
  for (i = 0; i < n; i++) {
    PyObject *item = PyList_Check(seq) ? PyList_GET_ITEM(seq, i)
                                       : PyTuple_GET_ITEM(seq, i);
    int overflow = 0;
    long long x;
    if (!PyLong_Check(item) || PyBool_Check(item)) {
      PyErr_Format(PyExc_TypeError, "integer array element %zd is %s, not "
                   "an int", i, Py_TYPE(item)->tp_name);
      goto fail;
    }
    x = PyLong_AsLongLongAndOverflow(item, &overflow);
    if (overflow) {
      PyErr_Format(PyExc_OverflowError, "integer array element %zd does "
                   "not fit a 64-bit signed integer", i);
      goto fail;
    }
    if (x == -1 && PyErr_Occurred()) goto fail;
    if (rsw_ints_push(v, (int64_t)x) != 0) {
      PyErr_NoMemory();
      goto fail;
    }
  }
  *out = v;
  return 0;
fail:
  rsw_ints_free(v);
  return -1;
}
%}
%typemap(in) const rsw_ints * (rsw_ints *temp = NULL, void *argp = 0,
                               int res = 0) {
  if (PyList_Check($input) || PyTuple_Check($input)) {
    if (rsw_py_ints($input, &temp) != 0) SWIG_fail;
    $1 = temp;
  } else {
    res = SWIG_ConvertPtr($input, &argp, $descriptor, 0);
    if (!SWIG_IsOK(res)) {
      SWIG_exception_fail(SWIG_ArgError(res), "in method '$symname', "
                          "argument $argnum: a list or tuple of ints, or "
                          "rsw_ints");
    }
    $1 = ($ltype)argp;
  }
}
%typemap(freearg) const rsw_ints * %{ rsw_ints_free(temp$argnum); %}

/* Log lines to a Python callable fn(level, subsystem, rank, message)
 * (None: back to RESHARD_DEBUG_FILE or stderr). The library may call from
 * any of its threads: the sink takes the GIL (every other wrapped call
 * lets go of it, -threads) and reports an exception of fn as unraisable.
 * The callable is only read and changed holding the GIL. */
%{
static PyObject *rsw_py_log_fn = NULL;
static void rsw_py_log_sink(void *user, rs_log_level level, unsigned subsys,
                            int rank, const char *message) {
  PyGILState_STATE gil;
  (void)user;
  if (!Py_IsInitialized()) return;
  gil = PyGILState_Ensure();
  if (rsw_py_log_fn) {
    PyObject *fn = rsw_py_log_fn, *text, *got;
    Py_INCREF(fn);
    text = PyUnicode_DecodeUTF8(message, (Py_ssize_t)strlen(message),
                                "replace");
    got = text ? PyObject_CallFunction(fn, "iIiO", (int)level, subsys, rank,
                                       text)
               : NULL;
    if (!got) PyErr_WriteUnraisable(fn);
    Py_XDECREF(got);
    Py_XDECREF(text);
    Py_DECREF(fn);
  }
  PyGILState_Release(gil);
}
%}
%nothread rsw_py_log_route;
%inline %{
void rsw_py_log_route(PyObject *fn) {
  PyObject *old = rsw_py_log_fn;
  if (fn == Py_None) {
    rs_log_set_callback(NULL, NULL);
    rsw_py_log_fn = NULL;
  } else {
    Py_INCREF(fn);
    rsw_py_log_fn = fn;
    rs_log_set_callback(rsw_py_log_sink, NULL);
  }
  Py_XDECREF(old);
}
%}

/* The address of the first byte of a buffer-protocol object (a
 * memoryview), 0 when it exports none: what Plan.bind hands the library,
 * read here rather than through ctypes. Runs holding the GIL. */
%nothread rsw_py_buffer_address;
%inline %{
uint64_t rsw_py_buffer_address(PyObject *obj) {
  Py_buffer view;
  uint64_t address;
  if (PyObject_GetBuffer(obj, &view, PyBUF_SIMPLE) != 0) {
    PyErr_Clear();
    return 0;
  }
  address = (uint64_t)(uintptr_t)view.buf;
  PyBuffer_Release(&view);
  return address;
}
%}
#endif

/* Handles are opaque to every language. */
typedef struct rs_context rs_context;
typedef struct rs_layout rs_layout;
typedef struct rs_plan rs_plan;
typedef struct rs_model rs_model;
typedef struct rs_recipe rs_recipe;


%newobject rsw_plan_to_json;
%newobject rsw_result_new;
%delobject rsw_result_free;
%newobject rsw_ints_new;
%delobject rsw_ints_free;
%newobject rsw_buffer_new;
%delobject rsw_buffer_free;

/* rsw_result: fields readable, not writable. */
%immutable rsw_result::status;
%immutable rsw_result::value;
%immutable rsw_result::real;
%immutable rsw_result::handle;
%immutable rsw_result::name;
%immutable rsw_result::message;

%include "rsw.h"

/* The public enumerations, with their C names (RS_OK, RS_DTYPE_BF16, ...). */
%constant int RS_OK = 0;
%constant int RS_ERR_INVALID_ARGUMENT = 100;
%constant int RS_ERR_NULL_POINTER = 101;
%constant int RS_ERR_BAD_SHAPE = 102;
%constant int RS_ERR_TOO_MANY_DIMS = 103;
%constant int RS_ERR_OUT_OF_BOUNDS = 104;
%constant int RS_ERR_OVERFLOW = 105;
%constant int RS_ERR_OVERLAP = 106;
%constant int RS_ERR_DUPLICATE_NAME = 107;
%constant int RS_ERR_UNKNOWN_TENSOR = 108;
%constant int RS_ERR_UNKNOWN_RANK = 109;
%constant int RS_ERR_UNKNOWN_BUFFER = 110;
%constant int RS_ERR_BUFFER_TOO_SMALL = 111;
%constant int RS_ERR_BAD_PARAM = 112;
%constant int RS_ERR_WRONG_CONTEXT = 113;
%constant int RS_ERR_WRONG_MEMORY = 114;
%constant int RS_ERR_INCOMPATIBLE = 200;
%constant int RS_ERR_NOT_COVERED = 201;
%constant int RS_ERR_UNSUPPORTED = 300;
%constant int RS_ERR_NO_MEMORY = 400;
%constant int RS_ERR_TRANSPORT = 500;
%constant int RS_ERR_TIMEOUT = 501;
%constant int RS_ERR_MISMATCH = 502;
%constant int RS_ERR_CORRUPT = 503;
%constant int RS_ERR_INTERNAL = 900;

%constant int RS_DTYPE_U8 = 1;
%constant int RS_DTYPE_I8 = 2;
%constant int RS_DTYPE_U16 = 3;
%constant int RS_DTYPE_I16 = 4;
%constant int RS_DTYPE_U32 = 5;
%constant int RS_DTYPE_I32 = 6;
%constant int RS_DTYPE_U64 = 7;
%constant int RS_DTYPE_I64 = 8;
%constant int RS_DTYPE_F16 = 9;
%constant int RS_DTYPE_BF16 = 10;
%constant int RS_DTYPE_F32 = 11;
%constant int RS_DTYPE_F64 = 12;
%constant int RS_DTYPE_F8_E4M3 = 13;
%constant int RS_DTYPE_F8_E5M2 = 14;
%constant int RS_DTYPE_BOOL = 15;

%constant int RS_TRANSPORT_LOCAL = 1;
%constant int RS_TRANSPORT_MPI = 2;
%constant int RS_TRANSPORT_NCCL = 3;
%constant int RS_ALL_RANKS = -1;
%constant int RS_REPLICATE = -1;
%constant int RS_MAX_DIMS = 16;
%constant int RS_MAX_BUFFERS = 65536;
%constant int RS_NCCL_UNIQUE_ID_BYTES = 128;

%constant int RS_PARAM_STAGING_BYTES = 100;
%constant int RS_PARAM_SLICE_BYTES = 101;
%constant int RS_PARAM_COPY_THREADS = 102;
%constant int RS_PARAM_PROGRESS_THREAD = 103;
%constant int RS_PARAM_TIMEOUT_MS = 200;
%constant int RS_PARAM_INTEGRITY = 201;
%constant int RS_PARAM_PLAN_PART = 300;
%constant int RS_PARAM_PLAN_BOXES = 301;
%constant int RS_PARAM_ROUNDS = 302;

%constant int RS_ROUNDS_PACKED = 0;
%constant int RS_ROUNDS_BY_DOMAIN_PAIR = 1;

%constant int RS_STAT_BYTES_SENT_INTRA = 1;
%constant int RS_STAT_BYTES_SENT_INTER = 2;
%constant int RS_STAT_BYTES_RECV_INTRA = 3;
%constant int RS_STAT_BYTES_RECV_INTER = 4;
%constant int RS_STAT_BYTES_LOCAL = 5;
%constant int RS_STAT_MESSAGES_SENT = 6;
%constant int RS_STAT_MESSAGES_RECV = 7;
%constant int RS_STAT_ROUNDS = 8;
%constant int RS_STAT_STAGING_BYTES = 9;
%constant int RS_STAT_MOVES = 10;
%constant int RS_STAT_CONVERTED_SENDING = 11;
%constant int RS_STAT_CONVERTED_RECEIVING = 12;
%constant int RS_STAT_BYTES_COPIED_FROM_RELAY = 13;
%constant int RS_STAT_BYTES_PACKED = 14;
%constant int RS_STAT_BYTES_UNPACKED = 15;

%constant int RS_STRIDED_AUTO = 0;
%constant int RS_STRIDED_DISTRIBUTE = 1;
%constant int RS_STRIDED_FSDP2 = 2;

%constant int RS_LOG_NONE = 0;
%constant int RS_LOG_WARN = 1;
%constant int RS_LOG_INFO = 2;
%constant int RS_LOG_TRACE = 3;
%constant int RS_LOG_CONTEXT = 1;
%constant int RS_LOG_LAYOUT = 2;
%constant int RS_LOG_PLAN = 4;
%constant int RS_LOG_EXEC = 8;
%constant int RS_LOG_TRANSPORT = 16;

%constant int RS_SCALE_AMAX = 1;
%constant int RS_SCALE_UE8M0 = 2;

%constant int RS_ROUTE_LOCAL = 0;
%constant int RS_ROUTE_INTRA = 1;
%constant int RS_ROUTE_INTER = 2;

%constant int RS_SIDE_SRC = 0;
%constant int RS_SIDE_DST = 1;
%constant int RS_MEMORY_HOST = 0;
%constant int RS_MEMORY_CUDA = 1;

/* Recipes (reshard/recipes.h, since 0.6). */
%constant int RS_ROLE_EMBED = 0;
%constant int RS_ROLE_LM_HEAD = 1;
%constant int RS_ROLE_NORM = 2;
%constant int RS_ROLE_COL = 3;
%constant int RS_ROLE_ROW = 4;
%constant int RS_ROLE_REPL = 5;
%constant int RS_ROLE_ROUTER = 6;
%constant int RS_ROLE_BIAS = 7;
%constant int RS_ROLE_EXPERT_COL = 8;
%constant int RS_ROLE_EXPERT_ROW = 9;
%constant int RS_FUSE_NONE = 0;
%constant int RS_FUSE_ROWS = 1;
%constant int RS_FUSE_W13 = 2;
%constant int RS_MODEL_HIDDEN_SIZE = 0;
%constant int RS_MODEL_NUM_LAYERS = 1;
%constant int RS_MODEL_NUM_HEADS = 2;
%constant int RS_MODEL_NUM_KV_HEADS = 3;
%constant int RS_MODEL_HEAD_DIM = 4;
%constant int RS_MODEL_INTERMEDIATE_SIZE = 5;
%constant int RS_MODEL_MOE_INTERMEDIATE_SIZE = 6;
%constant int RS_MODEL_NUM_EXPERTS = 7;
%constant int RS_MODEL_NUM_SHARED_EXPERTS = 8;
%constant int RS_MODEL_FIRST_MOE_LAYER = 9;
%constant int RS_MODEL_VOCAB_SIZE = 10;
%constant int RS_MODEL_QK_NORM = 11;
%constant int RS_MODEL_MLA = 12;
%constant int RS_MODEL_Q_LORA_RANK = 13;
%constant int RS_MODEL_KV_LORA_RANK = 14;
%constant int RS_MODEL_QK_NOPE_HEAD_DIM = 15;
%constant int RS_MODEL_QK_ROPE_HEAD_DIM = 16;
%constant int RS_MODEL_V_HEAD_DIM = 17;
%constant int RS_MODEL_PUBLISHED_PARAMS = 18;
%constant int RS_MODEL_TIED_EMBEDDINGS = 19;
%constant int RS_MODEL_NUM_FUSED = 20;
%constant int RS_RECIPE_TRAIN_TP = 0;
%constant int RS_RECIPE_TRAIN_CP = 1;
%constant int RS_RECIPE_TRAIN_EP = 2;
%constant int RS_RECIPE_TRAIN_ETP = 3;
%constant int RS_RECIPE_TRAIN_PP = 4;
%constant int RS_RECIPE_TRAIN_DP = 5;
%constant int RS_RECIPE_TRAIN_EDP = 6;
%constant int RS_RECIPE_TRAIN_FSDP = 7;
%constant int RS_RECIPE_TRAIN_WORLD = 8;
%constant int RS_RECIPE_INFER_TP = 100;
%constant int RS_RECIPE_INFER_DP = 101;
%constant int RS_RECIPE_INFER_EP = 102;
%constant int RS_RECIPE_INFER_WORLD = 103;
%constant int RS_RECIPE_TRAIN_DTYPE = 200;
%constant int RS_RECIPE_INFER_DTYPE = 201;
%constant int RS_RECIPE_FP8_BLOCK_ROWS = 202;
%constant int RS_RECIPE_FP8_BLOCK_COLS = 203;
%constant int RS_RECIPE_FP8_SCALE_RULE = 204;
%constant int RS_RECIPE_INFER_FIRST_RANK = 205;
%constant int RS_RECIPE_TRAIN_VOCAB_PAD = 206;
%constant int RS_RECIPE_INFER_VOCAB_PAD = 207;
%constant int RS_FP8_QUANTIZED_OR_PLAIN = 0;
%constant int RS_FP8_KEPT_BLOCKS_CUT = 1;
%constant int RS_FP8_KEPT_FUSED = 2;
