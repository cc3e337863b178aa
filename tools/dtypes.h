/* SPDX-License-Identifier: Apache-2.0 */
/* The dtypes of a weight sync: what the trainer holds (bf16 or fp32), what
 * the inference engine holds (bf16, fp32, or fp8 with block scales as
 * vLLM's and DeepSeek-V3's fp8 checkpoints do), and so, tensor by tensor,
 * which dtype each side declares and which tensors are quantized. */
#ifndef RT_DTYPES_H
#define RT_DTYPES_H

#include "frameworks.h"

typedef struct rt_dtype_spec {
  rs_dtype train;                 /* RS_DTYPE_BF16 (default) or F32 */
  rs_dtype infer;                 /* RS_DTYPE_BF16 (default), F32, F8_E4M3 */
  int64_t block_rows, block_cols; /* fp8 blocks (default 128 x 128) */
  rs_scale_rule rule;             /* fp8 scales (default RS_SCALE_AMAX) */
} rt_dtype_spec;

void rt_dtype_spec_default(rt_dtype_spec *s);

/* The command line's values; a failure names the option and the values it
 * takes. --train-dtype bf16|fp32, --infer-dtype bf16|fp32|fp8,
 * --fp8-block R,C, --fp8-scales amax|ue8m0. */
int rt_dtype_parse_train(const char *val, rt_dtype_spec *s, rt_err *e);
int rt_dtype_parse_infer(const char *val, rt_dtype_spec *s, rt_err *e);
int rt_dtype_parse_block(const char *val, rt_dtype_spec *s, rt_err *e);
int rt_dtype_parse_scales(const char *val, rt_dtype_spec *s, rt_err *e);

/* "bf16", "fp32", "fp8" (the command line's words) */
const char *rt_dtype_word(rs_dtype d);
/* "amax", "ue8m0" */
const char *rt_scale_rule_word(rs_scale_rule rule);

/* Why a linear weight was left unquantized with --infer-dtype fp8. */
typedef enum rt_keep {
  RT_KEEP_NONE = 0,
  RT_KEEP_BLOCKS_CUT = 1, /* an inference shard cuts a block */
  RT_KEEP_FUSED = 2       /* fused in one vLLM buffer with such a tensor */
} rt_keep;

/* One tensor as our plan declares it. */
typedef struct rt_tensor_dtype {
  rs_dtype src, dst;
  bool scaled;    /* dst f8_e4m3 with a "<name>_scale_inv" f32 tensor */
  rt_keep kept;
  int64_t cut_dim, cut_off, cut_ext; /* the first shard that cut a block */
} rt_tensor_dtype;

typedef struct rt_dtype_summary {
  bool converts;   /* some tensor changes dtype on the way */
  int quantized;   /* tensors in fp8 with scales */
  int kept_cut, kept_fused; /* linear weights left unquantized, by reason */
  int plain;       /* other tensors: norms, biases, embeddings, lm_head,
                      router */
  int first_kept;  /* tensor index of the first kept for blocks cut; -1 */
} rt_dtype_summary;

/* Whether the fp8 scheme quantizes tensors of this role: the 2-D and 3-D
 * linear weights (attention and MLA projections, MLPs, experts); not
 * norms, biases, embeddings, lm_head or the router. */
bool rt_dtype_quantizable(const rt_tensor *t);

/* Decide every tensor's dtypes (td: model->n entries) from the spec and the
 * inference meshes: a quantizable tensor becomes fp8 where every inference
 * shard holds whole blocks of its last two dims, and the members of one
 * fused buffer are quantized together or not at all. Tensors not
 * quantized keep the model's dtype on the inference side (fp32 with
 * --infer-dtype fp32); the trainer holds the model's dtype, or fp32. */
void rt_dtypes_decide(const rt_model *model, const rt_mesh *dmesh,
                      const rt_dtype_spec *spec, rt_tensor_dtype *td,
                      rt_dtype_summary *sum);

/* "x.weight" -> "x.weight_scale_inv" (vLLM's weight_scale_inv). */
void rt_scale_name(const char *values, char *out, size_t n);
/* The scales of a values box (whole blocks): the last two dims divided by
 * the block, rounded up (a 1-D box: its one dim by block_cols). */
void rt_scale_box(const rt_box *values, const rt_dtype_spec *spec,
                  rt_box *out);
/* Shape of the scale tensor of t. */
void rt_scale_shape(const rt_tensor *t, const rt_dtype_spec *spec,
                    int64_t *shape);

/* Bytes of t as the inference side holds it: its values and, when scaled,
 * its scales. */
double rt_tensor_dst_bytes(const rt_tensor *t, const rt_tensor_dtype *td,
                           const rt_dtype_spec *spec);

#endif
