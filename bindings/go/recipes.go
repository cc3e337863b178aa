// SPDX-License-Identifier: Apache-2.0

package reshard

// Recipes (reshard/recipes.h): how a Megatron-style trainer and a
// vLLM-style engine shard every parameter of a Model, as the two layouts
// of a plan, with the engine's own buffer names and fused buffers.

import (
	"runtime"
	"sync"

	"libreshard.dev/reshard/internal/rsw"
)

// RecipeParam names a size or setting of a Recipe (rs_recipe_param):
// sizes are read with Recipe.Get, settings (RecipeTrainDType and after)
// also changed with Recipe.Set. Since 0.6.
type RecipeParam int

// The sizes and settings, with the names and values of recipes.h.
const (
	RecipeTrainTP    = RecipeParam(rsw.RS_RECIPE_TRAIN_TP)
	RecipeTrainCP    = RecipeParam(rsw.RS_RECIPE_TRAIN_CP)
	RecipeTrainEP    = RecipeParam(rsw.RS_RECIPE_TRAIN_EP)
	RecipeTrainETP   = RecipeParam(rsw.RS_RECIPE_TRAIN_ETP)
	RecipeTrainPP    = RecipeParam(rsw.RS_RECIPE_TRAIN_PP)
	RecipeTrainDP    = RecipeParam(rsw.RS_RECIPE_TRAIN_DP)  // dense data parallel, derived
	RecipeTrainEDP   = RecipeParam(rsw.RS_RECIPE_TRAIN_EDP) // expert data parallel; 0: dense
	RecipeTrainFSDP  = RecipeParam(rsw.RS_RECIPE_TRAIN_FSDP)
	RecipeTrainWorld = RecipeParam(rsw.RS_RECIPE_TRAIN_WORLD)
	RecipeInferTP    = RecipeParam(rsw.RS_RECIPE_INFER_TP)
	RecipeInferDP    = RecipeParam(rsw.RS_RECIPE_INFER_DP)
	RecipeInferEP    = RecipeParam(rsw.RS_RECIPE_INFER_EP)
	RecipeInferWorld = RecipeParam(rsw.RS_RECIPE_INFER_WORLD)

	// Settings (default in brackets).
	RecipeTrainDType     = RecipeParam(rsw.RS_RECIPE_TRAIN_DTYPE)      // [the model's BF16] or F32, as int64(dtype)
	RecipeInferDType     = RecipeParam(rsw.RS_RECIPE_INFER_DTYPE)      // [the model's BF16], F32, F8E4M3
	RecipeFP8BlockRows   = RecipeParam(rsw.RS_RECIPE_FP8_BLOCK_ROWS)   // [128], 1 .. 65536
	RecipeFP8BlockCols   = RecipeParam(rsw.RS_RECIPE_FP8_BLOCK_COLS)   // [128], 1 .. 65536
	RecipeFP8ScaleRule   = RecipeParam(rsw.RS_RECIPE_FP8_SCALE_RULE)   // a ScaleRule [ScaleAMAX]
	RecipeInferFirstRank = RecipeParam(rsw.RS_RECIPE_INFER_FIRST_RANK) // [train world]; 0: colocated
	// [1] Megatron's make_vocab_size_divisible_by: embed_tokens and
	// lm_head rows padded to a multiple of it x train tp; 1: no padding.
	RecipeTrainVocabPad = RecipeParam(rsw.RS_RECIPE_TRAIN_VOCAB_PAD)
	// [64] the engine's vocabulary padding (vLLM's and SGLang's
	// DEFAULT_VOCAB_PADDING_SIZE).
	RecipeInferVocabPad = RecipeParam(rsw.RS_RECIPE_INFER_VOCAB_PAD)
)

// Recipe is a Model with a trainer and an engine parallelism: it adds the
// trainer's shards to a source layout (AddTrain) and the engine's to a
// destination layout (AddInfer), and says which buffer of which rank holds
// what (Buffers, Shards). Trainer ranks are 0 .. train world - 1, engine
// ranks follow them (RecipeInferFirstRank; 0 when colocated).
//
// It is a C object: Close frees it (a finalizer does for a Recipe dropped
// without Close). Its methods may be called from several goroutines; Set
// waits for the others. Since 0.6.
type Recipe struct {
	mu sync.RWMutex            // held for writing by Set and Close
	h  rsw.Struct_SS_rs_recipe // nil once closed
}

// RecipeBuffer is one buffer a rank of a recipe's side holds: bind memory
// of Bytes bytes as buffer Buffer of rank Rank (Plan.Bind).
type RecipeBuffer struct {
	Rank   int    // the layout rank
	Buffer int    // the buffer number, for Plan.Bind
	Name   string // the framework's name: the engine's parameter ("model.layers.0.self_attn.qkv_proj.weight"), the trainer's "param_buffer.bf16"
	Bytes  int64  // its size in bytes
}

// RecipeShard is one shard a recipe adds: the box [Offset, Offset+Extent)
// of tensor Tensor (its block scales when Scales: the layout's tensor
// Tensor+"_scale_inv", in block coordinates) on layout rank Rank, in
// buffer Buffer from byte ByteOffset on, with element Strides, held in
// DType.
type RecipeShard struct {
	Tensor      string // the Hugging Face name of the tensor
	TensorIndex int    // its index in the model (Model.Tensor)
	Scales      bool
	Rank        int
	Offset      []int64
	Extent      []int64
	Buffer      int
	ByteOffset  int64
	Strides     []int64 // in elements
	DType       DType
}

// NewRecipe shards model by a trainer spec ("tp=2,pp=2": keys tp cp ep
// etp pp dp edp gpus fsdp vocab_pad) and an engine spec ("tp=4,dp=2": keys
// tp dp ep gpus vocab_pad); sizes not given are derived, and every size is
// checked against the model. The recipe keeps its own copy of the model.
// Errors: ErrInvalidArgument (a bad spec or a size that does not fit the
// model: the message names the key and the model's figure), ErrNoMemory,
// and a *Error wrapping ErrClosed for a closed model. The caller closes
// the Recipe. Since 0.6.
func NewRecipe(model *Model, train, infer string) (*Recipe, error) {
	const op = "NewRecipe"
	if model == nil {
		return nil, newError(op, StatusNullPointer, "no model")
	}
	if err := cName(op, train); err != nil {
		return nil, err
	}
	if err := cName(op, infer); err != nil {
		return nil, err
	}
	var h rsw.Struct_SS_rs_recipe
	_, err := model.do(op, func(r rsw.Rsw_result, m rsw.Struct_SS_rs_model) {
		rsw.Rsw_recipe_create(r, m, train, infer)
		if r.GetStatus() == 0 {
			h = rsw.Rsw_result_recipe(r)
		}
	})
	if err != nil {
		return nil, err
	}
	live.recipes.Add(1)
	rc := &Recipe{h: h}
	runtime.SetFinalizer(rc, (*Recipe).Close)
	return rc, nil
}

// do runs f with the recipe locked (for reading, or for writing when
// write) and a fresh result; it returns f's error, else the result's.
func (rc *Recipe) do(op string, write bool, f func(r rsw.Rsw_result, h rsw.Struct_SS_rs_recipe) error) (int64, error) {
	if write {
		rc.mu.Lock()
		defer rc.mu.Unlock()
	} else {
		rc.mu.RLock()
		defer rc.mu.RUnlock()
	}
	if rc.h == nil {
		return 0, closedError(op, "recipe")
	}
	return withResult(op, func(r rsw.Rsw_result) error { return f(r, rc.h) })
}

// Get reads a size or setting; an unknown p gives ErrBadParam.
func (rc *Recipe) Get(p RecipeParam) (int64, error) {
	const op = "Recipe.Get"
	if err := cInts(op, []string{"parameter"}, int(p)); err != nil {
		return 0, err
	}
	return rc.do(op, false, func(r rsw.Rsw_result, h rsw.Struct_SS_rs_recipe) error {
		rsw.Rsw_recipe_get(r, h, int(p))
		return nil
	})
}

// Set changes a setting (RecipeTrainDType and after; dtypes as
// int64(reshard.F8E4M3)). An unknown or read-only parameter, or a value
// outside its range, gives ErrBadParam and changes nothing.
func (rc *Recipe) Set(p RecipeParam, value int64) error {
	const op = "Recipe.Set"
	if err := cInts(op, []string{"parameter"}, int(p)); err != nil {
		return err
	}
	_, err := rc.do(op, true, func(r rsw.Rsw_result, h rsw.Struct_SS_rs_recipe) error {
		rsw.Rsw_recipe_set(r, h, int(p), value)
		return nil
	})
	return err
}

// add runs one of the add calls on layout l, with the recipe read-locked
// and then the layout's context locked.
func (rc *Recipe) add(op string, l *Layout, rank int,
	call func(r rsw.Rsw_result, l rsw.Struct_SS_rs_layout, h rsw.Struct_SS_rs_recipe, rank int)) error {
	if l == nil {
		return newError(op, StatusNullPointer, "no layout")
	}
	if err := cInts(op, []string{"rank"}, rank); err != nil {
		return err
	}
	_, err := rc.do(op, false, func(_ rsw.Rsw_result, h rsw.Struct_SS_rs_recipe) error {
		_, err := l.do(op, func(r rsw.Rsw_result, lh rsw.Struct_SS_rs_layout) error {
			call(r, lh, h, rank)
			return nil
		})
		return err
	})
	return err
}

// AddTrain declares every tensor of the recipe in layout l with the
// trainer's dtypes and adds the trainer's shards: every rank's (rank
// AllRanks), or only rank's (a rank that holds nothing on this side adds
// the declarations alone: what each process adds before
// Layout.Allgather). The layout's context must have room for the ranks.
// On failure the layout is left as it was. Errors: ErrInvalidArgument (a
// negative rank other than AllRanks), and those of Layout.AddTensor and
// Layout.AddShard (a rank outside the context's).
func (rc *Recipe) AddTrain(l *Layout, rank int) error {
	return rc.add("Recipe.AddTrain", l, rank, func(r rsw.Rsw_result, lh rsw.Struct_SS_rs_layout, h rsw.Struct_SS_rs_recipe, rank int) {
		rsw.Rsw_recipe_add_train(r, lh, h, rank)
	})
}

// AddInfer is AddTrain for the engine: every tensor with the engine's
// dtypes (fp8 values with their block-scale tensors), and the engine's
// shards at their fused byte offsets; rank is a layout rank
// (RecipeInferFirstRank + engine rank) or AllRanks.
func (rc *Recipe) AddInfer(l *Layout, rank int) error {
	return rc.add("Recipe.AddInfer", l, rank, func(r rsw.Rsw_result, lh rsw.Struct_SS_rs_layout, h rsw.Struct_SS_rs_recipe, rank int) {
		rsw.Rsw_recipe_add_infer(r, lh, h, rank)
	})
}

// Ranks is the layout ranks of one side, in order: 0 .. train world - 1
// for Src, RecipeInferFirstRank onwards for Dst.
func (rc *Recipe) Ranks(side Side) ([]int, error) {
	var first, n int64
	var err error
	switch side {
	case Src:
		n, err = rc.Get(RecipeTrainWorld)
	case Dst:
		if first, err = rc.Get(RecipeInferFirstRank); err == nil {
			n, err = rc.Get(RecipeInferWorld)
		}
	default:
		return nil, newError("Recipe.Ranks", StatusInvalidArgument, "unknown side %d", int(side))
	}
	if err != nil {
		if e, ok := err.(*Error); ok {
			e.Op = "Recipe.Ranks"
		}
		return nil, err
	}
	out := make([]int, n)
	for i := range out {
		out[i] = int(first) + i
	}
	return out, nil
}

// Buffers is the buffers layout rank rank holds on side, by buffer number,
// with the framework's name and size of each; buffers the rank leaves
// empty are left out. A rank outside the side's gives ErrInvalidArgument.
func (rc *Recipe) Buffers(side Side, rank int) ([]RecipeBuffer, error) {
	const op = "Recipe.Buffers"
	if err := cInts(op, []string{"side", "rank"}, int(side), rank); err != nil {
		return nil, err
	}
	var out []RecipeBuffer
	_, err := rc.do(op, false, func(r rsw.Rsw_result, h rsw.Struct_SS_rs_recipe) error {
		rsw.Rsw_recipe_num_buffers(r, h, int(side))
		if err := resultError(op, r); err != nil {
			return err
		}
		n := int(r.GetValue())
		for b := 0; b < n; b++ {
			name := rsw.Rsw_recipe_buffer(r, h, int(side), rank, b)
			if err := resultError(op, r); err != nil {
				return err
			}
			if nbytes := r.GetValue(); nbytes > 0 {
				out = append(out, RecipeBuffer{Rank: rank, Buffer: b, Name: name, Bytes: nbytes})
			}
		}
		return nil
	})
	return out, err
}

// Shards is the shards side adds for layout rank rank (AllRanks: every
// rank's), in the order the layouts get them: which box of which tensor
// each buffer holds, and where.
func (rc *Recipe) Shards(side Side, rank int) ([]RecipeShard, error) {
	const op = "Recipe.Shards"
	if err := cInts(op, []string{"side", "rank"}, int(side), rank); err != nil {
		return nil, err
	}
	fields, err := newInts(op, []int64{})
	if err != nil {
		return nil, err
	}
	defer freeInts(fields)
	var out []RecipeShard
	_, err = rc.do(op, false, func(r rsw.Rsw_result, h rsw.Struct_SS_rs_recipe) error {
		rsw.Rsw_recipe_num_shards(r, h, int(side), rank)
		if err := resultError(op, r); err != nil {
			return err
		}
		n := r.GetValue()
		out = make([]RecipeShard, 0, n)
		for i := int64(0); i < n; i++ {
			name := rsw.Rsw_recipe_shard(r, h, int(side), rank, i, fields)
			if err := resultError(op, r); err != nil {
				return err
			}
			out = append(out, recipeShard(name, intsSlice(fields)))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// recipeShard reads the fields of rsw_recipe_shard: tensor, scales, rank,
// buffer, byte offset, dtype, ndim, then ndim offsets, extents, strides.
func recipeShard(name string, f []int64) RecipeShard {
	nd := int(f[6])
	box := f[7:]
	return RecipeShard{
		Tensor: name, TensorIndex: int(f[0]), Scales: f[1] != 0,
		Rank: int(f[2]), Buffer: int(f[3]), ByteOffset: f[4], DType: DType(f[5]),
		Offset:  append([]int64(nil), box[:nd]...),
		Extent:  append([]int64(nil), box[nd:2*nd]...),
		Strides: append([]int64(nil), box[2*nd:3*nd]...),
	}
}

// Close frees the recipe. Closing twice does nothing.
func (rc *Recipe) Close() error {
	if rc == nil {
		return nil
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.h == nil {
		return nil
	}
	runtime.SetFinalizer(rc, nil)
	rsw.Rsw_recipe_destroy(rc.h)
	rc.h = nil
	live.recipes.Add(-1)
	return nil
}

// RecipeOption changes what RecipeLayouts does.
type RecipeOption func(*recipeOptions)

type recipeOptions struct {
	rank      int
	colocated bool
	settings  []recipeSetting
}

type recipeSetting struct {
	p RecipeParam
	v int64
}

// RecipeRank makes RecipeLayouts add only layout rank rank's shards (every
// tensor is still declared), as each process does before
// Layout.Allgather. The default is AllRanks.
func RecipeRank(rank int) RecipeOption {
	return func(o *recipeOptions) { o.rank = rank }
}

// RecipeColocated puts the engine on the trainer's ranks, from 0
// (RecipeInferFirstRank 0).
func RecipeColocated() RecipeOption {
	return func(o *recipeOptions) { o.colocated = true }
}

// RecipeSetting makes RecipeLayouts call Recipe.Set(p, value) before it
// adds anything: RecipeSetting(reshard.RecipeInferDType,
// int64(reshard.F8E4M3)) for an fp8 engine, RecipeSetting(
// reshard.RecipeTrainVocabPad, 128) for Megatron-LM's vocabulary padding.
// Settings apply in order, after RecipeColocated.
func RecipeSetting(p RecipeParam, value int64) RecipeOption {
	return func(o *recipeOptions) { o.settings = append(o.settings, recipeSetting{p, value}) }
}

// RecipeLayouts makes the trainer's (src) and the engine's (dst) layouts
// of a model on ctx, and the recipe that says which buffers to bind
// (Recipe.Buffers). config is the JSON text of a config.json (it starts
// with '{'), the path of one, or a catalog name (Catalog); train and
// infer are NewRecipe's specs. The caller closes all three; on failure
// nothing is left open. Since 0.6.
//
//	src, dst, recipe, err := reshard.RecipeLayouts(ctx, "config.json", "tp=2,pp=2", "tp=4,dp=2")
func RecipeLayouts(ctx *Context, config, train, infer string, opts ...RecipeOption) (src, dst *Layout, recipe *Recipe, err error) {
	const op = "RecipeLayouts"
	if ctx == nil {
		return nil, nil, nil, newError(op, StatusNullPointer, "no context")
	}
	o := recipeOptions{rank: AllRanks}
	for _, f := range opts {
		f(&o)
	}
	model, err := openModel(config)
	if err != nil {
		return nil, nil, nil, err
	}
	recipe, err = NewRecipe(model, train, infer)
	model.Close()
	if err != nil {
		return nil, nil, nil, err
	}
	defer func() {
		if err != nil {
			src.Close()
			dst.Close()
			recipe.Close()
			src, dst, recipe = nil, nil, nil
		}
	}()
	if o.colocated {
		if err = recipe.Set(RecipeInferFirstRank, 0); err != nil {
			return
		}
	}
	for _, s := range o.settings {
		if err = recipe.Set(s.p, s.v); err != nil {
			return
		}
	}
	if src, err = ctx.NewLayout(); err != nil {
		return
	}
	if dst, err = ctx.NewLayout(); err != nil {
		return
	}
	if err = recipe.AddTrain(src, o.rank); err != nil {
		return
	}
	err = recipe.AddInfer(dst, o.rank)
	return
}
