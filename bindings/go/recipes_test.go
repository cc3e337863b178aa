// SPDX-License-Identifier: Apache-2.0

package reshard

// Recipes from Go: models from the catalog and from the config.json files
// the C tests ship (tests/unit/recipes/configs), layouts from recipes, a
// plan between them that puts every element where the recipe says, and
// bad input refused with the library's status and message.

import (
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
)

// The config.json files of the C recipe tests, from this directory.
const configDir = "../../tests/unit/recipes/configs/"

// tinyConfig is Llama-3.1-8B's config.json shrunk to a model whose every
// element can be checked (the sizes of the Python tests' TINY).
func tinyConfig(t *testing.T, vocab int) []byte {
	t.Helper()
	text, err := os.ReadFile(configDir + "llama-3.1-8b.json")
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]interface{}
	if err := json.Unmarshal(text, &c); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]int{"hidden_size": 32, "num_hidden_layers": 2,
		"num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 4,
		"intermediate_size": 48, "vocab_size": vocab} {
		c[k] = v
	}
	out, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestRecipeCatalog(t *testing.T) {
	names := Catalog()
	for _, want := range []string{"DeepSeek-V3", "Llama-3.1-8B", "Qwen3-32B"} {
		found := false
		for _, n := range names {
			found = found || n == want
		}
		if !found {
			t.Errorf("%s not in the catalog %v", want, names)
		}
	}
	m, err := NewModelFromCatalog("llama8b") // an alias
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Name() != "Llama-3.1-8B" {
		t.Errorf("name %q", m.Name())
	}
	if n, err := m.NumTensors(); err != nil || n != 32*9+3 {
		t.Errorf("%d tensors, %v", n, err)
	}
	if h, err := m.Get(ModelHiddenSize); err != nil || h != 4096 {
		t.Errorf("hidden size %d, %v", h, err)
	}
	ti, err := m.Tensor(0)
	if err != nil {
		t.Fatal(err)
	}
	if want := (TensorInfo{"model.embed_tokens.weight", BF16, []int64{128256, 4096}}); !reflect.DeepEqual(ti, want) {
		t.Errorf("tensor 0: %+v, want %+v", ti, want)
	}
}

// The shipped config.json of Llama-3.1-8B gives the catalog's model, and
// RecipeLayouts takes its path: layouts and a plan between them (the plan
// alone; 16 GB of weights are not allocated here).
func TestRecipeConfigFile(t *testing.T) {
	path := configDir + "llama-3.1-8b.json"
	fromFile, err := NewModelFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fromFile.Close()
	cat, err := NewModelFromCatalog("Llama-3.1-8B")
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	a, err := fromFile.Tensors()
	if err != nil {
		t.Fatal(err)
	}
	b, err := cat.Tensors()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("the config file's tensors differ from the catalog's")
	}

	ctx, err := NewLocalContext(16)
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Close()
	src, dst, recipe, err := RecipeLayouts(ctx, path, "tp=2,pp=4", "tp=8")
	if err != nil {
		t.Fatal(err)
	}
	defer recipe.Close()
	defer src.Close()
	defer dst.Close()
	for _, l := range []*Layout{src, dst} {
		if n, err := l.NumTensors(); err != nil || n != 291 {
			t.Errorf("%d tensors, %v", n, err)
		}
	}
	if ranks, err := recipe.Ranks(Dst); err != nil || !reflect.DeepEqual(ranks, []int{8, 9, 10, 11, 12, 13, 14, 15}) {
		t.Errorf("engine ranks %v, %v", ranks, err)
	}
	bufs, err := recipe.Buffers(Dst, 8)
	if err != nil {
		t.Fatal(err)
	}
	var qkv *RecipeBuffer
	for i := range bufs {
		if bufs[i].Name == "model.layers.0.self_attn.qkv_proj.weight" {
			qkv = &bufs[i]
		}
	}
	// q 4096 rows, k and v 1024 each, over tp 8; 4096 columns of bf16
	if qkv == nil || qkv.Rank != 8 || qkv.Bytes != (4096+1024+1024)/8*4096*2 {
		t.Errorf("qkv_proj of rank 8: %+v", qkv)
	}
	plan, err := NewPlan(src, dst)
	if err != nil {
		t.Fatal(err)
	}
	defer plan.Close()
	if n, err := plan.NumTensors(); err != nil || n != 291 {
		t.Errorf("the plan moves %d tensors, %v", n, err)
	}
}

// code is what element flat (row-major) of tensor t holds in the test: a
// finite bf16 bit pattern, so never the 0xFFFF the destinations start with.
func code(t int, flat int64) uint16 { return uint16((int64(t)*2053 + flat) % 0x7F00) }

// eachElement calls f for every element of shard s of a tensor of shape
// shape: its element index in the buffer (2-byte elements) and its
// row-major index in the tensor.
func eachElement(t *testing.T, s RecipeShard, shape []int64, f func(at, flat int64)) {
	t.Helper()
	if s.DType.Size() != 2 || s.ByteOffset%2 != 0 {
		t.Fatalf("shard %+v: a 2-byte element expected", s)
	}
	nd := len(shape)
	c := make([]int64, nd)
	for {
		at, flat := s.ByteOffset/2, int64(0)
		for d := 0; d < nd; d++ {
			at += c[d] * s.Strides[d]
			flat = flat*shape[d] + s.Offset[d] + c[d]
		}
		f(at, flat)
		d := nd - 1
		for ; d >= 0; d-- {
			if c[d]++; c[d] < s.Extent[d] {
				break
			}
			c[d] = 0
		}
		if d < 0 {
			return
		}
	}
}

// A plan between a recipe's layouts, with every buffer bound by the
// recipe's buffer list, puts every element of every tensor where the
// engine's shards say, and writes nothing else (the engine's vocabulary
// padding rows keep what they held).
func TestRecipeMovesEveryElement(t *testing.T) {
	config := tinyConfig(t, 50)
	for _, tc := range []struct {
		name  string
		world int
		opts  []RecipeOption
	}{
		{"apart", 8, nil},
		{"colocated", 4, []RecipeOption{RecipeColocated()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model, err := NewModelFromConfig(config)
			if err != nil {
				t.Fatal(err)
			}
			defer model.Close()
			tensors, err := model.Tensors()
			if err != nil {
				t.Fatal(err)
			}
			ctx, err := NewLocalContext(tc.world)
			if err != nil {
				t.Fatal(err)
			}
			defer ctx.Close()
			src, dst, recipe, err := RecipeLayouts(ctx, string(config), "tp=2,pp=2", "tp=2,dp=2", tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer recipe.Close()
			plan, err := NewPlan(src, dst)
			src.Close()
			dst.Close()
			if err != nil {
				t.Fatal(err)
			}
			defer plan.Close()

			type key struct{ rank, buffer int }
			mem := map[Side]map[key]*Buffer{Src: {}, Dst: {}}
			names := map[key]string{}
			for _, side := range []Side{Src, Dst} {
				ranks, err := recipe.Ranks(side)
				if err != nil {
					t.Fatal(err)
				}
				for _, rank := range ranks {
					bufs, err := recipe.Buffers(side, rank)
					if err != nil {
						t.Fatal(err)
					}
					for _, rb := range bufs {
						b, err := NewBuffer(rb.Bytes)
						if err != nil {
							t.Fatal(err)
						}
						defer b.Close()
						b.Fill(0xFF)
						if err := plan.Bind(side, rank, rb.Buffer, b); err != nil {
							t.Fatal(err)
						}
						mem[side][key{rank, rb.Buffer}] = b
						if side == Dst {
							names[key{rank, rb.Buffer}] = rb.Name
						}
					}
				}
			}
			shards := map[Side][]RecipeShard{}
			for _, side := range []Side{Src, Dst} {
				if shards[side], err = recipe.Shards(side, AllRanks); err != nil {
					t.Fatal(err)
				}
			}
			for _, s := range shards[Src] {
				v := View[uint16](mem[Src][key{s.Rank, s.Buffer}])
				eachElement(t, s, tensors[s.TensorIndex].Shape, func(at, flat int64) {
					v[at] = code(s.TensorIndex, flat)
				})
			}
			if err := plan.Execute(); err != nil {
				t.Fatal(err)
			}

			written := map[key][]bool{}
			checked, bad := 0, 0
			for _, s := range shards[Dst] {
				if s.Scales || tensors[s.TensorIndex].Name != s.Tensor {
					t.Fatalf("shard %+v: not tensor %d", s, s.TensorIndex)
				}
				k := key{s.Rank, s.Buffer}
				v := View[uint16](mem[Dst][k])
				if written[k] == nil {
					written[k] = make([]bool, len(v))
				}
				eachElement(t, s, tensors[s.TensorIndex].Shape, func(at, flat int64) {
					written[k][at] = true
					checked++
					if want := code(s.TensorIndex, flat); v[at] != want && bad < 10 {
						bad++
						t.Errorf("rank %d %s[%d]: %#x, want %#x", s.Rank, s.Tensor, flat, v[at], want)
					}
				})
			}
			// every engine rank holds half of every tensor but the norms
			if want := recipeElements(tensors) * 2; checked != want {
				t.Errorf("%d elements checked, want %d", checked, want)
			}
			for k, b := range mem[Dst] {
				v := View[uint16](b)
				untouched := 0
				for i := range v {
					if written[k] == nil || !written[k][i] {
						untouched++
						if v[i] != 0xFFFF {
							t.Fatalf("rank %d %s: element %d not in a shard was written", k.rank, names[k], i)
						}
					}
				}
				// vLLM pads 50 vocabulary rows to 64, 32 per rank: the
				// second engine rank of each replica has 14 rows to spare
				padded := strings.HasSuffix(names[k], "embed_tokens.weight") || names[k] == "lm_head.weight"
				if untouched != 0 && !(padded && untouched == 14*32) {
					t.Errorf("rank %d %s: %d elements in no shard", k.rank, names[k], untouched)
				}
			}
		})
	}
}

// recipeElements is the number of elements an engine of tp 2 holds per
// replica: every tensor, the replicated norms twice.
func recipeElements(tensors []TensorInfo) int {
	n := 0
	for _, ti := range tensors {
		e := 1
		for _, d := range ti.Shape {
			e *= int(d)
		}
		if strings.HasSuffix(ti.Name, "norm.weight") {
			e *= 2
		}
		n += e
	}
	return n
}

// Shards say which rows each buffer holds: vLLM's padded vocabulary on
// each engine rank, and one rank's shards are its part of every rank's.
func TestRecipeShards(t *testing.T) {
	m, err := NewModelFromConfig(tinyConfig(t, 200))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	rc, err := NewRecipe(m, "tp=2", "tp=2")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	first, err := rc.Get(RecipeInferFirstRank)
	if err != nil || first != 2 {
		t.Fatalf("first engine rank %d, %v", first, err)
	}
	all, err := rc.Shards(Dst, AllRanks)
	if err != nil {
		t.Fatal(err)
	}
	var embed []RecipeShard
	for _, s := range all {
		if s.Tensor == "model.embed_tokens.weight" {
			embed = append(embed, s)
		}
	}
	// 200 rows padded to 256: 128 per rank, the second holds 72 of them
	want := []RecipeShard{
		{Tensor: "model.embed_tokens.weight", Rank: 2, Offset: []int64{0, 0}, Extent: []int64{128, 32}, Strides: []int64{32, 1}, DType: BF16},
		{Tensor: "model.embed_tokens.weight", Rank: 3, Offset: []int64{128, 0}, Extent: []int64{72, 32}, Strides: []int64{32, 1}, DType: BF16},
	}
	for i := range embed {
		embed[i].Buffer, embed[i].ByteOffset = 0, 0
	}
	if !reflect.DeepEqual(embed, want) {
		t.Errorf("embed_tokens shards %+v", embed)
	}
	every, err := rc.Shards(Src, AllRanks)
	if err != nil {
		t.Fatal(err)
	}
	mine, err := rc.Shards(Src, 1)
	if err != nil {
		t.Fatal(err)
	}
	var theirs []RecipeShard
	for _, s := range every {
		if s.Rank == 1 {
			theirs = append(theirs, s)
		}
	}
	if len(mine) == 0 || !reflect.DeepEqual(mine, theirs) {
		t.Errorf("rank 1's shards: %d, of all ranks' %d", len(mine), len(theirs))
	}
	bufs, err := rc.Buffers(Src, 0)
	if err != nil || len(bufs) != 1 || bufs[0].Name != "param_buffer.bf16" {
		t.Errorf("trainer buffers %+v, %v", bufs, err)
	}
}

// An fp8 engine: each quantized parameter's block scales are a buffer of
// their own, named as vLLM names them; one rank's layouts alone.
func TestRecipeSettingsAndOneRank(t *testing.T) {
	ctx, err := NewLocalContext(2)
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Close()
	src, dst, rc, err := RecipeLayouts(ctx, string(tinyConfig(t, 50)), "tp=1", "tp=1",
		RecipeSetting(RecipeInferDType, int64(F8E4M3)), RecipeSetting(RecipeFP8BlockRows, 16),
		RecipeSetting(RecipeFP8BlockCols, 16), RecipeRank(1))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	defer src.Close()
	defer dst.Close()
	if n, err := src.NumShards(); err != nil || n != 0 {
		t.Errorf("rank 1 is an engine rank, yet %d trainer shards (%v)", n, err)
	}
	if n, err := dst.NumShards(); err != nil || n == 0 {
		t.Errorf("%d engine shards (%v)", n, err)
	}
	if d, err := rc.Get(RecipeInferDType); err != nil || DType(d) != F8E4M3 {
		t.Errorf("engine dtype %v, %v", DType(d), err)
	}
	bufs, err := rc.Buffers(Dst, 1)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, b := range bufs {
		if b.Name == "model.layers.0.self_attn.qkv_proj.weight_scale_inv" {
			// q 32 rows (2 blocks), k and v 16 (1 each), of 32 columns (2)
			found = b.Bytes == (2+1+1)*2*4
		}
	}
	if !found {
		t.Errorf("no qkv_proj scales of 32 bytes in %+v", bufs)
	}
}

// wantError checks that err is a *Error of the status of target, with a
// message that contains part.
func wantError(t *testing.T, err error, target *Error, part string) {
	t.Helper()
	var re *Error
	if !errors.As(err, &re) || !errors.Is(err, target) {
		t.Fatalf("got %v, want %s", err, target.Name)
	}
	if re.Message == "" || !strings.Contains(re.Message, part) {
		t.Errorf("%s: message %q does not say %q", re.Name, re.Message, part)
	}
}

func TestRecipeBadInput(t *testing.T) {
	_, err := NewModelFromCatalog("no-such-model")
	wantError(t, err, ErrInvalidArgument, "DeepSeek-V3") // the message lists the catalog
	_, err = NewModelFromConfig([]byte(`{"model_type": "gpt2"}`))
	wantError(t, err, ErrUnsupported, "gpt2")
	_, err = NewModelFromConfig([]byte(`{"model_type": "llama", "hidden_size": "x"}`))
	wantError(t, err, ErrInvalidArgument, "hidden_size")
	_, err = NewModelFromConfig([]byte("{\n  \"model_type\": llama}"))
	wantError(t, err, ErrInvalidArgument, "line 2")
	_, err = NewModelFromConfig([]byte("{\"model_type\": \"llama\"}\x00"))
	wantError(t, err, ErrInvalidArgument, "NUL")
	_, err = NewModelFromFile(configDir + "no-such-config.json")
	wantError(t, err, ErrInvalidArgument, "no-such-config.json")

	m, err := NewModelFromConfig(tinyConfig(t, 50))
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Tensor(10000)
	wantError(t, err, ErrInvalidArgument, "10000")
	_, err = m.Get(ModelParam(999))
	wantError(t, err, ErrBadParam, "999")
	_, err = NewRecipe(m, "tp=3", "tp=1")
	wantError(t, err, ErrInvalidArgument, "tp=3")
	_, err = NewRecipe(m, "tp=2,bogus=2", "tp=1")
	wantError(t, err, ErrInvalidArgument, "bogus")
	_, err = NewRecipe(nil, "tp=1", "tp=1")
	wantError(t, err, ErrNullPointer, "model")

	rc, err := NewRecipe(m, "tp=2", "tp=1,dp=2")
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	_, err = NewRecipe(m, "tp=1", "tp=1")
	if !errors.Is(err, ErrClosed) {
		t.Errorf("a recipe of a closed model: %v", err)
	}
	if n, err := rc.Get(RecipeTrainTP); err != nil || n != 2 {
		t.Errorf("a recipe outlives its model: tp %d, %v", n, err)
	}
	err = rc.Set(RecipeParam(999), 1)
	wantError(t, err, ErrBadParam, "999")
	_, err = rc.Get(RecipeParam(999))
	wantError(t, err, ErrBadParam, "999")
	err = rc.Set(RecipeTrainTP, 4) // a size
	wantError(t, err, ErrBadParam, "read-only")
	err = rc.Set(RecipeFP8BlockRows, 0)
	wantError(t, err, ErrBadParam, "")
	_, err = rc.Buffers(Dst, 99)
	wantError(t, err, ErrInvalidArgument, "99")
	_, err = rc.Shards(Dst, 99)
	wantError(t, err, ErrInvalidArgument, "99")

	ctx, err := NewLocalContext(3) // one rank short of the recipe's 4
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Close()
	l, err := ctx.NewLayout()
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	err = rc.AddInfer(l, AllRanks) // engine rank 3 in a context of 3 ranks
	wantError(t, err, ErrUnknownRank, "rank 3 outside")
	if n, _ := l.NumTensors(); n != 0 {
		t.Errorf("a failed add left %d tensors", n)
	}
	err = rc.AddTrain(l, -5)
	wantError(t, err, ErrInvalidArgument, "-5")
	err = rc.AddTrain(nil, AllRanks)
	wantError(t, err, ErrNullPointer, "layout")

	_, _, _, err = RecipeLayouts(ctx, "no-such-model", "tp=1", "tp=1")
	wantError(t, err, ErrInvalidArgument, "no-such-model")
	_, _, _, err = RecipeLayouts(ctx, "llama8b", "tp=1", "tp=1", RecipeSetting(RecipeParam(999), 1))
	wantError(t, err, ErrBadParam, "999")

	rc.Close()
	rc.Close()
	_, err = rc.Get(RecipeTrainTP)
	if !errors.Is(err, ErrClosed) {
		t.Errorf("Get on a closed recipe: %v", err)
	}
	if err := rc.AddTrain(l, AllRanks); !errors.Is(err, ErrClosed) {
		t.Errorf("AddTrain of a closed recipe: %v", err)
	}
}

// Models and recipes dropped without Close are freed by their finalizers,
// once each.
func TestRecipeFinalizers(t *testing.T) {
	for i := 0; i < 5; i++ {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	base := [2]int64{live.models.Load(), live.recipes.Load()}
	func() {
		for i := 0; i < 10; i++ {
			m, err := NewModelFromCatalog("qwen3-30b")
			if err != nil {
				t.Fatal(err)
			}
			rc, err := NewRecipe(m, "tp=4,ep=8", "tp=4,dp=2,ep=8")
			if err != nil {
				t.Fatal(err)
			}
			if i%2 == 0 {
				m.Close()
			}
			if i%3 == 0 {
				rc.Close()
			}
		}
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		runtime.GC()
		got := [2]int64{live.models.Load(), live.recipes.Load()}
		if got == base {
			return
		}
		if got[0] < base[0] || got[1] < base[1] {
			t.Fatalf("freed twice: %v live, want %v", got, base)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v live, want %v", got, base)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
