// Translating with a transformer_encdec checkpoint from C++ (issue "Translation"): the decoding
// program of models/transformer_encdec.h — the encoder once, then a while_loop over the output
// positions with a key/value cache, greedy or beam search — run where ProgramTarget says (in
// process, a local cluster, a coordinator's workers), a batch of sentences per request. The same
// tokens on every mesh and layout. `meshrt translate` is this class and a file.
//
//   TranslatorOptions o;
//   o.target.local = 4;
//   o.target.mesh = "rows:2,cols:2";
//   o.target.layout = "batch:rows,heads:cols,d_ff:cols,vocab:cols";
//   o.beam = 4;
//   ASSIGN_OR_RETURN(auto translator, Translator::Open("runs/ck", o, std::cerr));
//   ASSIGN_OR_RETURN(std::vector<Translation> out, translator->Translate({"Hello world."}));
#ifndef MESHRT_CLIENT_TRANSLATOR_H_
#define MESHRT_CLIENT_TRANSLATOR_H_

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/program_runner.h"
#include "models/transformer_encdec.h"
#include "text/vocab/vocab.h"

namespace meshrt {

// The model whose weights `weights` are (models/transformer_encdec.h variable names and shapes):
// sizes, layer counts and the norm. InvalidArgument naming `what` and the missing or odd variable.
absl::StatusOr<models::EncDecOptions> EncDecOptionsFromWeights(const TensorMap& weights,
                                                               const std::string& what);

// Encodes one line for the encoder: its ids, EOS, cut to `length` (EOS kept last).
std::vector<int32_t> EncodeSource(const text::Vocab& vocab, const std::string& line,
                                  int64_t length);

// One decoded line: its ids up to (not including) EOS and its score: greedy, the sum of the ids'
// log-probabilities (EOS's included) when scores were asked for; beam search, that sum divided by
// the length penalty.
struct Hypothesis {
  std::vector<int32_t> ids;
  float score = 0;
};

// Where and how to decode ids.
struct DecoderOptions {
  models::EncDecOptions model;  // batch = rows per decode step
  int64_t max_length = 0;       // decoded positions (0: model.length)
  int64_t beam = 1;             // 1: greedy; k > 1: beam search with k beams
  float alpha = 0.6f;           // beam search's length penalty exponent
  bool scores = false;          // greedy: the log-probability sum (beam search: always its score)
  ProgramTarget target;
};

// Greedy or beam-search decoding of batches of source ids with fixed weights
// (models/transformer_encdec.h BuildEncDecDecoder).
class TranslationDecoder {
 public:
  // Builds the program, checks the layout, starts the cluster (target.local) and loads `weights`.
  static absl::StatusOr<std::unique_ptr<TranslationDecoder>> Start(const DecoderOptions& options,
                                                                   const TensorMap& weights,
                                                                   std::ostream& log);
  // Decodes `sources` (each a list of ids ending with EOS, at most model.length long), any number:
  // they go in batches of model.batch rows (the last one padded with empty sentences).
  absl::StatusOr<std::vector<Hypothesis>> Decode(
      const std::vector<std::vector<int32_t>>& sources);

 private:
  TranslationDecoder() = default;
  DecoderOptions options_;
  // Runs the program: "inputs" [batch, length] -> "decoded" (greedy: int32 [length, batch], and
  // its scores; beam search: float32 [batch, length + 1], the ids then the score).
  std::unique_ptr<ProgramRunner> runner_;
  std::string decoded_, scores_;
};

// How Translator translates text.
struct TranslatorOptions {
  ProgramTarget target;     // where the decoding program runs
  int64_t batch = 32;       // sentences per decoding request
  int64_t beam = 1;         // 1: greedy; k > 1: beam search (2k <= the vocabulary)
  float alpha = 0.6f;       // beam search's length penalty exponent, 0..10
  int64_t max_length = 0;   // output positions decoded, EOS included (0: the model's length)
  bool scores = false;      // greedy: fill Translation::score (beam search always does)
};

// One translated line.
struct Translation {
  std::string text;
  std::vector<int32_t> ids;  // its pieces, EOS excluded
  float score = 0;           // Hypothesis::score
};

// InvalidArgument naming the option when `options` do not fit `model`: batch, beam >= 1, alpha in
// [0, 10], max_length within the model's length, 2 x beam <= the vocabulary.
absl::Status CheckTranslatorOptions(const TranslatorOptions& options,
                                    const models::EncDecOptions& model);

// Text in, text out, with a checkpoint's model and vocabulary. Not thread-safe.
class Translator {
 public:
  // The checkpoint directory `checkpoint` (from `meshrt train --model transformer_encdec --save`;
  // with target.coordinator, under target.checkpoint_root as mounted here) and its vocabulary
  // (`vocab`, default CHECKPOINT/vocab.model). InvalidArgument for options out of range, a
  // checkpoint of another model, or a vocabulary of another size.
  static absl::StatusOr<std::unique_ptr<Translator>> Open(const std::string& checkpoint,
                                                          const TranslatorOptions& options,
                                                          std::ostream& log,
                                                          const std::string& vocab = "");
  // The same with the weights and vocabulary in hand (`what` names them in errors).
  static absl::StatusOr<std::unique_ptr<Translator>> Create(const TensorMap& weights,
                                                            text::Vocab vocab,
                                                            const TranslatorOptions& options,
                                                            std::ostream& log,
                                                            const std::string& what = "weights");
  // Translates every line (one Translation per line, in order); lines longer than the model's
  // length are cut.
  absl::StatusOr<std::vector<Translation>> Translate(const std::vector<std::string>& lines);

  const models::EncDecOptions& model() const { return model_; }
  const text::Vocab& vocab() const { return vocab_; }

 private:
  Translator(text::Vocab vocab, models::EncDecOptions model)
      : vocab_(std::move(vocab)), model_(std::move(model)) {}
  text::Vocab vocab_;
  models::EncDecOptions model_;
  std::unique_ptr<TranslationDecoder> decoder_;
};

}  // namespace meshrt

#endif  // MESHRT_CLIENT_TRANSLATOR_H_
