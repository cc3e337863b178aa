// SPDX-License-Identifier: Apache-2.0

package reshard_test

import (
	"fmt"
	"log"

	"libreshard.dev/reshard"
)

// A small Llama from its config.json text, trained with TP 2 (ranks 0, 1)
// and served by two engine replicas (ranks 2, 3): the recipe makes both
// layouts and names the engine's buffers as vLLM does, and a plan moves
// the weights. (A path to a config.json, or a catalog name such as
// "Llama-3.1-8B", works as well.)
func ExampleRecipeLayouts() {
	const config = `{"model_type": "llama", "hidden_size": 32,
		"num_hidden_layers": 2, "num_attention_heads": 8,
		"num_key_value_heads": 4, "head_dim": 4, "intermediate_size": 48,
		"vocab_size": 50, "torch_dtype": "bfloat16"}`
	ctx, err := reshard.NewLocalContext(4)
	if err != nil {
		log.Fatal(err)
	}
	defer ctx.Close()
	src, dst, recipe, err := reshard.RecipeLayouts(ctx, config, "tp=2", "tp=1,dp=2")
	if err != nil {
		log.Fatal(err)
	}
	defer recipe.Close()
	defer src.Close()
	defer dst.Close()
	plan, err := reshard.NewPlan(src, dst)
	if err != nil {
		log.Fatal(err)
	}
	defer plan.Close()

	// One C buffer per buffer of every rank, as the recipe lists them
	// (the trainer's fill would go here).
	for _, side := range []reshard.Side{reshard.Src, reshard.Dst} {
		ranks, _ := recipe.Ranks(side)
		for _, rank := range ranks {
			bufs, _ := recipe.Buffers(side, rank)
			for _, rb := range bufs {
				b, _ := reshard.NewBuffer(rb.Bytes)
				defer b.Close()
				if err := plan.Bind(side, rank, rb.Buffer, b); err != nil {
					log.Fatal(err)
				}
			}
		}
	}
	if err := plan.Execute(); err != nil {
		log.Fatal(err)
	}
	bufs, _ := recipe.Buffers(reshard.Dst, 2)
	for _, rb := range bufs[:4] {
		fmt.Println(rb.Buffer, rb.Name, rb.Bytes)
	}
	// Output:
	// 0 model.embed_tokens.weight 4096
	// 1 model.layers.0.input_layernorm.weight 64
	// 2 model.layers.0.self_attn.qkv_proj.weight 4096
	// 3 model.layers.0.self_attn.o_proj.weight 2048
}
