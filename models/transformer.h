// The Mesh-TensorFlow paper's decoder-only Transformer language model, byte level by default — the
// same model as ../shared/peers/transformer_bench.py (pre-LayerNorm residual blocks, learned
// positions, no biases in the dense layers, untied output, vocab 256):
//
//   ids, targets = text_windows(data_step) offsets 0 and 1 [batch, length] (int32 token ids of
//                  data_path read on the workers: its bytes, or the token ids of an .npy / uint16
//                  file with data_format, in [0, vocab)), or random_uniform ids in [0, vocab)
//                  keyed by the step when data_path is empty (synthetic, for benchmarks)
//   x  = one_hot(ids, vocab) · embedding [vocab, d_model] + positions [length, d_model]
//   per layer i (variables "layer_<i>/..."):
//     h  = norm(x)                                    ln1/scale, ln1/bias [d_model]
//     q, k, v = h · attention/{q,k,v} [d_model, heads, d_kv]  (k, v over `memory`, the renamed
//                                                     `length`); q scaled by d_kv^-1/2
//     x += softmax_memory(q·k + causal mask) · v · attention/o [heads, d_kv, d_model]
//     h  = norm(x)                                    ln2/scale, ln2/bias
//     x += relu(h · ffn/w1 [d_model, d_ff]) · ffn/w2 [d_ff, d_model]
//   logits = norm(x) · output [d_model, vocab]        final_ln/scale, final_ln/bias
//   loss   = mean over batch and length of softmax_cross_entropy_vocab(logits, one_hot(targets))
//
// norm is layer_norm (scale and bias) or rms_norm (scale only; no bias variables), epsilon 1e-5
// (torch's). The causal mask adds -1e9 where memory > length (exp underflows to exactly 0).
// Initializers follow the peer: embedding N(0, 1), positions N(0, 0.1²), q/k/v and w1 and output
// N(0, 1/d_model), o N(0, 1/(heads·d_kv)), w2 N(0, 1/d_ff) (times init_scale), norm scales ones,
// biases zeros.
//
// Dim names are exactly batch, length, memory, d_model, heads, d_kv, d_ff, vocab, so the paper's
// layouts are `batch:rows` (data parallel), `heads:cols,d_ff:cols,vocab:cols` (model parallel),
// and both together on mesh `rows:2,cols:2`.
#ifndef MESHRT_MODELS_TRANSFORMER_H_
#define MESHRT_MODELS_TRANSFORMER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/ops/builder.h"
#include "models/model.h"

namespace meshrt {
namespace models {

struct TransformerOptions {
  // Defaults: small enough to train in minutes on 2 cores; batch, heads, d_ff and vocab divide
  // by 4 (every paper layout on rows:2,cols:2).
  int64_t batch = 16;
  int64_t length = 64;
  int64_t d_model = 128;
  int64_t heads = 4;
  int64_t d_kv = 32;
  int64_t d_ff = 512;
  int64_t layers = 2;
  int64_t vocab = 256;
  std::string norm = "layer";  // layer | rms
  float epsilon = 1e-5f;       // of the norms
  std::string data_path;       // the data file read by text_windows; empty: synthetic ids
  // How data_path holds its tokens (core/ops/ops_dataset.h text_windows format): "bytes" (a text file,
  // vocab >= 256), "npy" (1-D int32 or uint16 .npy) or "uint16" (raw, nanoGPT's .bin); ids of
  // npy/uint16 must be in [0, vocab).
  std::string data_format = "bytes";
  // > 0: the last eval_fraction of data_path's tokens are held out: training reads split "train"
  // and the graph also computes "eval/loss" over split "eval" (see BuildTransformer). In [0, 1).
  float eval_fraction = 0;
  int64_t seed = 1;            // initializers (and the synthetic data stream)
  float embedding_stddev = 1.0f;
  float position_stddev = 0.1f;
  float init_scale = 1.0f;  // multiplies the dense layers' fan-in stddevs
};

// The peer's default (transformer_bench.py): batch 32, length 128, d_model 256, heads 8, d_kv 32,
// d_ff 1024, 2 layers, vocab 256 (1.74M parameters).
TransformerOptions BenchConfig();

// The model-scale benchmark (bench/train_bench, issue 14): transformer_bench.py --d-model 512
// --heads 8 --d-kv 64 --d-ff 2048 --layers 4 --seq-len 256 --batch 8, vocab 256 (12.9M
// parameters, ~169 GFLOP per training step). Batch 8 x 256 = 2048 tokens: one step takes about a
// second on two cores, and the batch divides by 4 (every paper layout on rows:2,cols:2).
TransformerOptions ModelScaleBenchConfig();

// Checks sizes (positive; vocab >= 256 with a byte data file), the norm, data_format and
// eval_fraction (npy/uint16 and eval_fraction > 0 need a data_path). InvalidArgument naming the
// option.
absl::Status CheckTransformerOptions(const TransformerOptions& options);

// Adds the training forward pass and loss to `b`: `inputs` = ids, `targets` = next-token ids
// (int32 [batch, length]), `output` = logits [batch, length, vocab]. Variables in creation order:
// embedding, positions, layer_<i>/{ln1/scale, ln1/bias, attention/q, attention/k, attention/v,
// attention/o, ln2/scale, ln2/bias, ffn/w1, ffn/w2}, final_ln/{scale, bias}, output.
//
// With eval_fraction > 0, inputs and targets read split "train" and the graph also holds the eval
// forward pass: every op of the training forward pass and loss again, named "eval/" + its name
// ("eval/inputs", ..., "eval/logits", "eval/loss"), on the same variables, reading split "eval" at
// the constant step "eval/step" = 0 (the same held-out batch every time, so evaluations compare).
// Its scalar `eval_loss` ("eval/loss") is not a graph output and no loss reads it: a step pruned
// to its fetches (runtime/executor.h) computes it only when it is fetched, with the weights the
// step starts from. With eval_fraction 0 no eval op is added.
absl::StatusOr<ModelOutputs> BuildTransformer(GraphBuilder& b, const TransformerOptions& options);

// The greedy-sampling graph: the same variables (names, shapes) without a batch dim.
//   placeholders  "prompt" int32 [length] (ids; entries after `position` do not matter: causal),
//                 "position" int32 scalar (0 <= position < length)
//   outputs       logits [length, vocab], "next_logits" [vocab] (the logits at `position`, i.e.
//                 the prediction of the byte at position + 1), "next_token" int32 scalar (argmax)
// A CLI samples greedily by loading the trained variables and running it once per new byte,
// writing next_token into prompt[position + 1].
struct SamplerOutputs {
  TensorRef prompt, position;
  TensorRef logits, next_logits, next_token;
  std::vector<TensorRef> variables;
};
absl::StatusOr<SamplerOutputs> BuildTransformerSampler(GraphBuilder& b,
                                                       const TransformerOptions& options);

// Decoding on the mesh: one program that continues a prompt per row, one position per
// iteration of a while_loop with a key/value cache per layer (as BuildEncDecDecoder does for the
// encoder-decoder, models/transformer_encdec.h), instead of the sampler's whole forward pass per
// new token.
struct LmDecodeOptions {
  // New tokens after each row's prompt; positions after them are 0. 0: up to `length` (every
  // position after the prompt). At most length - 1.
  int64_t max_new = 0;
  // 0: greedy (argmax of the logits). T > 0: a sample from softmax(logits / T), drawn Gumbel-max:
  // argmax(logits / T + g), g = -log(-log(u)), u uniform keyed on (seed, position, row, vocab
  // entry) by the layout-invariant counter-based generator (core/ops/ops_random.h), so every mesh
  // and layout draws the same tokens. Finite.
  float temperature = 0;
  // With temperature > 0 and top_k = K > 0, only the K largest logits of a position can be drawn:
  // the others (those below the K-th largest, which the `top_k` op gives) are masked to -3.4e38
  // after the noise is added (so no temperature lets them through). Ties with the K-th largest
  // stay in. 0: the whole vocab. In [0, vocab]; greedy ignores it (its argmax is in any top K).
  int64_t top_k = 0;
  int64_t seed = 1;  // of the sampling noise
  // The longest prompt_length that will be fed, when known (the CLI knows it): the loop then runs
  // max_prompt + max_new - 1 iterations instead of length - 1 (only with max_new > 0). A row with
  // a longer prompt gets fewer new tokens (the loop stops first). 0: unknown.
  int64_t max_prompt = 0;
};

// The decoding graph: the same variables (names, shapes) as BuildTransformer, so its checkpoint
// loads (a partial restore: no optimizer slots or data_step).
//   placeholders  "prompt" int32 [batch, length]: ids; a row's first prompt_length entries are its
//                 prompt, the rest are not read. "prompt_length" int32 [batch]: >= 1 (smaller
//                 counts as 1, i.e. position 0 is always the prompt's), > length counts as length.
//   output        "generated" int32 [batch, length]: each row's prompt at positions <
//                 prompt_length, then the decoded tokens, one per position, up to prompt_length +
//                 max_new (max_new 0: to the end), then 0.
// Iteration t (0 <= t < trips, trips = length - 1, or max_prompt + max_new - 1 when both are set)
// feeds the token at position t (the prompt's, or the one decoded at t) through the model —
// embedding plus positions[t], per layer its key and value written into the layer's cache
// [batch, memory, heads, d_kv] at memory position t by a one-hot outer product, attention of the
// query over memory positions <= t — and chooses the token at t + 1 from the logits (greedy or
// sampled, see LmDecodeOptions); prompt positions keep the prompt's token (teacher-forced into
// the cache). The loop carries the position, the generated ids (float32: exact below 2^24), the
// caches, the write mask and every weight. InvalidArgument naming the option for a bad model
// option (CheckTransformerOptions), temperature < 0 or not finite, top_k outside [0, vocab],
// max_new outside [0, length - 1], max_prompt < 0 or max_prompt + max_new > length, length < 2.
struct LmDecoderOutputs {
  TensorRef prompt, prompt_length;
  TensorRef generated;
  std::vector<TensorRef> variables;
};
absl::StatusOr<LmDecoderOutputs> BuildTransformerDecoder(GraphBuilder& b,
                                                         const TransformerOptions& options,
                                                         const LmDecodeOptions& decode = {});

}  // namespace models
}  // namespace meshrt

#endif  // MESHRT_MODELS_TRANSFORMER_H_
