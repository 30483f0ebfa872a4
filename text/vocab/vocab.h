// The subword vocabulary of the translation experiment: one SentencePiece model shared by the
// source and target languages, trained by TrainVocab and applied by Vocab.
//
// The id contract (the translation model's, as Mesh-TensorFlow's): pad = 0, EOS = 1, UNK = 2, no
// BOS. A sequence is its ids followed by EOS and padded with 0 (encode_npy.h writes them so).
//
// SentencePiece is used through sentencepiece_library.h (loaded at run time, never linked; see
// there why). Text is normalised as SentencePiece's default (NFKC, runs of whitespace collapsed,
// leading and trailing whitespace dropped), so Decode(Encode(text)) == text for text that is
// already so normalised.
#ifndef MESHRT_TEXT_VOCAB_VOCAB_H_
#define MESHRT_TEXT_VOCAB_VOCAB_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace meshrt {
namespace text {

class SentencePieceModel;  // sentencepiece_library.h

inline constexpr int32_t kPadId = 0;
inline constexpr int32_t kEosId = 1;
inline constexpr int32_t kUnkId = 2;

struct VocabTrainOptions {
  // UTF-8 text files, one sentence a line (a trailing '\r' is dropped; empty lines are skipped).
  // Read in this order. Lines longer than 4192 bytes are skipped by SentencePiece.
  std::vector<std::string> inputs;
  // Pieces in the vocabulary, the three special ids included. Must be at least the number of
  // distinct characters kept (see character_coverage) + 3 and at most what the data can yield;
  // SentencePiece's message says which bound was hit.
  int64_t size = 8000;
  // "unigram" or "bpe".
  std::string model_type = "unigram";
  // The fraction of characters (by frequency) that get their own piece; the rest become UNK.
  // 1.0 for languages with small alphabets, as here.
  double character_coverage = 1.0;
  // Train on this many sentences chosen uniformly at random (by `seed`) from all the inputs, in
  // input order; 0: all of them.
  int64_t max_sentences = 0;
  // Seeds the choice of max_sentences (the training itself involves no randomness).
  int64_t seed = 1;
  // SentencePiece's training threads. The unigram model depends on the count (its sums are split
  // by thread), so the same inputs and options, threads included, give the same model bytes; the
  // fixed default keeps that true across machines.
  int threads = 1;
};

// What TrainVocab read.
struct VocabTrainStats {
  int64_t sentences = 0;  // non-empty lines in the inputs
  int64_t used = 0;       // of which trained on (all, or max_sentences)
};

// Trains a vocabulary on options.inputs and writes the model to exactly `out_model_path` (a
// SentencePiece .model file, readable by any SentencePiece; no .vocab file is written, see
// `meshrt vocab inspect --pieces`). The file is written beside the destination and renamed, so a
// failed training leaves no file. Deterministic: the same inputs and options give a byte-identical
// file (the model records the options, not the input paths). Errors: InvalidArgument naming the
// option for a bad option, the file for an input that cannot be read (NotFound when missing), or
// SentencePiece's message for a size the data cannot satisfy; the I/O error naming
// out_model_path; FailedPrecondition when SentencePiece is not installed. `stats` may be null.
absl::Status TrainVocab(const VocabTrainOptions& options, const std::string& out_model_path,
                        VocabTrainStats* stats = nullptr);

// A loaded vocabulary. Movable, not copyable. Const methods are thread-safe (concurrent Encode
// and Decode on one Vocab are fine); moving or destroying it needs exclusive access.
class Vocab {
 public:
  // Loads a SentencePiece model file. Errors: the I/O error naming `path`; InvalidArgument when
  // the file is not a SentencePiece model, or when it lacks pad = 0 and EOS = 1 (the message
  // names the ids it has); FailedPrecondition when SentencePiece is not installed.
  static absl::StatusOr<Vocab> Load(const std::string& path);
  // The same from the bytes of a model file; `source` names it in errors.
  static absl::StatusOr<Vocab> FromBytes(absl::string_view bytes, absl::string_view source);

  Vocab(Vocab&&) noexcept;
  Vocab& operator=(Vocab&&) noexcept;
  ~Vocab();

  // The ids of `text` (normalised as above), without EOS. Characters the vocabulary lacks become
  // UNK (2). Invalid UTF-8 bytes are treated as U+FFFD by SentencePiece.
  std::vector<int32_t> Encode(absl::string_view text) const;
  // The text of `ids` up to the first EOS (1), skipping pad (0); ids outside [0, size()) (as from
  // a model whose output layer is padded beyond the vocabulary) decode as UNK, " ⁇ ".
  std::string Decode(const std::vector<int32_t>& ids) const;

  // Pieces in the vocabulary, the special ones included.
  int64_t size() const;
  int32_t pad_id() const { return kPadId; }
  int32_t eos_id() const { return kEosId; }
  int32_t unk_id() const;
  // -1: none (the contract's case).
  int32_t bos_id() const;

  // The piece of `id` (e.g. "▁the", "<pad>"), or "" when id is outside [0, size()).
  std::string Piece(int32_t id) const;
  // The model's score of `id` (unigram: log probability; bpe: merge order), 0 when out of range.
  float Score(int32_t id) const;
  // The id of `piece`, or unk_id() when the vocabulary lacks it.
  int32_t PieceToId(absl::string_view piece) const;

 private:
  explicit Vocab(std::unique_ptr<SentencePieceModel> model);

  std::unique_ptr<SentencePieceModel> model_;  // never null but after a move
};

}  // namespace text
}  // namespace meshrt

#endif  // MESHRT_TEXT_VOCAB_VOCAB_H_
