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
  RT_KEEP_NONE = RS_FP8_QUANTIZED_OR_PLAIN,
  RT_KEEP_BLOCKS_CUT = RS_FP8_KEPT_BLOCKS_CUT, /* a shard cuts a block */
  RT_KEEP_FUSED = RS_FP8_KEPT_FUSED /* fused in one vLLM buffer with one */
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

/* Every tensor's dtypes (td: model->n entries) as the recipe decided them
 * (rs_recipe_tensor_dtypes: fp8 where every engine shard holds whole
 * blocks, the members of one fused buffer together or not at all), and
 * their summary. */
void rt_dtypes_read(const rs_recipe *r, int ntensors, rt_tensor_dtype *td,
                    rt_dtype_summary *sum);

/* Bytes of t as the inference side holds it: its values and, when scaled,
 * its scales. */
double rt_tensor_dst_bytes(const rt_tensor *t, const rt_tensor_dtype *td,
                           const rt_dtype_spec *spec);

#endif
