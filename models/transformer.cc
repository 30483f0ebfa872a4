#include "models/transformer.h"

#include <cmath>
#include <functional>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace meshrt {
namespace models {
namespace {

struct LayerWeights {
  TensorRef ln1_scale, ln1_bias, q, k, v, o, ln2_scale, ln2_bias, w1, w2;
};

struct Weights {
  TensorRef embedding, positions;
  std::vector<LayerWeights> layers;
  TensorRef final_scale, final_bias, output;
  std::vector<TensorRef> all;  // creation order
};

Initializer Normal(float stddev, int64_t seed) {
  Initializer init;
  init.kind = "normal";
  init.stddev = stddev;
  init.seed = seed;
  return init;
}

Initializer Fill(const std::string& kind) {
  Initializer init;
  init.kind = kind;
  return init;
}

float InvSqrt(int64_t n) { return 1.0f / std::sqrt(static_cast<float>(n)); }

// Makes one weight tensor: a Variable in the model's graphs, a placeholder in a decoding loop's
// body.
using MakeWeight =
    std::function<TensorRef(const std::string& name, const Shape& shape, const Initializer& init)>;

// The weights in creation order (BuildTransformer's list), each made by `make`.
Weights MakeWeights(const TransformerOptions& o, const MakeWeight& make) {
  const Dim d_model{"d_model", o.d_model}, heads{"heads", o.heads}, d_kv{"d_kv", o.d_kv},
      d_ff{"d_ff", o.d_ff}, vocab{"vocab", o.vocab}, length{"length", o.length};
  const bool layer_norm = o.norm == "layer";
  Weights w;
  auto var = [&](const std::string& name, const Shape& shape, const Initializer& init) {
    TensorRef v = make(name, shape, init);
    w.all.push_back(v);
    return v;
  };
  const float s = o.init_scale;
  w.embedding = var("embedding", Shape({vocab, d_model}), Normal(o.embedding_stddev, o.seed));
  w.positions = var("positions", Shape({length, d_model}), Normal(o.position_stddev, o.seed));
  for (int64_t i = 0; i < o.layers; ++i) {
    const std::string p = absl::StrCat("layer_", i, "/");
    LayerWeights l;
    l.ln1_scale = var(p + "ln1/scale", Shape({d_model}), Fill("ones"));
    if (layer_norm) l.ln1_bias = var(p + "ln1/bias", Shape({d_model}), Fill("zeros"));
    const Initializer qkv = Normal(s * InvSqrt(o.d_model), o.seed);
    l.q = var(p + "attention/q", Shape({d_model, heads, d_kv}), qkv);
    l.k = var(p + "attention/k", Shape({d_model, heads, d_kv}), qkv);
    l.v = var(p + "attention/v", Shape({d_model, heads, d_kv}), qkv);
    l.o = var(p + "attention/o", Shape({heads, d_kv, d_model}),
              Normal(s * InvSqrt(o.heads * o.d_kv), o.seed));
    l.ln2_scale = var(p + "ln2/scale", Shape({d_model}), Fill("ones"));
    if (layer_norm) l.ln2_bias = var(p + "ln2/bias", Shape({d_model}), Fill("zeros"));
    l.w1 = var(p + "ffn/w1", Shape({d_model, d_ff}), Normal(s * InvSqrt(o.d_model), o.seed));
    l.w2 = var(p + "ffn/w2", Shape({d_ff, d_model}), Normal(s * InvSqrt(o.d_ff), o.seed));
    w.layers.push_back(l);
  }
  w.final_scale = var("final_ln/scale", Shape({d_model}), Fill("ones"));
  if (layer_norm) w.final_bias = var("final_ln/bias", Shape({d_model}), Fill("zeros"));
  w.output = var("output", Shape({d_model, vocab}), Normal(s * InvSqrt(o.d_model), o.seed));
  return w;
}

// The variables, shared by the training, sampling and decoding graphs (same names and shapes).
Weights AddWeights(GraphBuilder& b, const TransformerOptions& o) {
  return MakeWeights(o, [&b](const std::string& name, const Shape& shape, const Initializer& init) {
    return b.Variable(name, shape, init);
  });
}

TensorRef Norm(GraphBuilder& b, const TransformerOptions& o, const TensorRef& x,
               const TensorRef& scale, const TensorRef& bias, const std::string& name) {
  if (o.norm == "layer") {
    return Normalize(b, "layer_norm", {x, scale, bias}, {"d_model"}, o.epsilon, name);
  }
  return Normalize(b, "rms_norm", {x, scale}, {"d_model"}, o.epsilon, name);
}

// The logits of `ids` (int32, dims P containing `length`, e.g. [batch, length] or [length]):
// dims P + [vocab]. Every op's name starts with `scope` ("" or "eval/"); the weights are shared.
TensorRef Logits(GraphBuilder& b, const TransformerOptions& o, const Weights& w,
                 const TensorRef& ids, const std::string& scope = "") {
  const Dim d_model{"d_model", o.d_model}, heads{"heads", o.heads}, d_kv{"d_kv", o.d_kv},
      d_ff{"d_ff", o.d_ff}, vocab{"vocab", o.vocab}, length{"length", o.length},
      memory{"memory", o.length};
  const Shape& p = ids.shape;                        // e.g. [batch, length]
  const Shape pm = RenameIn(p, "length", "memory");  // [batch, memory]
  const Shape outer = Drop(p, "length");             // [batch]
  const Shape xs = Concat(p, {d_model});             // [batch, length, d_model]

  TensorRef x =
      b.Einsum({OneHot(b, ids, vocab, scope + "embed/one_hot"), w.embedding}, xs, scope + "embed");
  x = b.Add(x, w.positions, scope + "embed/positions");

  // Causal mask [memory, length]: -1e9 where memory > length (a future position).
  TensorRef future = Elementwise(
      b, "greater",
      {Range(b, memory, scope + "mask/memory"), Range(b, length, scope + "mask/length")},
      scope + "mask/future");
  TensorRef mask = ScalarOp(b, "mul", future, -1e9f, scope + "mask");

  for (int64_t i = 0; i < o.layers; ++i) {
    const LayerWeights& l = w.layers[i];
    const std::string n = absl::StrCat(scope, "layer_", i, "/");
    // Self-attention.
    TensorRef h = Norm(b, o, x, l.ln1_scale, l.ln1_bias, n + "ln1");
    TensorRef hm = b.RenameDim(h, "length", "memory", n + "attention/h_memory");
    TensorRef q = b.Einsum({h, l.q}, Concat(p, {heads, d_kv}), n + "attention/q_proj");
    q = b.Scale(q, InvSqrt(o.d_kv), n + "attention/q_scaled");
    TensorRef k = b.Einsum({hm, l.k}, Concat(pm, {heads, d_kv}), n + "attention/k_proj");
    TensorRef v = b.Einsum({hm, l.v}, Concat(pm, {heads, d_kv}), n + "attention/v_proj");
    TensorRef scores =
        b.Einsum({q, k}, Concat(outer, {heads, length, memory}), n + "attention/logits");
    scores = b.Add(scores, mask, n + "attention/masked");
    TensorRef weights = Normalize(b, "softmax", {scores}, {"memory"}, 0, n + "attention/weights");
    TensorRef att = b.Einsum({weights, v}, Concat(p, {heads, d_kv}), n + "attention/values");
    x = b.Add(x, b.Einsum({att, l.o}, xs, n + "attention/output"), n + "attention/residual");
    // Dense-relu-dense.
    h = Norm(b, o, x, l.ln2_scale, l.ln2_bias, n + "ln2");
    TensorRef f = b.Relu(b.Einsum({h, l.w1}, Concat(p, {d_ff}), n + "ffn/hidden"), n + "ffn/relu");
    x = b.Add(x, b.Einsum({f, l.w2}, xs, n + "ffn/output"), n + "ffn/residual");
  }
  TensorRef h = Norm(b, o, x, w.final_scale, w.final_bias, scope + "final_ln");
  return b.Einsum({h, w.output}, Concat(p, {vocab}), scope + "logits");
}

// text_windows of the options' data file (core/ops/ops_dataset.h). The attrs beyond path and offset
// are set only when they differ from the op's defaults, so a byte model without eval is the graph
// it always was.
TensorRef TextWindows(GraphBuilder& b, const TensorRef& step, const Shape& shape,
                      const TransformerOptions& o, int64_t offset, const std::string& split,
                      const std::string& name) {
  v1::Op op;
  op.set_type("text_windows");
  *op.mutable_shape() = shape.ToProto();
  auto& attrs = *op.mutable_attrs();
  attrs["path"].set_s(o.data_path);
  attrs["offset"].set_i(offset);
  if (o.data_format != "bytes") {
    attrs["format"].set_s(o.data_format);
    attrs["vocab"].set_i(o.vocab);
  }
  if (o.eval_fraction > 0) {
    attrs["split"].set_s(split);
    attrs["eval_fraction"].set_f(o.eval_fraction);
  }
  return b.Apply(std::move(op), {step}, name);
}

// The mean next-token cross entropy of `logits` against `targets`, ops named with `scope`.
TensorRef Loss(GraphBuilder& b, const TransformerOptions& o, const TensorRef& logits,
               const TensorRef& targets, const std::string& scope) {
  TensorRef ce = Normalize(
      b, "softmax_cross_entropy",
      {logits, OneHot(b, targets, {"vocab", o.vocab}, scope + "targets/one_hot")}, {"vocab"}, 0,
      scope + "cross_entropy");
  return b.ReduceMean(ce, {}, scope + "loss");
}

// A zeros tensor of `shape` and `dtype`.
TensorRef Zeros(GraphBuilder& b, const Shape& shape, DType dtype, const std::string& name) {
  v1::Op op;
  op.set_type("zeros");
  *op.mutable_shape() = shape.ToProto();
  op.set_dtype(dtype == DType::kInt32 ? v1::DT_INT32 : v1::DT_FLOAT32);
  return b.Apply(std::move(op), {}, name);
}

// A one-input op of `type` over `dims` (argmax, reduce_min, ...).
TensorRef OverDims(GraphBuilder& b, const std::string& type, const TensorRef& x,
                   const std::vector<std::string>& dims, const std::string& name) {
  v1::Op op;
  op.set_type(type);
  for (const std::string& d : dims) op.add_dims(d);
  return b.Apply(std::move(op), {x}, name);
}

// where(cond, x, s): x where cond is nonzero, else the scalar s.
TensorRef WhereElse(GraphBuilder& b, const TensorRef& cond, const TensorRef& x, float s,
                    const std::string& name) {
  v1::Op op;
  op.set_type("where");
  (*op.mutable_attrs())["scalar"].set_f(s);
  return b.Apply(std::move(op), {cond, x}, name);
}

// The `k` largest values of `x` along `dim`, along new dim `new_dim` (the top_k op).
TensorRef TopKValues(GraphBuilder& b, const TensorRef& x, const std::string& dim, int64_t k,
                     const std::string& new_dim, const std::string& name) {
  v1::Op op;
  op.set_type("top_k");
  op.add_dims(dim);
  (*op.mutable_attrs())["k"].set_i(k);
  (*op.mutable_attrs())["new_dim"].set_s(new_dim);
  (*op.mutable_attrs())["output"].set_s("values");
  return b.Apply(std::move(op), {x}, name);
}

// One decoding position for every row (BuildTransformerDecoder's loop body): the logits [batch,
// vocab] of int32 ids `current` [batch] at int32 scalar `position`. `caches` holds each layer's
// keys then values [batch, memory, heads, d_kv], zero from `position` on; `next_caches` receives
// them with this position's written in. The same arithmetic as Logits at that position.
TensorRef DecodeStep(GraphBuilder& g, const TransformerOptions& o, const Weights& w,
                     const TensorRef& current, const TensorRef& position,
                     const std::vector<TensorRef>& caches, std::vector<TensorRef>* next_caches) {
  const Dim batch{"batch", o.batch}, d_model{"d_model", o.d_model}, heads{"heads", o.heads},
      d_kv{"d_kv", o.d_kv}, d_ff{"d_ff", o.d_ff}, vocab{"vocab", o.vocab},
      length{"length", o.length}, memory{"memory", o.length};
  const Shape xs({batch, d_model}), per_head({batch, heads, d_kv}),
      cache({batch, memory, heads, d_kv});
  TensorRef at_length = OneHot(g, position, length, "at_length");
  TensorRef at_memory = OneHot(g, position, memory, "at_memory");
  TensorRef x = g.Einsum({OneHot(g, current, vocab, "embed/one_hot"), w.embedding}, xs, "embed");
  x = g.Add(x, g.Einsum({at_length, w.positions}, Shape({d_model}), "embed/position"),
            "embed/positions");
  // -1e9 at memory positions after this one (not yet written in the cache).
  TensorRef future =
      Elementwise(g, "greater",
                  {Range(g, memory, "mask/memory"), Cast(g, position, "float32", "mask/position")},
                  "mask/future");
  TensorRef mask = ScalarOp(g, "mul", future, -1e9f, "mask");
  for (int64_t i = 0; i < o.layers; ++i) {
    const LayerWeights& l = w.layers[i];
    const std::string n = absl::StrCat("layer_", i, "/");
    TensorRef h = Norm(g, o, x, l.ln1_scale, l.ln1_bias, n + "ln1");
    TensorRef q = g.Scale(g.Einsum({h, l.q}, per_head, n + "attention/q_proj"), InvSqrt(o.d_kv),
                          n + "attention/q_scaled");
    TensorRef k_new = g.Einsum({h, l.k}, per_head, n + "attention/k_proj");
    TensorRef v_new = g.Einsum({h, l.v}, per_head, n + "attention/v_proj");
    // This position's key and value written into the (zero there) caches.
    TensorRef k =
        g.Add(caches[2 * i], g.Einsum({k_new, at_memory}, cache, n + "cache/k_at"), n + "cache/k");
    TensorRef v = g.Add(caches[2 * i + 1], g.Einsum({v_new, at_memory}, cache, n + "cache/v_at"),
                        n + "cache/v");
    next_caches->push_back(k);
    next_caches->push_back(v);
    TensorRef scores =
        g.Add(g.Einsum({q, k}, Shape({batch, heads, memory}), n + "attention/logits"), mask,
              n + "attention/masked");
    TensorRef weights = Normalize(g, "softmax", {scores}, {"memory"}, 0, n + "attention/weights");
    TensorRef att = g.Einsum({weights, v}, per_head, n + "attention/values");
    x = g.Add(x, g.Einsum({att, l.o}, xs, n + "attention/output"), n + "attention/residual");
    h = Norm(g, o, x, l.ln2_scale, l.ln2_bias, n + "ln2");
    TensorRef f =
        g.Relu(g.Einsum({h, l.w1}, Shape({batch, d_ff}), n + "ffn/hidden"), n + "ffn/relu");
    x = g.Add(x, g.Einsum({f, l.w2}, xs, n + "ffn/output"), n + "ffn/residual");
  }
  TensorRef h = Norm(g, o, x, w.final_scale, w.final_bias, "final_ln");
  return g.Einsum({h, w.output}, Shape({batch, vocab}), "logits");
}

// The token each row continues with (int32 [batch]) from `logits` [batch, vocab] at `position`:
// greedy, or Gumbel-max sampling restricted to the top k (see LmDecodeOptions).
TensorRef ChooseToken(GraphBuilder& g, const TransformerOptions& o, const LmDecodeOptions& d,
                      const TensorRef& logits, const TensorRef& position) {
  if (d.temperature == 0) return OverDims(g, "argmax", logits, {"vocab"}, "token");
  // u in (0, 1): 0 (one chance in 2^24) would make the noise -inf.
  TensorRef u = ScalarOp(g, "maximum",
                         RandomUniform(g, logits.shape, position, d.seed, 0, 1, "sample/uniform"),
                         1e-30f, "sample/u");
  TensorRef gumbel =
      g.Neg(Elementwise(g, "log",
                        {g.Neg(Elementwise(g, "log", {u}, "sample/log_u"), "sample/exponential")},
                        "sample/log_exponential"),
            "sample/gumbel");
  TensorRef scores =
      g.Add(g.Scale(logits, 1.0f / d.temperature, "sample/tempered"), gumbel, "sample/scores");
  if (d.top_k > 0 && d.top_k < o.vocab) {
    // The k-th largest logit of each row; logits below it are out.
    TensorRef kth =
        OverDims(g, "reduce_min", TopKValues(g, logits, "vocab", d.top_k, "top_k", "sample/top_k"),
                 {"top_k"}, "sample/kth");
    TensorRef keep = ScalarOp(g, "equal", Elementwise(g, "less", {logits, kth}, "sample/below"), 0,
                              "sample/keep");
    scores = WhereElse(g, keep, scores, std::numeric_limits<float>::lowest(), "sample/in_top_k");
  }
  return OverDims(g, "argmax", scores, {"vocab"}, "token");
}

}  // namespace

TransformerOptions BenchConfig() {
  TransformerOptions o;
  o.batch = 32;
  o.length = 128;
  o.d_model = 256;
  o.heads = 8;
  o.d_kv = 32;
  o.d_ff = 1024;
  o.layers = 2;
  o.vocab = 256;
  return o;
}

TransformerOptions ModelScaleBenchConfig() {
  TransformerOptions o = BenchConfig();
  o.batch = 8;
  o.length = 256;
  o.d_model = 512;
  o.d_kv = 64;
  o.d_ff = 2048;
  o.layers = 4;
  return o;
}

absl::Status CheckTransformerOptions(const TransformerOptions& o) {
  for (const auto& [name, value] :
       std::vector<std::pair<const char*, int64_t>>{{"batch", o.batch},
                                                    {"length", o.length},
                                                    {"d_model", o.d_model},
                                                    {"heads", o.heads},
                                                    {"d_kv", o.d_kv},
                                                    {"d_ff", o.d_ff},
                                                    {"layers", o.layers},
                                                    {"vocab", o.vocab}}) {
    if (value <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("transformer: ", name, " must be positive, not ", value));
    }
  }
  if (o.norm != "layer" && o.norm != "rms") {
    return absl::InvalidArgumentError(
        absl::StrCat("transformer: norm must be 'layer' or 'rms', not '", o.norm, "'"));
  }
  if (o.data_format != "bytes" && o.data_format != "npy" && o.data_format != "uint16") {
    return absl::InvalidArgumentError(absl::StrCat(
        "transformer: data_format must be bytes, npy or uint16, not '", o.data_format, "'"));
  }
  if (o.data_path.empty() && (o.data_format != "bytes" || o.eval_fraction != 0)) {
    return absl::InvalidArgumentError(
        "transformer: data_format npy/uint16 and eval_fraction need a data_path (synthetic ids "
        "have neither)");
  }
  if (!o.data_path.empty() && o.data_format == "bytes" && o.vocab < 256) {
    return absl::InvalidArgumentError(absl::StrCat("transformer: ids are bytes of ", o.data_path,
                                                   ", so vocab must be >= 256, not ", o.vocab));
  }
  if (!(o.eval_fraction >= 0 && o.eval_fraction < 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "transformer: eval_fraction must be in [0, 1) (0: no eval), not ", o.eval_fraction));
  }
  if (!(o.epsilon > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("transformer: epsilon must be > 0, not ", o.epsilon));
  }
  return absl::OkStatus();
}

absl::StatusOr<ModelOutputs> BuildTransformer(GraphBuilder& b, const TransformerOptions& o) {
  if (absl::Status s = CheckTransformerOptions(o); !s.ok()) return s;
  const Shape tokens({{"batch", o.batch}, {"length", o.length}});
  ModelOutputs m;
  m.data_step = DataStep(b);
  if (!o.data_path.empty()) {
    m.inputs = TextWindows(b, m.data_step, tokens, o, 0, "train", "inputs");
    m.targets = TextWindows(b, m.data_step, tokens, o, 1, "train", "targets");
  } else {
    const float v = static_cast<float>(o.vocab);
    m.inputs = Cast(b, RandomUniform(b, tokens, m.data_step, o.seed, 0, v, "inputs/uniform"),
                    "int32", "inputs");
    m.targets = Cast(b, RandomUniform(b, tokens, m.data_step, o.seed + 1, 0, v, "targets/uniform"),
                     "int32", "targets");
  }
  Weights w = AddWeights(b, o);
  m.variables = w.all;
  m.output = Logits(b, o, w, m.inputs);
  m.loss = Loss(b, o, m.output, m.targets, "");
  if (o.eval_fraction > 0) {
    // The held-out batch: step 0's windows of the eval part, the same every time it is fetched.
    v1::Op zero;
    zero.set_type("zeros");
    const TensorRef step = b.Apply(std::move(zero), {}, "eval/step");
    const TensorRef ids = TextWindows(b, step, tokens, o, 0, "eval", "eval/inputs");
    const TensorRef targets = TextWindows(b, step, tokens, o, 1, "eval", "eval/targets");
    m.eval_loss = Loss(b, o, Logits(b, o, w, ids, "eval/"), targets, "eval/");
  }
  if (!b.status().ok()) return b.status();
  return m;
}

absl::StatusOr<SamplerOutputs> BuildTransformerSampler(GraphBuilder& b,
                                                       const TransformerOptions& o) {
  if (absl::Status s = CheckTransformerOptions(o); !s.ok()) return s;
  SamplerOutputs out;
  out.prompt = b.Placeholder("prompt", Shape({{"length", o.length}}), DType::kInt32);
  out.position = b.Placeholder("position", Shape({}), DType::kInt32);
  Weights w = AddWeights(b, o);
  out.variables = w.all;
  out.logits = Logits(b, o, w, out.prompt);
  out.next_logits =
      b.Einsum({OneHot(b, out.position, {"length", o.length}, "position/one_hot"), out.logits},
               Shape({{"vocab", o.vocab}}), "next_logits");
  v1::Op argmax;
  argmax.set_type("argmax");
  argmax.add_dims("vocab");
  out.next_token = b.Apply(std::move(argmax), {out.next_logits}, "next_token");
  b.MarkOutput(out.next_token);
  b.MarkOutput(out.next_logits);
  if (!b.status().ok()) return b.status();
  return out;
}

absl::StatusOr<LmDecoderOutputs> BuildTransformerDecoder(GraphBuilder& b,
                                                         const TransformerOptions& o,
                                                         const LmDecodeOptions& d) {
  if (absl::Status s = CheckTransformerOptions(o); !s.ok()) return s;
  if (o.length < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "transformer decoder: length must be >= 2 (a prompt and a new token), not ", o.length));
  }
  if (!(d.temperature >= 0) || !std::isfinite(d.temperature)) {
    return absl::InvalidArgumentError(
        absl::StrCat("transformer decoder: temperature must be finite and >= 0 (0: greedy), not ",
                     d.temperature));
  }
  if (d.top_k < 0 || d.top_k > o.vocab) {
    return absl::InvalidArgumentError(absl::StrCat("transformer decoder: top_k must be in [0, ",
                                                   o.vocab, "] (the vocab; 0: all), not ",
                                                   d.top_k));
  }
  if (d.max_new < 0 || d.max_new > o.length - 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("transformer decoder: max_new must be in [0, ", o.length - 1,
                     "] (the model's length - 1; 0: to the end), not ", d.max_new));
  }
  if (d.max_prompt < 0 || d.max_prompt + d.max_new > o.length) {
    return absl::InvalidArgumentError(
        absl::StrCat("transformer decoder: max_prompt must be >= 0 and max_prompt + max_new (",
                     d.max_prompt, " + ", d.max_new, ") at most the model's length ", o.length));
  }
  const Dim batch{"batch", o.batch}, length{"length", o.length}, memory{"memory", o.length},
      heads{"heads", o.heads}, d_kv{"d_kv", o.d_kv};
  LmDecoderOutputs out;
  out.prompt = b.Placeholder("prompt", Shape({batch, length}), DType::kInt32);
  out.prompt_length = b.Placeholder("prompt_length", Shape({batch}), DType::kInt32);
  Weights w = AddWeights(b, o);
  out.variables = w.all;

  // [batch, length] masks: the prompt's positions (at least position 0), and the positions a
  // decoded token is written to (after the prompt, before prompt_length + max_new).
  TensorRef positions = Range(b, length, "decode/positions");
  TensorRef prompt_length =
      ScalarOp(b, "maximum", Cast(b, out.prompt_length, "float32", "decode/prompt_length_f"), 1,
               "decode/prompt_length");
  TensorRef in_prompt = Elementwise(b, "greater", {prompt_length, positions}, "decode/in_prompt");
  TensorRef write = ScalarOp(b, "equal", in_prompt, 0, "decode/after_prompt");
  if (d.max_new > 0) {
    TensorRef end = ScalarOp(b, "add", prompt_length, static_cast<float>(d.max_new), "decode/end");
    write = b.Mul(write, Elementwise(b, "greater", {end, positions}, "decode/before_end"),
                  "decode/write");
  }
  TensorRef generated0 =
      b.Mul(Cast(b, out.prompt, "float32", "decode/prompt_f"), in_prompt, "decode/generated0");

  // Carried: position, generated, the caches; then, read-only, the write mask and the weights.
  std::vector<TensorRef> init = {Zeros(b, Shape({}), DType::kInt32, "decode/position0"),
                                 generated0};
  for (int64_t i = 0; i < o.layers; ++i) {
    const Shape cache({batch, memory, heads, d_kv});
    init.push_back(Zeros(b, cache, DType::kFloat32, absl::StrCat("decode/cache_k", i, "_0")));
    init.push_back(Zeros(b, cache, DType::kFloat32, absl::StrCat("decode/cache_v", i, "_0")));
  }
  const size_t num_changing = init.size();
  init.push_back(write);
  for (const TensorRef& t : w.all) init.push_back(t);
  GraphBuilder g;
  std::vector<TensorRef> in;
  for (size_t i = 0; i < init.size(); ++i) {
    in.push_back(g.Placeholder(absl::StrCat("state_", i), init[i].shape, init[i].dtype));
  }
  const TensorRef position = in[0], generated = in[1], write_mask = in[num_changing];
  const std::vector<TensorRef> caches(in.begin() + 2, in.begin() + num_changing);
  size_t next_weight = num_changing + 1;
  const Weights body_weights = MakeWeights(
      o, [&](const std::string&, const Shape&, const Initializer&) { return in[next_weight++]; });

  TensorRef current = Cast(
      g,
      g.Einsum({generated, OneHot(g, position, length, "at_current")}, Shape({batch}), "current_f"),
      "int32", "current");
  std::vector<TensorRef> next_caches;
  TensorRef logits = DecodeStep(g, o, body_weights, current, position, caches, &next_caches);
  TensorRef token = Cast(g, ChooseToken(g, o, d, logits, position), "float32", "token_f");
  TensorRef next_position = ScalarOp(g, "add", position, 1, "next_position");
  TensorRef at_next = OneHot(g, next_position, length, "at_next");
  TensorRef written =
      g.Mul(token, g.Einsum({write_mask, at_next}, Shape({batch}), "write_next"), "written");
  std::vector<TensorRef> next = {
      next_position,
      g.Add(generated, g.Einsum({written, at_next}, Shape({batch, length}), "written_at"),
            "next_generated")};
  for (const TensorRef& c : next_caches) next.push_back(c);
  for (size_t i = next.size(); i < in.size(); ++i) next.push_back(in[i]);  // read-only
  if (!g.status().ok()) return g.status();

  const int64_t trips =
      (d.max_new > 0 && d.max_prompt > 0 ? d.max_prompt + d.max_new : o.length) - 1;
  v1::Graph body = g.proto();
  body.clear_outputs();
  for (const TensorRef& t : next) body.add_outputs(t.name);
  v1::Op loop;
  loop.set_type("while_loop");
  *loop.mutable_body() = std::move(body);
  auto& attrs = *loop.mutable_attrs();
  attrs["trip_count"].set_i(trips);
  for (const TensorRef& t : in) attrs["carried"].mutable_strings()->add_values(t.name);
  attrs["output"].set_i(1);  // generated
  out.generated =
      Cast(b, b.Apply(std::move(loop), init, "decode/generated_f"), "int32", "generated");
  b.MarkOutput(out.generated);
  if (!b.status().ok()) return b.status();
  return out;
}

}  // namespace models
}  // namespace meshrt
