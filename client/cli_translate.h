// Internal to the `meshrt` CLI: the translation experiment (issue "Translation") — training data
// from a `meshrt data translations` directory, the dev BLEU of a training run, and `meshrt
// translate` (client/translator.h, the C++ API, does the decoding).
#ifndef MESHRT_CLIENT_CLI_TRANSLATE_H_
#define MESHRT_CLIENT_CLI_TRANSLATE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/cli_commands.h"
#include "client/cli_train.h"
#include "client/translator.h"
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
