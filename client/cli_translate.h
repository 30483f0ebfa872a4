// Internal to the `meshrt` CLI: the translation experiment (issue "Translation") — training data
// from a `meshrt data translations` directory, the decoding program run where the user says
// (in process, a local cluster, a coordinator), and `meshrt translate`.
#ifndef MESHRT_CLIENT_CLI_TRANSLATE_H_
#define MESHRT_CLIENT_CLI_TRANSLATE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/cli_commands.h"
#include "client/cli_program_runner.h"
#include "client/cli_train.h"
#include "models/transformer_encdec.h"
#include "text/vocab/vocab.h"

namespace meshrt {

// A split's sentence pairs as the model reads them (core/ops/ops_dataset.h token_rows).
struct TranslationData {
  std::string inputs, targets;  // 2-D int32 .npy [pairs, length]: English, then LANG
  int64_t pairs = 0;
  int64_t truncated = 0;  // pairs with a side longer than `length` ids (EOS included), cut
};

// Encodes DIR/SPLIT.en and DIR/SPLIT.LANG (aligned line by line) with `vocab`: each line's ids,
// EOS, padded with 0 to `length` (a longer line is cut to length - 1 ids and EOS). The pairs are
// shuffled together (seeded by `seed`: the same order every time) so that batches mix the corpus,
// and written to DIR/.meshrt/SPLIT.{en,LANG}.ids.npy. InvalidArgument naming both files when their
// line counts differ or a file is empty; NotFound naming a missing file.
absl::StatusOr<TranslationData> PrepareTranslationData(const std::string& dir,
                                                       const std::string& lang,
                                                       const std::string& split,
                                                       const text::Vocab& vocab, int64_t length,
                                                       int64_t seed);

// The model whose weights `weights` are (models/transformer_encdec.h variable names and shapes):
// sizes, layer counts and the norm. InvalidArgument naming `what` and the missing or odd variable.
absl::StatusOr<models::EncDecOptions> EncDecOptionsFromWeights(const TensorMap& weights,
                                                               const std::string& what);

// One decoded line: its ids up to (not including) EOS and its score: greedy, the sum of the ids'
// log-probabilities (EOS's included) when scores were asked for; beam search, that sum divided by
// the length penalty.
struct Hypothesis {
  std::vector<int32_t> ids;
  float score = 0;
};

// Where and how to decode.
struct DecoderOptions {
  models::EncDecOptions model;  // batch = rows per decode step
  int64_t max_length = 0;       // decoded positions (0: model.length)
  int64_t beam = 1;             // 1: greedy; k > 1: beam search with k beams
  float alpha = 0.6f;           // beam search's length penalty exponent
  bool scores = false;          // greedy: the log-probability sum (beam search: always its score)
  // Exactly one of: reference (in process), local > 0 (a local cluster of that many workers),
  // coordinator (an address; checkpoint_root must be that coordinator's --checkpoint_root as
  // mounted here: the weights are written there as a checkpoint and restored into the session).
  bool reference = false;
  int64_t local = 0;
  std::string coordinator;
  std::string checkpoint_root;
  SecurityOptions security;
  std::string mesh, layout;  // --mesh / --layout text
  std::string log_dir;       // local cluster logs ("" = a temp dir)
};

// Greedy or beam-search decoding of batches of source sentences with fixed weights
// (models/transformer_encdec.h BuildEncDecDecoder): the program runs where the options say
// (client/cli_program_runner.h), one request per batch.
class TranslationDecoder {
 public:
  // Builds the program, checks the layout, starts the cluster (--local) and loads `weights`.
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

// Encodes one line for the encoder: its ids, EOS, cut to `length` (EOS kept last).
std::vector<int32_t> EncodeSource(const text::Vocab& vocab, const std::string& line,
                                  int64_t length);

// The --model name of the encoder-decoder.
inline constexpr char kEncDec[] = "transformer_encdec";

// `meshrt train --model transformer_encdec`: the model the flags describe (sizes, dropout, label
// smoothing; the vocabulary's size) reading the train split of --data DIR encoded with --vocab
// MODEL (PrepareTranslationData, seeded by --seed). Prints what it encoded. Returns the
// vocabulary. UsageError for a missing --vocab or a flag of another model.
absl::StatusOr<text::Vocab> PrepareEncDec(const TrainFlags& f, models::EncDecOptions* model,
                                          CliIo io);

// Copies the vocabulary file `vocab_path` into checkpoint directory `dir` as vocab.model (what
// `meshrt translate` reads), atomically.
absl::Status CopyVocabInto(const std::string& dir, const std::string& vocab_path);

// --eval_bleu_every: greedy translations of the first `lines` lines of DIR/dev.en with `weights`
// in this process, and their corpus BLEU (text/bleu) against DIR/dev.LANG.
struct DevBleu {
  std::vector<std::vector<int32_t>> sources;
  std::vector<std::string> references;
};
absl::StatusOr<DevBleu> LoadDevBleu(const TrainFlags& f, const text::Vocab& vocab,
                                    int64_t length);
absl::StatusOr<double> EvalBleu(const DevBleu& dev, const text::Vocab& vocab,
                                const models::EncDecOptions& model, const TensorMap& weights);

// `meshrt translate CK --input FILE ...`.
absl::Status TranslateCommand(const std::vector<std::string>& args, CliIo io);

}  // namespace meshrt

#endif  // MESHRT_CLIENT_CLI_TRANSLATE_H_
