// SPDX-License-Identifier: Apache-2.0

package reshard

// Models of the recipes (reshard/recipes.h): a model's parameter tensors,
// from a Hugging Face config.json or the built-in catalog. Recipe
// (recipes.go) shards them the way trainers and engines do.

import (
	"bytes"
	"os"
	"runtime"
	"strings"
	"sync"

	"libreshard.dev/reshard/internal/rsw"
)

// ModelParam names a fact of a Model (rs_model_param), read with
// Model.Get. Since 0.6.
type ModelParam int

// The facts of a model, with the names and values of recipes.h.
const (
	ModelHiddenSize          = ModelParam(rsw.RS_MODEL_HIDDEN_SIZE)
	ModelNumLayers           = ModelParam(rsw.RS_MODEL_NUM_LAYERS)
	ModelNumHeads            = ModelParam(rsw.RS_MODEL_NUM_HEADS)
	ModelNumKVHeads          = ModelParam(rsw.RS_MODEL_NUM_KV_HEADS)
	ModelHeadDim             = ModelParam(rsw.RS_MODEL_HEAD_DIM)
	ModelIntermediateSize    = ModelParam(rsw.RS_MODEL_INTERMEDIATE_SIZE) // dense MLP; 0: none
	ModelMoEIntermediateSize = ModelParam(rsw.RS_MODEL_MOE_INTERMEDIATE_SIZE)
	ModelNumExperts          = ModelParam(rsw.RS_MODEL_NUM_EXPERTS) // routed experts; 0: dense
	ModelNumSharedExperts    = ModelParam(rsw.RS_MODEL_NUM_SHARED_EXPERTS)
	ModelFirstMoELayer       = ModelParam(rsw.RS_MODEL_FIRST_MOE_LAYER) // layers below are dense
	ModelVocabSize           = ModelParam(rsw.RS_MODEL_VOCAB_SIZE)
	ModelQKNorm              = ModelParam(rsw.RS_MODEL_QK_NORM) // 1: q_norm and k_norm
	ModelMLA                 = ModelParam(rsw.RS_MODEL_MLA)     // 1: DeepSeek MLA attention
	ModelQLoRARank           = ModelParam(rsw.RS_MODEL_Q_LORA_RANK)
	ModelKVLoRARank          = ModelParam(rsw.RS_MODEL_KV_LORA_RANK)
	ModelQKNopeHeadDim       = ModelParam(rsw.RS_MODEL_QK_NOPE_HEAD_DIM)
	ModelQKRopeHeadDim       = ModelParam(rsw.RS_MODEL_QK_ROPE_HEAD_DIM)
	ModelVHeadDim            = ModelParam(rsw.RS_MODEL_V_HEAD_DIM)
	ModelPublishedParams     = ModelParam(rsw.RS_MODEL_PUBLISHED_PARAMS) // the published count; 0: none
	ModelTiedEmbeddings      = ModelParam(rsw.RS_MODEL_TIED_EMBEDDINGS)  // 1: no lm_head of its own
	ModelNumFused            = ModelParam(rsw.RS_MODEL_NUM_FUSED)        // fused engine buffers per rank
)

// Catalog is the names of the built-in catalog's models ("DeepSeek-V3",
// "Llama-3.1-8B", ...), for NewModelFromCatalog. Since 0.6.
func Catalog() []string {
	n := rsw.Rsw_model_catalog_count()
	out := make([]string, 0, n)
	for i := 0; i < n; i++ {
		out = append(out, rsw.Rsw_model_catalog_name(i))
	}
	return out
}

// Model is a model's parameter tensors, in a fixed order (experts stacked
// per layer, as trainers hold them), named the Hugging Face way. It is a
// C object: Close frees it (a finalizer does for a Model dropped without
// Close). Its methods may be called from several goroutines. A Recipe
// keeps a copy of its model, so a Model may be closed once its recipes
// are made. Since 0.6.
type Model struct {
	mu sync.RWMutex           // held for writing only by Close
	h  rsw.Struct_SS_rs_model // nil once closed
}

// TensorInfo is one parameter tensor of a Model.
type TensorInfo struct {
	Name  string  // the Hugging Face name, "model.layers.0.self_attn.q_proj.weight"
	DType DType   // the model's dtype of it (BF16 for most checkpoints)
	Shape []int64 // its shape
}

// NewModelFromConfig reads a model from the text of a Hugging Face
// config.json. Known model_type values: "llama", "qwen3", "qwen3_moe",
// "deepseek_v3"; keys the recipes do not use are skipped. Errors:
// ErrInvalidArgument (not JSON, with line and column; a key of the wrong
// type or out of range, named; a NUL byte in the text), ErrUnsupported
// (an unknown model_type or architecture, or a setting the recipes cannot
// place, named), ErrOverflow, ErrNoMemory. The caller closes the Model.
// Since 0.6.
func NewModelFromConfig(config []byte) (*Model, error) {
	const op = "NewModelFromConfig"
	if i := bytes.IndexByte(config, 0); i >= 0 {
		return nil, newError(op, StatusInvalidArgument,
			"the config holds a NUL byte at byte %d", i)
	}
	return newModel(op, func(r rsw.Rsw_result) {
		rsw.Rsw_model_from_config(r, string(config))
	})
}

// NewModelFromFile reads a model from a config.json file, as
// NewModelFromConfig; a file that cannot be read gives ErrInvalidArgument
// naming it and saying why. Since 0.6.
func NewModelFromFile(path string) (*Model, error) {
	const op = "NewModelFromFile"
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, newError(op, StatusInvalidArgument, "%v", err)
	}
	m, err := NewModelFromConfig(text)
	if e, ok := err.(*Error); ok {
		e.Op = op
		e.Message = path + ": " + e.Message
	}
	return m, err
}

// NewModelFromCatalog gives a model of the built-in catalog (Catalog), by
// name or alias ("dsv3", "qwen3-235b", "llama8b"), case-insensitive. An
// unknown name gives ErrInvalidArgument, whose message lists the catalog.
// Since 0.6.
func NewModelFromCatalog(name string) (*Model, error) {
	const op = "NewModelFromCatalog"
	if err := cName(op, name); err != nil {
		return nil, err
	}
	return newModel(op, func(r rsw.Rsw_result) {
		rsw.Rsw_model_from_catalog(r, name)
	})
}

// openModel reads config as RecipeLayouts takes it: JSON text (it starts
// with '{'), else the path of a file that exists, else a catalog name.
func openModel(config string) (*Model, error) {
	if strings.HasPrefix(strings.TrimSpace(config), "{") {
		return NewModelFromConfig([]byte(config))
	}
	if st, err := os.Stat(config); err == nil && !st.IsDir() {
		return NewModelFromFile(config)
	}
	return NewModelFromCatalog(config)
}

func newModel(op string, create func(r rsw.Rsw_result)) (*Model, error) {
	r, err := newResult(op)
	if err != nil {
		return nil, err
	}
	defer rsw.Rsw_result_free(r)
	create(r)
	if err := resultError(op, r); err != nil {
		return nil, err
	}
	live.models.Add(1)
	m := &Model{h: rsw.Rsw_result_model(r)}
	runtime.SetFinalizer(m, (*Model).Close)
	return m, nil
}

// do runs f with the model read-locked and a fresh result; it returns the
// error the result records.
func (m *Model) do(op string, f func(r rsw.Rsw_result, h rsw.Struct_SS_rs_model)) (int64, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.h == nil {
		return 0, closedError(op, "model")
	}
	return withResult(op, func(r rsw.Rsw_result) error {
		f(r, m.h)
		return nil
	})
}

// Name is the model's name: the catalog's, or the config's
// "_name_or_path", or its model_type; "" once closed.
func (m *Model) Name() string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.h == nil {
		return ""
	}
	return rsw.Rsw_model_name(m.h)
}

// NumTensors is the number of parameter tensors.
func (m *Model) NumTensors() (int, error) {
	n, err := m.do("Model.NumTensors", func(r rsw.Rsw_result, h rsw.Struct_SS_rs_model) {
		rsw.Rsw_model_num_tensors(r, h)
	})
	return int(n), err
}

// Tensor is tensor i of [0, NumTensors()); another i gives
// ErrInvalidArgument.
func (m *Model) Tensor(i int) (TensorInfo, error) {
	const op = "Model.Tensor"
	if err := cInts(op, []string{"tensor"}, i); err != nil {
		return TensorInfo{}, err
	}
	v, err := newInts(op, []int64{})
	if err != nil {
		return TensorInfo{}, err
	}
	defer freeInts(v)
	var t TensorInfo
	_, err = m.do(op, func(r rsw.Rsw_result, h rsw.Struct_SS_rs_model) {
		t.Name = rsw.Rsw_model_tensor_info(r, h, i, v)
		t.DType = DType(r.GetValue())
	})
	if err != nil {
		return TensorInfo{}, err
	}
	t.Shape = intsSlice(v)
	return t, nil
}

// Tensors is every parameter tensor, in the model's order.
func (m *Model) Tensors() ([]TensorInfo, error) {
	n, err := m.NumTensors()
	if err != nil {
		return nil, err
	}
	out := make([]TensorInfo, n)
	for i := range out {
		if out[i], err = m.Tensor(i); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Get reads a fact of the model; an unknown p gives ErrBadParam.
func (m *Model) Get(p ModelParam) (int64, error) {
	const op = "Model.Get"
	if err := cInts(op, []string{"parameter"}, int(p)); err != nil {
		return 0, err
	}
	return m.do(op, func(r rsw.Rsw_result, h rsw.Struct_SS_rs_model) {
		rsw.Rsw_model_get(r, h, int(p))
	})
}

// Close frees the model; recipes made from it stay valid. Closing twice
// does nothing.
func (m *Model) Close() error {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.h == nil {
		return nil
	}
	runtime.SetFinalizer(m, nil)
	rsw.Rsw_model_destroy(m.h)
	m.h = nil
	live.models.Add(-1)
	return nil
}
