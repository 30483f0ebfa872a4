#include "models/transformer.h"

#include <cmath>
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

// The variables, shared by the training and the sampling graphs (same names and shapes).
Weights AddWeights(GraphBuilder& b, const TransformerOptions& o) {
  const Dim d_model{"d_model", o.d_model}, heads{"heads", o.heads}, d_kv{"d_kv", o.d_kv},
      d_ff{"d_ff", o.d_ff}, vocab{"vocab", o.vocab}, length{"length", o.length};
  const bool layer_norm = o.norm == "layer";
  Weights w;
  auto var = [&](const std::string& name, const Shape& shape, const Initializer& init) {
    TensorRef v = b.Variable(name, shape, init);
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

}  // namespace models
}  // namespace meshrt
