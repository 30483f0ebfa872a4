// The Mesh-TensorFlow paper's translation model: an encoder-decoder Transformer after
// Mesh-TensorFlow's `transformer.Bitransformer` (reference/mesh-tensorflow-notes.md):
//
//   inputs, targets  int32 [batch, length] token ids (pad 0, EOS 1): token_rows of two 2-D .npy
//                    files written by the CLI from a vocabulary (text/vocab), one padded sentence
//                    per row, row i of one the translation of row i of the other; or synthetic ids
//   decoder input    targets shifted right by one along length (0 first: pad is the start token)
//   x = one_hot(ids)·shared/embedding [vocab, d_model] + positions [length, d_model] (one per stack)
//   encoder layer i  x += attention(norm(x), keys and values over memory_length, the padding of the
//                    inputs masked); x += ffn(norm(x))                       encoder/layer_<i>/...
//   decoder layer i  x += causal self-attention; x += encoder-decoder attention (queries from the
//                    decoder, keys and values from the encoder output renamed length ->
//                    memory_length, padding masked); x += ffn                decoder/layer_<i>/...
//   logits = einsum(norm(x) · d_model^-1/2, shared/embedding) [batch, length, vocab] (shared with
//            the input embedding, as Bitransformer shares them)
//   loss   = sum over non-pad target positions of cross_entropy(logits, label-smoothed targets)
//            / their count; label smoothing puts 1 - s + s/vocab on the target, s/vocab elsewhere
//
// Pre-norm residual blocks; dropout (rate `dropout`) on the embeddings and on every block's output
// before its residual add, drawn per step from the data counter so the mask is new each step and
// the same on every layout. Attention: d_kv^-1/2 query scaling, -1e9 added where masked. Dense
// layers have no biases, the FFN is relu (Mesh-TensorFlow's dense_relu_dense).
//
// Dim names: batch, length, memory_length, d_model, heads, d_kv, d_ff, vocab: the paper's layouts
// are `batch:rows` (data parallel), `heads:cols,d_ff:cols,vocab:cols` (model parallel), both on
// `rows:2,cols:2`; `length` may be split too.
//
// Decoding (BuildEncDecDecoder): greedy decoding as one program on the mesh — the encoder once, the
// encoder-decoder keys and values once, then a while_loop of `length` iterations, each feeding the
// previous token through the decoder with a key/value cache per self-attention layer (written at
// the step's position by a one-hot outer product: no recomputation of the prefix).
#ifndef MESHRT_MODELS_TRANSFORMER_ENCDEC_H_
#define MESHRT_MODELS_TRANSFORMER_ENCDEC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/ops/builder.h"
#include "models/model.h"

namespace meshrt {
namespace models {

// The translation model's token id contract (text/vocab): pad 0 (also the decoder's start token)
// and EOS 1.
inline constexpr int32_t kPadId = 0;
inline constexpr int32_t kEosId = 1;

struct EncDecOptions {
  // Defaults: small enough to train in tens of minutes on 2 cores; batch, heads, d_ff and vocab
  // divide by 4 (every paper layout on rows:2,cols:2).
  int64_t batch = 32;
  int64_t length = 32;  // of both sides (sentences longer are truncated when the data is written)
  int64_t d_model = 128;
  int64_t heads = 4;
  int64_t d_kv = 32;
  int64_t d_ff = 512;
  int64_t encoder_layers = 2;
  int64_t decoder_layers = 2;
  int64_t vocab = 8000;
  std::string norm = "layer";  // layer | rms
  float epsilon = 1e-6f;
  float dropout = 0.1f;          // in [0, 1)
  float label_smoothing = 0.1f;  // in [0, 1)
  // 2-D int32 .npy files [N, length] (core/ops/ops_dataset.h token_rows). Both empty: synthetic
  // ids, uniform in [0, vocab), for benchmarks and tests.
  std::string inputs_path, targets_path;
  int64_t seed = 1;
};

// InvalidArgument naming the option: sizes positive, vocab >= 2, the norm, dropout and label
// smoothing in [0, 1), both paths or neither.
absl::Status CheckEncDecOptions(const EncDecOptions& options);

// Adds the training forward pass and loss: `inputs` and `targets` are the token ids, `output` the
// logits [batch, length, vocab]. Variables in creation order: shared/embedding,
// encoder/positions, encoder/layer_<i>/{ln1/scale, ln1/bias, attention/{q,k,v,o}, ln2/scale,
// ln2/bias, ffn/w1, ffn/w2}, encoder/final_ln/{scale, bias}, decoder/positions,
// decoder/layer_<i>/{ln1/..., self_attention/{q,k,v,o}, ln2/..., encdec_attention/{q,k,v,o},
// ln3/..., ffn/w1, ffn/w2}, decoder/final_ln/{scale, bias} (no bias variables with rms norm).
absl::StatusOr<ModelOutputs> BuildEncDec(GraphBuilder& b, const EncDecOptions& options);

// The decoding graph: the same variables (names, shapes) as BuildEncDec, no dropout.
//   placeholder "inputs" int32 [batch, length]: source ids (pad 0, EOS-terminated)
//   output      "decoded" int32 [length, batch]: the greedy translation of each row, position by
//               position; after a row's EOS every position holds 0, and so do the positions
//               past max_length
//   with scores: also "decoded_scores" float32 [batch]: the sum of the log-probabilities of the
//               decoded tokens up to and including EOS (a second loop: it runs the decode again)
//   beam > 1    beam search instead (Mesh-TensorFlow's beam_search.py): per row `beam` alive and
//               `beam` finished hypotheses; each position scores every alive beam's next tokens
//               (log_softmax + the beam's log-probability) divided by the length penalty
//               ((5 + i + 1) / 6)^alpha, keeps the best 2 x beam over beam x vocab, of which the
//               best `beam` not ending in EOS stay alive (their caches reordered by a one-hot
//               einsum) and those ending in EOS compete with the finished ones. The loop always
//               runs max_length positions: once no alive beam can beat the worst finished one
//               (Mesh-TensorFlow's early stop) further positions change nothing. Output
//               "decoded" is then float32 [batch, result: length + 1]: the best finished
//               hypothesis' ids (the best alive one for a row with none), 0 after its EOS,
//               then its score (log-probability / length penalty).
//   with logits_of (a teacher-forcing check): "forced_logits" [batch, length, vocab], the
//               training forward pass (no dropout) on `inputs` and placeholder "forced_targets"
struct DecoderOutputs {
  TensorRef inputs;
  TensorRef decoded;
  TensorRef scores;            // empty name unless asked
  TensorRef forced_targets;    // empty name unless asked
  TensorRef forced_logits;     // empty name unless asked
  std::vector<TensorRef> variables;
};
struct DecodeOptions {
  int64_t max_length = 0;  // positions decoded (the loop's trip count), 1..length; 0: length
  int64_t beam = 1;        // 1: greedy; k > 1: beam search with k beams (2k <= vocab)
  float alpha = 0.6f;      // beam search's length penalty exponent
  bool beam_search = false;  // beam search even with beam 1 (which then equals greedy at alpha 0)
  bool scores = false;     // greedy: also "decoded_scores" (beam search always has its score)
  bool teacher_forcing = false;
};
absl::StatusOr<DecoderOutputs> BuildEncDecDecoder(GraphBuilder& b, const EncDecOptions& options,
                                                  const DecodeOptions& decode = {});

}  // namespace models
}  // namespace meshrt

#endif  // MESHRT_MODELS_TRANSFORMER_ENCDEC_H_
