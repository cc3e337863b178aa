/* SPDX-License-Identifier: Apache-2.0 */
/* The named configurations. Train specs use the reference's conventions:
 * edp = expert data parallel (its "dp"), dense DP derived. */
#include "configs.h"

#include <string.h>
#include <strings.h>

static const rt_config configs[] = {
    /* The reference's model bench on GB200 NVL72 (measured). */
    {"dsv3-bench-256gpus-gb200", "DeepSeek-V3", "tp=1,cp=1,ep=16,pp=4,edp=2",
     "tp=8,dp=16", "gb200-nvl72",
     "reference model bench (README table): 128T / 2 NVL + 128G / 2 NVL",
     1447.44, 3837.74, NULL, false},
    {"qwen235b-bench-128gpus-gb200", "Qwen3-235B-A22B",
     "tp=2,cp=2,ep=16,pp=4,gpus=64", "tp=8,dp=8", "gb200-nvl72",
     "reference model bench (README table): 64T / 1 NVL + 64G / 1 NVL",
     988.75, 2175.16, NULL, false},
    /* The reference's shipped system configurations. */
    {"dsv3-128gpus-gb200", "DeepSeek-V3", "tp=1,cp=1,ep=16,pp=4,gpus=64",
     "tp=8,dp=8", "gb200-nvl72", "reference system config", 0, 0, NULL, false},
    {"dsv3-256gpus-gb200", "DeepSeek-V3", "tp=1,cp=1,ep=16,pp=8,gpus=128",
     "tp=8,dp=16", "gb200-nvl72", "reference system config", 0, 0, NULL, false},
    {"dsv3-pp-64gpus-gb200", "DeepSeek-V3", "tp=1,cp=1,ep=16,pp=2,gpus=32",
     "tp=8,dp=4", "gb200-nvl72", "reference system config", 0, 0, NULL, false},
    {"qwen235b-TP2CP2PP4EP16-128gpus-gb200", "Qwen3-235B-A22B",
     "tp=2,cp=2,ep=16,pp=4,gpus=64", "tp=8,dp=8", "gb200-nvl72",
     "reference system config", 0, 0, NULL, false},
    {"qwen3-32b-tp4pp4dp2-to-tp4dp8-64gpus-h100", "Qwen3-32B",
     "tp=4,pp=4,dp=2", "tp=4,dp=8", "dgx-h100", "reference system config", 0,
     0, NULL, false},
    {"qwen3-32b-tp2pp4dp2-to-tp1dp16-32gpus-gb200", "Qwen3-32B",
     "tp=2,pp=4,dp=2", "tp=1,dp=16", "gb200-nvl72", "reference system config",
     0, 0, NULL, false},
    /* The same published parallelism on DGX H100. */
    {"dsv3-256gpus-h100", "DeepSeek-V3", "tp=1,cp=1,ep=16,pp=4,edp=2",
     "tp=8,dp=16", "dgx-h100",
     "the reference's DeepSeek-V3 bench configuration on DGX H100", 0, 0,
     NULL, false},
    {"qwen235b-128gpus-h100", "Qwen3-235B-A22B",
     "tp=2,cp=2,ep=16,pp=4,gpus=64", "tp=8,dp=8", "dgx-h100",
     "the reference's Qwen3-235B bench configuration on DGX H100", 0, 0,
     NULL, false},
    /* Catalog configurations of the other models. */
    {"qwen30b-64gpus-h100", "Qwen3-30B-A3B", "tp=2,ep=8,pp=2,gpus=32",
     "tp=2,dp=16", "dgx-h100", "catalog", 0, 0,
     "verl NCCL all-gather + broadcast, Qwen3-30B-A3B, 4x8 H100: ~7 s "
     "(colocated, layout not published)", false},
    {"qwen30b-ep-64gpus-gb200", "Qwen3-30B-A3B", "tp=1,ep=8,pp=1,gpus=32",
     "tp=1,dp=32,ep=32", "gb200-nvl72", "catalog (vLLM expert parallel)", 0,
     0, NULL, false},
    {"llama70b-tp8pp4-128gpus-h100", "Llama-3.1-70B", "tp=8,pp=4,dp=2",
     "tp=8,dp=8", "dgx-h100", "catalog", 0, 0, NULL, false},
    {"llama70b-fsdp32-to-tp8-64gpus-h100", "Llama-3.1-70B",
     "tp=1,dp=32,fsdp=1", "tp=8,dp=4", "dgx-h100",
     "catalog (FSDP32 -> TP8, as the verl 72B figure)", 0, 0,
     "verl NCCL, 72B dense, 8 nodes FSDP32 -> TP8: 28.5-29.1 s", false},
    {"llama70b-tp4fsdp-to-tp8-128gpus-gb200", "Llama-3.1-70B",
     "tp=4,dp=16,fsdp=1", "tp=8,dp=8", "gb200-nvl72",
     "catalog (TP x FSDP: two sharded axes)", 0, 0, NULL, false},
    {"qwen3-32b-tp8-to-tp2-32gpus-b200", "Qwen3-32B", "tp=8,pp=2", "tp=2,dp=8",
     "dgx-b200", "catalog", 0, 0, NULL, false},
    /* Colocated: trainer and inference engine on the same GPUs (verl's
     * default, OpenRLHF and NeMo RL colocated modes). */
    {"qwen3-32b-fsdp8-to-tp4dp2-colocated-h100", "Qwen3-32B",
     "tp=1,dp=8,fsdp=1", "tp=4,dp=2", "dgx-h100",
     "catalog (colocated: FSDP8 and vLLM TP4 x DP2 on one DGX H100)", 0, 0,
     NULL, true},
    {"dsv3-ep16pp8-to-tp8ep-colocated-128gpus-h100", "DeepSeek-V3",
     "tp=1,ep=16,pp=8,gpus=128", "tp=8,dp=16,ep=128", "dgx-h100",
     "catalog (colocated: Megatron EP16 PP8 and vLLM TP8 x DP16 with EP128 "
     "on 16 DGX H100)",
     0, 0, NULL, true},
};

enum { NCONFIGS = (int)(sizeof configs / sizeof configs[0]) };

int rt_config_count(void) { return NCONFIGS; }

const rt_config *rt_config_at(int i) {
  return i >= 0 && i < NCONFIGS ? &configs[i] : NULL;
}

const rt_config *rt_config_find(const char *name) {
  for (int i = 0; name && i < NCONFIGS; i++)
    if (strcasecmp(configs[i].name, name) == 0) return &configs[i];
  return NULL;
}
