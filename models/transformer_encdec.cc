#include "models/transformer_encdec.h"

#include <cmath>
#include <functional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace meshrt {
namespace models {
namespace {

struct NormWeights {
  TensorRef scale, bias;  // bias: empty name with rms norm
};
struct AttentionWeights {
  TensorRef q, k, v, o;
};
struct EncoderLayer {
  NormWeights ln1, ln2;
  AttentionWeights attention;
  TensorRef w1, w2;
};
struct DecoderLayer {
  NormWeights ln1, ln2, ln3;
  AttentionWeights self, encdec;
  TensorRef w1, w2;
};
struct Weights {
  TensorRef embedding, encoder_positions, decoder_positions;
  std::vector<EncoderLayer> encoder;
  NormWeights encoder_final;
  std::vector<DecoderLayer> decoder;
  NormWeights decoder_final;
  std::vector<TensorRef> all;  // creation order
};

// Makes one weight tensor: a Variable in the model's graphs, a placeholder in a loop body.
using MakeWeight =
    std::function<TensorRef(const std::string& name, const Shape& shape, const Initializer& init)>;

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

struct Dims {
  explicit Dims(const EncDecOptions& o)
      : batch{"batch", o.batch},
        length{"length", o.length},
        memory{"memory_length", o.length},
        d_model{"d_model", o.d_model},
        heads{"heads", o.heads},
        d_kv{"d_kv", o.d_kv},
        d_ff{"d_ff", o.d_ff},
        vocab{"vocab", o.vocab} {}
  Dim batch, length, memory, d_model, heads, d_kv, d_ff, vocab;
};

// Every weight, in the order of the header's list; `make` decides what each one is.
Weights AddWeights(const EncDecOptions& o, const MakeWeight& make_weight) {
  const Dims d(o);
  const bool layer_norm = o.norm == "layer";
  Weights w;
  auto make = [&](const std::string& name, const Shape& shape, const Initializer& init) {
    TensorRef t = make_weight(name, shape, init);
    w.all.push_back(t);
    return t;
  };
  auto norm = [&](const std::string& p) {
    NormWeights n;
    n.scale = make(p + "/scale", Shape({d.d_model}), Fill("ones"));
    if (layer_norm) n.bias = make(p + "/bias", Shape({d.d_model}), Fill("zeros"));
    return n;
  };
  auto attention = [&](const std::string& p) {
    AttentionWeights a;
    const Initializer in = Normal(InvSqrt(o.d_model), o.seed);
    a.q = make(p + "/q", Shape({d.d_model, d.heads, d.d_kv}), in);
    a.k = make(p + "/k", Shape({d.d_model, d.heads, d.d_kv}), in);
    a.v = make(p + "/v", Shape({d.d_model, d.heads, d.d_kv}), in);
    a.o = make(p + "/o", Shape({d.heads, d.d_kv, d.d_model}),
               Normal(InvSqrt(o.heads * o.d_kv), o.seed));
    return a;
  };
  auto ffn = [&](const std::string& p, TensorRef* w1, TensorRef* w2) {
    *w1 = make(p + "/w1", Shape({d.d_model, d.d_ff}), Normal(InvSqrt(o.d_model), o.seed));
    *w2 = make(p + "/w2", Shape({d.d_ff, d.d_model}), Normal(InvSqrt(o.d_ff), o.seed));
  };
  w.embedding = make("shared/embedding", Shape({d.vocab, d.d_model}), Normal(1.0f, o.seed));
  w.encoder_positions =
      make("encoder/positions", Shape({d.length, d.d_model}), Normal(0.1f, o.seed));
  for (int64_t i = 0; i < o.encoder_layers; ++i) {
    const std::string p = absl::StrCat("encoder/layer_", i, "/");
    EncoderLayer l;
    l.ln1 = norm(p + "ln1");
    l.attention = attention(p + "attention");
    l.ln2 = norm(p + "ln2");
    ffn(p + "ffn", &l.w1, &l.w2);
    w.encoder.push_back(l);
  }
  w.encoder_final = norm("encoder/final_ln");
  w.decoder_positions =
      make("decoder/positions", Shape({d.length, d.d_model}), Normal(0.1f, o.seed));
  for (int64_t i = 0; i < o.decoder_layers; ++i) {
    const std::string p = absl::StrCat("decoder/layer_", i, "/");
    DecoderLayer l;
    l.ln1 = norm(p + "ln1");
    l.self = attention(p + "self_attention");
    l.ln2 = norm(p + "ln2");
    l.encdec = attention(p + "encdec_attention");
    l.ln3 = norm(p + "ln3");
    ffn(p + "ffn", &l.w1, &l.w2);
    w.decoder.push_back(l);
  }
  w.decoder_final = norm("decoder/final_ln");
  return w;
}

TensorRef Norm(GraphBuilder& b, const EncDecOptions& o, const TensorRef& x, const NormWeights& n,
               const std::string& name) {
  if (o.norm == "layer") {
    return Normalize(b, "layer_norm", {x, n.scale, n.bias}, {"d_model"}, o.epsilon, name);
  }
  return Normalize(b, "rms_norm", {x, n.scale}, {"d_model"}, o.epsilon, name);
}

// Drops elements with probability `rate`, scaling the rest by 1/(1 - rate); the mask is drawn
// from `step` (a new mask every step, the same on every layout). No-op without a step or rate 0.
TensorRef Dropout(GraphBuilder& b, const EncDecOptions& o, const TensorRef& x,
                  const TensorRef& step, const std::string& name) {
  if (o.dropout == 0 || step.name.empty()) return x;
  TensorRef u = RandomUniform(b, x.shape, step, o.seed, 0, 1, name + "/uniform");
  TensorRef keep = ScalarOp(b, "greater", u, o.dropout, name + "/keep");
  return b.Mul(x, b.Scale(keep, 1.0f / (1.0f - o.dropout), name + "/mask"), name);
}

// Keys or values of `memory` (dims [..., memory_length, d_model]) under projection `w`.
TensorRef Project(GraphBuilder& b, const Dims& d, const TensorRef& memory, const TensorRef& w,
                  const std::string& name) {
  return b.Einsum({memory, w}, Concat(Drop(memory.shape, "d_model"), {d.heads, d.d_kv}), name);
}

// Multi-head attention of queries from `x` (dims [..., d_model], with or without `length`) over
// keys `k` and values `v` ([..., memory_length, heads, d_kv]), `bias` (empty name: none) added to
// the logits. Returns x's shape.
TensorRef Attention(GraphBuilder& b, const Dims& d, const AttentionWeights& a, const TensorRef& x,
                    const TensorRef& k, const TensorRef& v, const TensorRef& bias,
                    const std::string& n) {
  const Shape qs = Concat(Drop(x.shape, "d_model"), {d.heads, d.d_kv});
  TensorRef q = b.Scale(b.Einsum({x, a.q}, qs, n + "/q_proj"),
                        1.0f / std::sqrt(static_cast<float>(d.d_kv.size)), n + "/q_scaled");
  TensorRef logits = b.Einsum({q, k}, Concat(Drop(qs, "d_kv"), {d.memory}), n + "/logits");
  if (!bias.name.empty()) logits = b.Add(logits, bias, n + "/masked");
  TensorRef weights = Normalize(b, "softmax", {logits}, {"memory_length"}, 0, n + "/weights");
  TensorRef context = b.Einsum({weights, v}, qs, n + "/values");
  return b.Einsum({context, a.o}, x.shape, n + "/output");
}

TensorRef Ffn(GraphBuilder& b, const Dims& d, const TensorRef& h, const TensorRef& w1,
              const TensorRef& w2, const std::string& n) {
  TensorRef f = b.Relu(
      b.Einsum({h, w1}, Concat(Drop(h.shape, "d_model"), {d.d_ff}), n + "/hidden"), n + "/relu");
  return b.Einsum({f, w2}, h.shape, n + "/output");
}

// one_hot(ids)·embedding: ids' dims + [d_model].
TensorRef Embed(GraphBuilder& b, const Dims& d, const Weights& w, const TensorRef& ids,
                const std::string& name) {
  return b.Einsum({OneHot(b, ids, d.vocab, name + "/one_hot"), w.embedding},
                  Concat(ids.shape, {d.d_model}), name);
}

// -1e9 where `ids` (int32, with `length`) is pad, as [..., memory_length]: the bias of attention
// over those positions.
TensorRef PaddingBias(GraphBuilder& b, const TensorRef& ids, const std::string& name) {
  TensorRef pad = ScalarOp(b, "equal", ids, static_cast<float>(kPadId), name + "/is_pad");
  return b.Scale(b.RenameDim(pad, "length", "memory_length", name + "/memory"), -1e9f, name);
}

// The encoder: its output [batch, length, d_model].
TensorRef Encode(GraphBuilder& b, const EncDecOptions& o, const Weights& w, const TensorRef& ids,
                 const TensorRef& bias, const TensorRef& step, const std::string& scope) {
  const Dims d(o);
  TensorRef x = b.Add(Embed(b, d, w, ids, scope + "encoder/embed"), w.encoder_positions,
                      scope + "encoder/embed/positions");
  x = Dropout(b, o, x, step, scope + "encoder/embed/dropout");
  for (int64_t i = 0; i < o.encoder_layers; ++i) {
    const EncoderLayer& l = w.encoder[i];
    const std::string n = absl::StrCat(scope, "encoder/layer_", i, "/");
    TensorRef h = Norm(b, o, x, l.ln1, n + "ln1");
    TensorRef hm = b.RenameDim(h, "length", "memory_length", n + "attention/memory");
    TensorRef k = Project(b, d, hm, l.attention.k, n + "attention/k_proj");
    TensorRef v = Project(b, d, hm, l.attention.v, n + "attention/v_proj");
    TensorRef a = Attention(b, d, l.attention, h, k, v, bias, n + "attention");
    x = b.Add(x, Dropout(b, o, a, step, n + "attention/dropout"), n + "attention/residual");
    h = Norm(b, o, x, l.ln2, n + "ln2");
    TensorRef f = Ffn(b, d, h, l.w1, l.w2, n + "ffn");
    x = b.Add(x, Dropout(b, o, f, step, n + "ffn/dropout"), n + "ffn/residual");
  }
  return Norm(b, o, x, w.encoder_final, scope + "encoder/final_ln");
}

// The decoder's logits [batch, length, vocab] for decoder inputs `ids` over encoder output
// `encoded`, teacher-forced (every position at once, causal).
TensorRef DecodeAll(GraphBuilder& b, const EncDecOptions& o, const Weights& w,
                    const TensorRef& ids, const TensorRef& encoded, const TensorRef& memory_bias,
                    const TensorRef& step, const std::string& scope) {
  const Dims d(o);
  TensorRef future = Elementwise(
      b, "greater",
      {Range(b, d.memory, scope + "decoder/mask/memory"),
       Range(b, d.length, scope + "decoder/mask/length")},
      scope + "decoder/mask/future");
  TensorRef causal = b.Scale(future, -1e9f, scope + "decoder/mask");
  TensorRef memory = b.RenameDim(encoded, "length", "memory_length", scope + "decoder/memory");
  TensorRef x = b.Add(Embed(b, d, w, ids, scope + "decoder/embed"), w.decoder_positions,
                      scope + "decoder/embed/positions");
  x = Dropout(b, o, x, step, scope + "decoder/embed/dropout");
  for (int64_t i = 0; i < o.decoder_layers; ++i) {
    const DecoderLayer& l = w.decoder[i];
    const std::string n = absl::StrCat(scope, "decoder/layer_", i, "/");
    TensorRef h = Norm(b, o, x, l.ln1, n + "ln1");
    TensorRef hm = b.RenameDim(h, "length", "memory_length", n + "self_attention/memory");
    TensorRef k = Project(b, d, hm, l.self.k, n + "self_attention/k_proj");
    TensorRef v = Project(b, d, hm, l.self.v, n + "self_attention/v_proj");
    TensorRef a = Attention(b, d, l.self, h, k, v, causal, n + "self_attention");
    x = b.Add(x, Dropout(b, o, a, step, n + "self_attention/dropout"),
              n + "self_attention/residual");
    h = Norm(b, o, x, l.ln2, n + "ln2");
    TensorRef ek = Project(b, d, memory, l.encdec.k, n + "encdec_attention/k_proj");
    TensorRef ev = Project(b, d, memory, l.encdec.v, n + "encdec_attention/v_proj");
    a = Attention(b, d, l.encdec, h, ek, ev, memory_bias, n + "encdec_attention");
    x = b.Add(x, Dropout(b, o, a, step, n + "encdec_attention/dropout"),
              n + "encdec_attention/residual");
    h = Norm(b, o, x, l.ln3, n + "ln3");
    TensorRef f = Ffn(b, d, h, l.w1, l.w2, n + "ffn");
    x = b.Add(x, Dropout(b, o, f, step, n + "ffn/dropout"), n + "ffn/residual");
  }
  TensorRef h = Norm(b, o, x, w.decoder_final, scope + "decoder/final_ln");
  return b.Einsum({b.Scale(h, InvSqrt(o.d_model), scope + "decoder/output_scaled"), w.embedding},
                  Concat(ids.shape, {d.vocab}), scope + "logits");
}

// targets shifted right by one along length, 0 (pad, the start token) first.
TensorRef ShiftRight(GraphBuilder& b, const TensorRef& targets, const std::string& name) {
  v1::Op op;
  op.set_type("shift");
  op.add_dims("length");
  (*op.mutable_attrs())["offset"].set_i(1);
  return b.Apply(std::move(op), {targets}, name);
}

TensorRef TokenRows(GraphBuilder& b, const TensorRef& step, const Shape& shape,
                    const std::string& path, int64_t vocab, const std::string& name) {
  v1::Op op;
  op.set_type("token_rows");
  *op.mutable_shape() = shape.ToProto();
  (*op.mutable_attrs())["path"].set_s(path);
  (*op.mutable_attrs())["vocab"].set_i(vocab);
  return b.Apply(std::move(op), {step}, name);
}

// A zeros tensor of `shape` and `dtype`.
TensorRef Zeros(GraphBuilder& b, const Shape& shape, DType dtype, const std::string& name) {
  v1::Op op;
  op.set_type("zeros");
  *op.mutable_shape() = shape.ToProto();
  op.set_dtype(dtype == DType::kInt32 ? v1::DT_INT32 : v1::DT_FLOAT32);
  return b.Apply(std::move(op), {}, name);
}

TensorRef IntRange(GraphBuilder& b, const Dim& dim, const std::string& name) {
  v1::Op op;
  op.set_type("range");
  *op.mutable_shape() = Shape({dim}).ToProto();
  op.set_dtype(v1::DT_INT32);
  return b.Apply(std::move(op), {}, name);
}

// Label-smoothed one-hot targets: 1 - s + s/V at the target, s/V elsewhere.
TensorRef SmoothedTargets(GraphBuilder& b, const EncDecOptions& o, const TensorRef& targets,
                          const std::string& name) {
  const float off = o.label_smoothing / static_cast<float>(o.vocab);
  v1::Op op;
  op.set_type("one_hot");
  *op.mutable_shape() = Shape({{"vocab", o.vocab}}).ToProto();
  (*op.mutable_attrs())["on_value"].set_f(1.0f - o.label_smoothing + off);
  (*op.mutable_attrs())["off_value"].set_f(off);
  return b.Apply(std::move(op), {targets}, name);
}

// Scores that rule a hypothesis out (Mesh-TensorFlow's beam search uses 1e7 the same way).
constexpr float kNotAScore = 1e7f;

// An op of `type` with attrs {scalar: s, scalar_first: true}: s (op) x.
TensorRef ScalarFirst(GraphBuilder& b, const std::string& type, float s, const TensorRef& x,
                      const std::string& name) {
  v1::Op op;
  op.set_type(type);
  (*op.mutable_attrs())["scalar"].set_f(s);
  (*op.mutable_attrs())["scalar_first"].set_b(true);
  return b.Apply(std::move(op), {x}, name);
}

// top_k of `x` along `dim`: its `k` largest (output "values") or their positions ("indices")
// along new dim `new_dim`.
TensorRef TopK(GraphBuilder& b, const TensorRef& x, const std::string& dim, int64_t k,
               const std::string& new_dim, const std::string& output, const std::string& name) {
  v1::Op op;
  op.set_type("top_k");
  op.add_dims(dim);
  (*op.mutable_attrs())["k"].set_i(k);
  (*op.mutable_attrs())["new_dim"].set_s(new_dim);
  (*op.mutable_attrs())["output"].set_s(output);
  return b.Apply(std::move(op), {x}, name);
}

// x and y joined along their dims x_dim and y_dim into `new_dim`.
TensorRef Concat2(GraphBuilder& b, const TensorRef& x, const std::string& x_dim,
                  const TensorRef& y, const std::string& y_dim, const std::string& new_dim,
                  const std::string& name) {
  v1::Op op;
  op.set_type("concat");
  op.add_dims(x_dim);
  op.add_dims(y_dim);
  (*op.mutable_attrs())["new_dim"].set_s(new_dim);
  return b.Apply(std::move(op), {x, y}, name);
}

// The decoder at one position for every row of `previous` (int32 ids, dims P = [batch] or
// [batch, beam]), at `position` (int32 scalar): the logits [P, vocab]. `caches` holds each
// layer's self-attention keys then values [P, memory_length, heads, d_kv], zero from `position`
// on; `next_caches` receives them with this position's written in. `encdec` holds each layer's
// encoder-decoder keys then values [batch, memory_length, heads, d_kv], `memory_bias` the source
// padding's [batch, memory_length].
TensorRef DecoderStep(GraphBuilder& g, const EncDecOptions& o, const Weights& w,
                      const TensorRef& previous, const TensorRef& position,
                      const std::vector<TensorRef>& caches, const std::vector<TensorRef>& encdec,
                      const TensorRef& memory_bias, std::vector<TensorRef>* next_caches) {
  const Dims d(o);
  TensorRef at_length = OneHot(g, position, d.length, "at_length");
  TensorRef at_memory = OneHot(g, position, d.memory, "at_memory");
  TensorRef x = g.Add(Embed(g, d, w, previous, "decoder/embed"),
                      g.Einsum({at_length, w.decoder_positions}, Shape({d.d_model}),
                               "decoder/embed/position"),
                      "decoder/embed/positions");
  // -1e9 at memory positions after this one (not yet written in the cache).
  TensorRef causal = g.Scale(
      Elementwise(g, "greater", {IntRange(g, d.memory, "mask/memory"), position}, "mask/future"),
      -1e9f, "mask");
  for (int64_t i = 0; i < o.decoder_layers; ++i) {
    const DecoderLayer& l = w.decoder[i];
    const std::string n = absl::StrCat("decoder/layer_", i, "/");
    TensorRef h = Norm(g, o, x, l.ln1, n + "ln1");
    const Shape kv = Concat(Drop(h.shape, "d_model"), {d.heads, d.d_kv});
    const Shape& cache = caches[2 * i].shape;
    TensorRef k_new = g.Einsum({h, l.self.k}, kv, n + "self_attention/k_proj");
    TensorRef v_new = g.Einsum({h, l.self.v}, kv, n + "self_attention/v_proj");
    // Writes this position's key and value into the (zero there) cache.
    TensorRef k = g.Add(caches[2 * i], g.Einsum({k_new, at_memory}, cache, n + "cache/k_at"),
                        n + "cache/k");
    TensorRef v = g.Add(caches[2 * i + 1],
                        g.Einsum({v_new, at_memory}, cache, n + "cache/v_at"), n + "cache/v");
    next_caches->push_back(k);
    next_caches->push_back(v);
    TensorRef a = Attention(g, d, l.self, h, k, v, causal, n + "self_attention");
    x = g.Add(x, a, n + "self_attention/residual");
    h = Norm(g, o, x, l.ln2, n + "ln2");
    a = Attention(g, d, l.encdec, h, encdec[2 * i], encdec[2 * i + 1], memory_bias,
                  n + "encdec_attention");
    x = g.Add(x, a, n + "encdec_attention/residual");
    h = Norm(g, o, x, l.ln3, n + "ln3");
    x = g.Add(x, Ffn(g, d, h, l.w1, l.w2, n + "ffn"), n + "ffn/residual");
  }
  TensorRef h = Norm(g, o, x, w.decoder_final, "decoder/final_ln");
  return g.Einsum({g.Scale(h, InvSqrt(o.d_model), "decoder/output_scaled"), w.embedding},
                  Concat(previous.shape, {d.vocab}), "logits");
}

// A decoding loop's carried tensors: the state it changes (given by the caller, then the
// caches), then what every iteration only reads (the encoder-decoder keys and values, the
// padding bias and the weights); `in` holds the body's placeholders for them, in the same order.
struct DecodeLoop {
  std::vector<TensorRef> init;  // outer tensors, in carried order
  std::vector<TensorRef> in;    // the body's placeholders for them
  GraphBuilder body;
  std::vector<TensorRef> state, caches, encdec;
  TensorRef memory_bias;
  Weights weights;  // the body's

  // Carries `state_init`, then zero caches of shape `cache`, then the read-only part.
  void Start(GraphBuilder& b, const EncDecOptions& o, const Weights& w, const TensorRef& memory,
             const TensorRef& bias, std::vector<TensorRef> state_init, const Shape& cache) {
    const Dims d(o);
    init = std::move(state_init);
    const size_t num_state = init.size();
    for (int64_t i = 0; i < o.decoder_layers; ++i) {
      init.push_back(Zeros(b, cache, DType::kFloat32, absl::StrCat("decode/cache_k", i, "_0")));
      init.push_back(Zeros(b, cache, DType::kFloat32, absl::StrCat("decode/cache_v", i, "_0")));
    }
    for (int64_t i = 0; i < o.decoder_layers; ++i) {
      const std::string n = absl::StrCat("decoder/layer_", i, "/encdec_attention/");
      init.push_back(Project(b, d, memory, w.decoder[i].encdec.k, n + "k_proj"));
      init.push_back(Project(b, d, memory, w.decoder[i].encdec.v, n + "v_proj"));
    }
    init.push_back(bias);
    for (const TensorRef& t : w.all) init.push_back(t);
    for (size_t i = 0; i < init.size(); ++i) {
      in.push_back(body.Placeholder(absl::StrCat("state_", i), init[i].shape, init[i].dtype));
    }
    size_t next = 0;
    state.assign(in.begin(), in.begin() + num_state);
    next += num_state;
    caches.assign(in.begin() + next, in.begin() + next + 2 * o.decoder_layers);
    next += 2 * o.decoder_layers;
    encdec.assign(in.begin() + next, in.begin() + next + 2 * o.decoder_layers);
    next += 2 * o.decoder_layers;
    memory_bias = in[next++];
    weights = AddWeights(o, [&](const std::string&, const Shape&, const Initializer&) {
      return in[next++];
    });
  }

  // While_loop ops of `trip_count` iterations whose results are the final values of carried
  // tensors `outputs[i]`, named `names[i]` (one loop per result: a while_loop has one output).
  // `next` lists the next value of every state tensor, then of every cache.
  std::vector<TensorRef> Finish(GraphBuilder& b, int64_t trip_count, std::vector<TensorRef> next,
                                const std::vector<int>& outputs,
                                const std::vector<std::string>& names) {
    for (size_t i = next.size(); i < in.size(); ++i) next.push_back(in[i]);  // read-only
    v1::Graph graph = body.proto();
    graph.clear_outputs();
    for (const TensorRef& t : next) graph.add_outputs(t.name);
    std::vector<TensorRef> results;
    for (size_t r = 0; r < outputs.size(); ++r) {
      v1::Op op;
      op.set_type("while_loop");
      *op.mutable_body() = graph;
      auto& attrs = *op.mutable_attrs();
      attrs["trip_count"].set_i(trip_count);
      for (const TensorRef& t : in) attrs["carried"].mutable_strings()->add_values(t.name);
      attrs["output"].set_i(outputs[r]);
      results.push_back(b.Apply(std::move(op), init, names[r]));
    }
    return results;
  }
};

// Greedy decoding (see BuildEncDecDecoder): "decoded" [length, batch] and "decoded_scores".
absl::Status GreedyLoop(GraphBuilder& b, const EncDecOptions& o, const DecodeOptions& decode,
                        const Weights& w, const TensorRef& memory, const TensorRef& bias,
                        DecoderOutputs* out) {
  const Dims d(o);
  DecodeLoop loop;
  loop.Start(b, o, w, memory, bias,
             {Zeros(b, Shape({}), DType::kInt32, "decode/position0"),
              Zeros(b, Shape({d.batch}), DType::kInt32, "decode/previous0"),
              Zeros(b, Shape({d.length, d.batch}), DType::kInt32, "decode/output0"),
              Zeros(b, Shape({d.batch}), DType::kFloat32, "decode/done0"),
              Zeros(b, Shape({d.batch}), DType::kFloat32, "decode/score0")},
             Shape({d.batch, d.memory, d.heads, d.d_kv}));
  GraphBuilder& g = loop.body;
  const TensorRef position = loop.state[0], previous = loop.state[1], output = loop.state[2],
                  done = loop.state[3], score = loop.state[4];
  std::vector<TensorRef> next_caches;
  TensorRef logits = DecoderStep(g, o, loop.weights, previous, position, loop.caches,
                                 loop.encdec, loop.memory_bias, &next_caches);
  v1::Op argmax;
  argmax.set_type("argmax");
  argmax.add_dims("vocab");
  TensorRef best = g.Apply(std::move(argmax), {logits}, "best");
  // After a row's EOS its tokens are pad and its score stops growing.
  TensorRef live = ScalarFirst(g, "sub", 1, done, "live");
  v1::Op where;
  where.set_type("where");
  (*where.mutable_attrs())["scalar"].set_f(0);
  TensorRef token = g.Apply(std::move(where), {live, best}, "token");
  TensorRef log_probs = Normalize(g, "log_softmax", {logits}, {"vocab"}, 0, "log_probs");
  TensorRef token_log_prob = g.Einsum({log_probs, OneHot(g, best, d.vocab, "best/one_hot")},
                                      Shape({d.batch}), "token_log_prob");
  std::vector<TensorRef> next = {
      ScalarOp(g, "add", position, 1, "next_position"),
      token,
      Elementwise(g, "where",
                  {Elementwise(g, "equal", {IntRange(g, d.length, "positions"), position},
                               "here"),
                   token, output},
                  "next_output"),
      Elementwise(g, "maximum", {done, ScalarOp(g, "equal", best, kEosId, "is_eos")},
                  "next_done"),
      g.Add(score, g.Mul(live, token_log_prob, "live_log_prob"), "next_score")};
  for (const TensorRef& c : next_caches) next.push_back(c);
  if (!g.status().ok()) return g.status();
  const int64_t trips = decode.max_length > 0 ? decode.max_length : o.length;
  std::vector<int> outputs = {2};
  std::vector<std::string> names = {"decoded"};
  if (decode.scores) {
    outputs.push_back(4);
    names.push_back("decoded_scores");
  }
  std::vector<TensorRef> results = loop.Finish(b, trips, std::move(next), outputs, names);
  out->decoded = results[0];
  if (decode.scores) out->scores = results[1];
  return absl::OkStatus();
}

// Beam search (Mesh-TensorFlow's beam_search.py; see BuildEncDecDecoder): "decoded" float32
// [batch, result] = the best hypothesis' ids at [0, length), its score at length.
absl::Status BeamLoop(GraphBuilder& b, const EncDecOptions& o, const DecodeOptions& decode,
                      const Weights& w, const TensorRef& memory, const TensorRef& bias,
                      DecoderOutputs* out) {
  const Dims d(o);
  const int64_t k = decode.beam;
  const Dim beam{"beam", k}, next_beam{"beam_next", k}, candidates{"candidates", 2 * k},
      pool{"pool", 3 * k}, result{"result", o.length + 1};
  // Only beam 0 is alive at the start (the others would repeat it).
  std::vector<float> first(o.batch * k, -kNotAScore);
  for (int64_t r = 0; r < o.batch; ++r) first[r * k] = 0;
  DecodeLoop loop;
  loop.Start(b, o, w, memory, bias,
             {Zeros(b, Shape({}), DType::kInt32, "decode/position0"),
              Zeros(b, Shape({d.batch, beam, d.length}), DType::kFloat32, "decode/alive_seq0"),
              b.Constant(Tensor::Float(Shape({d.batch, beam}), first), "decode/alive_log_probs0"),
              Zeros(b, Shape({d.batch, beam, d.length}), DType::kFloat32, "decode/finished_seq0"),
              ScalarOp(b, "add",
                       Zeros(b, Shape({d.batch, beam}), DType::kFloat32, "decode/finished_zero"),
                       -kNotAScore, "decode/finished_scores0"),
              Zeros(b, Shape({d.batch, result}), DType::kFloat32, "decode/best0")},
             Shape({d.batch, beam, d.memory, d.heads, d.d_kv}));
  GraphBuilder& g = loop.body;
  const TensorRef position = loop.state[0], alive_seq = loop.state[1],
                  alive_log_probs = loop.state[2], finished_seq = loop.state[3],
                  finished_scores = loop.state[4];
  // Each alive beam's previous token (0, the start, at position 0).
  TensorRef at_length = OneHot(g, position, d.length, "beam/at_length");
  TensorRef previous = Cast(
      g,
      g.Einsum({alive_seq, OneHot(g, ScalarOp(g, "add", position, -1, "beam/last"), d.length,
                                  "beam/at_last")},
               Shape({d.batch, beam}), "beam/previous_f"),
      "int32", "beam/previous");
  std::vector<TensorRef> next_caches;
  TensorRef logits = DecoderStep(g, o, loop.weights, previous, position, loop.caches,
                                 loop.encdec, loop.memory_bias, &next_caches);
  TensorRef log_probs =
      g.Add(Normalize(g, "log_softmax", {logits}, {"vocab"}, 0, "beam/log_softmax"),
            alive_log_probs, "beam/log_probs");
  // The length penalty ((5 + i + 1) / 6)^alpha of a hypothesis of i + 1 tokens.
  TensorRef penalty = ScalarOp(
      g, "pow",
      ScalarOp(g, "mul", ScalarOp(g, "add", Cast(g, position, "float32", "beam/i"), 6, "beam/6i"),
               1.0f / 6, "beam/length_ratio"),
      decode.alpha, "beam/length_penalty");
  TensorRef scores = g.Div(log_probs, penalty, "beam/scores");
  // The best 2k of beam x vocab: which beam each extends and with which token.
  TensorRef flat =
      g.Reshape(scores, Shape({d.batch, {"beam_vocab", k * o.vocab}}), "beam/flat_scores");
  TensorRef top_scores = TopK(g, flat, "beam_vocab", 2 * k, "candidates", "values", "beam/top");
  TensorRef top_index = Cast(
      g, TopK(g, flat, "beam_vocab", 2 * k, "candidates", "indices", "beam/top_index"), "float32",
      "beam/top_index_f");
  // index = beam * vocab + token; the quotient is exact enough to truncate (index < 2^24).
  TensorRef origin = Cast(g, ScalarOp(g, "div", top_index, static_cast<float>(o.vocab),
                                      "beam/origin_f"),
                          "int32", "beam/origin");
  TensorRef token = g.Sub(top_index,
                          ScalarOp(g, "mul", Cast(g, origin, "float32", "beam/origin_float"),
                                   static_cast<float>(o.vocab), "beam/origin_start"),
                          "beam/token");
  TensorRef from = OneHot(g, origin, beam, "beam/from");  // [batch, candidates, beam]
  TensorRef candidate_seq =
      g.Add(g.Einsum({from, alive_seq}, Shape({d.batch, candidates, d.length}), "beam/prefixes"),
            g.Einsum({token, at_length}, Shape({d.batch, candidates, d.length}), "beam/tokens"),
            "beam/candidate_seq");
  TensorRef candidate_log_probs = g.Mul(top_scores, penalty, "beam/candidate_log_probs");
  TensorRef is_eos = ScalarOp(g, "equal", token, kEosId, "beam/is_eos");
  // Alive: the best k candidates that did not end.
  TensorRef alive_scores = g.Add(candidate_log_probs, g.Scale(is_eos, -kNotAScore, "beam/ended"),
                                 "beam/alive_scores");
  TensorRef keep = OneHot(
      g, TopK(g, alive_scores, "candidates", k, "beam_next", "indices", "beam/alive_index"),
      candidates, "beam/keep");  // [batch, beam_next, candidates]
  TensorRef gather = g.Einsum({keep, from}, Shape({d.batch, next_beam, beam}), "beam/gather");
  TensorRef new_alive_seq = g.RenameDim(
      g.Einsum({keep, candidate_seq}, Shape({d.batch, next_beam, d.length}),
               "beam/next_alive_seq"),
      "beam_next", "beam", "beam/alive_seq");
  TensorRef new_alive_log_probs = g.RenameDim(
      g.Einsum({keep, alive_scores}, Shape({d.batch, next_beam}), "beam/next_alive_log_probs"),
      "beam_next", "beam", "beam/alive_log_probs");
  // Finished: the best k of the finished so far and the candidates that ended here.
  TensorRef ended_scores = g.Add(
      top_scores,
      g.Scale(ScalarFirst(g, "sub", 1, is_eos, "beam/not_eos"), -kNotAScore, "beam/not_ended"),
      "beam/ended_scores");
  TensorRef pool_scores =
      Concat2(g, finished_scores, "beam", ended_scores, "candidates", "pool", "beam/pool_scores");
  TensorRef pool_seq =
      Concat2(g, finished_seq, "beam", candidate_seq, "candidates", "pool", "beam/pool_seq");
  TensorRef pick = OneHot(
      g, TopK(g, pool_scores, "pool", k, "beam_next", "indices", "beam/finished_index"), pool,
      "beam/pick");  // [batch, beam_next, pool]
  TensorRef new_finished_seq = g.RenameDim(
      g.Einsum({pick, pool_seq}, Shape({d.batch, next_beam, d.length}), "beam/next_finished_seq"),
      "beam_next", "beam", "beam/finished_seq");
  TensorRef new_finished_scores = g.RenameDim(
      g.Einsum({pick, pool_scores}, Shape({d.batch, next_beam}), "beam/next_finished_scores"),
      "beam_next", "beam", "beam/finished_scores");
  // The answer so far: the best finished hypothesis, or, for a row with none, the best alive one
  // (scored with this length's penalty); its ids then its score.
  TensorRef first_beam =
      OneHot(g, Zeros(g, Shape({}), DType::kInt32, "beam/zero"), beam, "beam/first");
  TensorRef best_finished_score =
      g.Einsum({new_finished_scores, first_beam}, Shape({d.batch}), "beam/best_finished_score");
  TensorRef any_finished =
      ScalarOp(g, "greater", best_finished_score, -kNotAScore / 2, "beam/any_finished");
  TensorRef best_seq = Elementwise(
      g, "where",
      {any_finished,
       g.Einsum({new_finished_seq, first_beam}, Shape({d.batch, d.length}),
                "beam/best_finished_seq"),
       g.Einsum({new_alive_seq, first_beam}, Shape({d.batch, d.length}), "beam/best_alive_seq")},
      "beam/best_seq");
  TensorRef best_score = Elementwise(
      g, "where",
      {any_finished, best_finished_score,
       g.Div(g.Einsum({new_alive_log_probs, first_beam}, Shape({d.batch}),
                      "beam/best_alive_log_prob"),
             penalty, "beam/best_alive_score")},
      "beam/best_score");
  std::vector<TensorRef> next = {
      ScalarOp(g, "add", position, 1, "next_position"),
      new_alive_seq,
      new_alive_log_probs,
      new_finished_seq,
      new_finished_scores,
      Concat2(g, best_seq, "length",
              g.Reshape(best_score, Shape({d.batch, {"score", 1}}), "beam/score_column"),
              "score", "result", "beam/best")};
  // The caches follow their beams to the alive hypotheses that extend them.
  for (size_t i = 0; i < next_caches.size(); ++i) {
    const TensorRef& c = next_caches[i];
    next.push_back(g.RenameDim(
        g.Einsum({gather, c}, Concat(Shape({d.batch, next_beam}), {d.memory, d.heads, d.d_kv}),
                 absl::StrCat("beam/reorder_", i)),
        "beam_next", "beam", absl::StrCat("beam/cache_", i)));
  }
  if (!g.status().ok()) return g.status();
  const int64_t trips = decode.max_length > 0 ? decode.max_length : o.length;
  out->decoded = loop.Finish(b, trips, std::move(next), {5}, {"decoded"})[0];
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckEncDecOptions(const EncDecOptions& o) {
  for (const auto& [name, value] : std::vector<std::pair<const char*, int64_t>>{
           {"batch", o.batch},
           {"length", o.length},
           {"d_model", o.d_model},
           {"heads", o.heads},
           {"d_kv", o.d_kv},
           {"d_ff", o.d_ff},
           {"encoder_layers", o.encoder_layers},
           {"decoder_layers", o.decoder_layers}}) {
    if (value <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("transformer_encdec: ", name, " must be positive, not ", value));
    }
  }
  if (o.vocab < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "transformer_encdec: vocab must be >= 2 (pad 0 and EOS 1), not ", o.vocab));
  }
  if (o.norm != "layer" && o.norm != "rms") {
    return absl::InvalidArgumentError(
        absl::StrCat("transformer_encdec: norm must be 'layer' or 'rms', not '", o.norm, "'"));
  }
  if (!(o.dropout >= 0 && o.dropout < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("transformer_encdec: dropout must be in [0, 1), not ", o.dropout));
  }
  if (!(o.label_smoothing >= 0 && o.label_smoothing < 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "transformer_encdec: label_smoothing must be in [0, 1), not ", o.label_smoothing));
  }
  if (o.inputs_path.empty() != o.targets_path.empty()) {
    return absl::InvalidArgumentError(
        "transformer_encdec: give both inputs_path and targets_path (or neither: synthetic ids)");
  }
  if (!(o.epsilon > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("transformer_encdec: epsilon must be > 0, not ", o.epsilon));
  }
  return absl::OkStatus();
}

absl::StatusOr<ModelOutputs> BuildEncDec(GraphBuilder& b, const EncDecOptions& o) {
  if (absl::Status s = CheckEncDecOptions(o); !s.ok()) return s;
  const Shape tokens({{"batch", o.batch}, {"length", o.length}});
  ModelOutputs m;
  m.data_step = DataStep(b);
  if (!o.inputs_path.empty()) {
    m.inputs = TokenRows(b, m.data_step, tokens, o.inputs_path, o.vocab, "inputs");
    m.targets = TokenRows(b, m.data_step, tokens, o.targets_path, o.vocab, "targets");
  } else {
    const float v = static_cast<float>(o.vocab);
    m.inputs = Cast(b, RandomUniform(b, tokens, m.data_step, o.seed, 0, v, "inputs/uniform"),
                    "int32", "inputs");
    m.targets = Cast(b, RandomUniform(b, tokens, m.data_step, o.seed + 1, 0, v, "targets/uniform"),
                     "int32", "targets");
  }
  Weights w = AddWeights(o, [&b](const std::string& name, const Shape& shape,
                                 const Initializer& init) { return b.Variable(name, shape, init); });
  m.variables = w.all;
  const TensorRef bias = PaddingBias(b, m.inputs, "encoder/padding_bias");
  const TensorRef encoded = Encode(b, o, w, m.inputs, bias, m.data_step, "");
  const TensorRef decoder_inputs = ShiftRight(b, m.targets, "decoder/inputs");
  m.output = DecodeAll(b, o, w, decoder_inputs, encoded, bias, m.data_step, "");
  TensorRef ce = Normalize(b, "softmax_cross_entropy",
                           {m.output, SmoothedTargets(b, o, m.targets, "targets/smoothed")},
                           {"vocab"}, 0, "cross_entropy");
  // 1 at real target tokens, 0 at padding (ids are >= 0).
  TensorRef weight =
      ScalarOp(b, "minimum", Cast(b, m.targets, "float32", "targets/float"), 1, "targets/weight");
  m.loss = b.Div(b.ReduceSum(b.Mul(ce, weight, "loss/weighted"), {}, "loss/sum"),
                 b.ReduceSum(weight, {}, "loss/tokens"), "loss");
  if (!b.status().ok()) return b.status();
  return m;
}

absl::StatusOr<DecoderOutputs> BuildEncDecDecoder(GraphBuilder& b, const EncDecOptions& o,
                                                  const DecodeOptions& decode) {
  if (absl::Status s = CheckEncDecOptions(o); !s.ok()) return s;
  if (decode.max_length < 0 || decode.max_length > o.length) {
    return absl::InvalidArgumentError(absl::StrCat("transformer_encdec: max_length must be in 1..",
                                                   o.length, " (the model's length), not ",
                                                   decode.max_length));
  }
  if (decode.beam < 1 || (decode.beam > 1 && 2 * decode.beam > o.vocab)) {
    return absl::InvalidArgumentError(
        absl::StrCat("transformer_encdec: beam must be >= 1 (and 2 x beam <= vocab ", o.vocab,
                     "), not ", decode.beam));
  }
  const Dims d(o);
  DecoderOutputs out;
  out.inputs = b.Placeholder("inputs", Shape({d.batch, d.length}), DType::kInt32);
  Weights w = AddWeights(o, [&b](const std::string& name, const Shape& shape,
                                 const Initializer& init) { return b.Variable(name, shape, init); });
  out.variables = w.all;
  const TensorRef none;
  const TensorRef bias = PaddingBias(b, out.inputs, "encoder/padding_bias");
  const TensorRef encoded = Encode(b, o, w, out.inputs, bias, none, "");
  const TensorRef memory = b.RenameDim(encoded, "length", "memory_length", "decoder/memory");
  absl::Status built = decode.beam == 1 && !decode.beam_search ? GreedyLoop(b, o, decode, w, memory, bias, &out)
                                        : BeamLoop(b, o, decode, w, memory, bias, &out);
  if (!built.ok()) return built;
  if (!b.status().ok()) return b.status();
  b.MarkOutput(out.decoded);
  if (!out.scores.name.empty()) b.MarkOutput(out.scores);
  if (decode.teacher_forcing) {
    out.forced_targets =
        b.Placeholder("forced_targets", Shape({d.batch, d.length}), DType::kInt32);
    out.forced_logits = DecodeAll(b, o, w, ShiftRight(b, out.forced_targets, "forced/inputs"),
                                  encoded, bias, none, "forced/");
  }
  if (!b.status().ok()) return b.status();
  return out;
}

}  // namespace models
}  // namespace meshrt
