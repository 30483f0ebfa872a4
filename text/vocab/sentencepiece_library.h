// SentencePiece in a meshrt process, with absl::Status: training and a loaded model. Internal to
// text/vocab (vocab.h is the public interface).
//
// SentencePiece is never linked into meshrt: Debian's libsentencepiece exports its own
// protobuf-lite 3.14, and with libprotobuf 3.21 in the same process either one's code ends up
// calling the other's (an abort on the version check, or a crash at start-up, depending on the
// link order). The shim libmeshrt_sentencepiece.so (sentencepiece_abi.h), embedded in the binary,
// is loaded on first use with dlopen(RTLD_LOCAL | RTLD_DEEPBIND) from an in-memory file: its
// symbols stay out of the global scope and SentencePiece binds to its own protobuf. It needs
// Debian's libsentencepiece0 at run time (tools/setup.sh installs it); without it, the first use
// fails with FailedPrecondition saying so. Not under AddressSanitizer (it refuses RTLD_DEEPBIND).
//
// Errors from SentencePiece become absl::Status here and only here (SpmError).
#ifndef MESHRT_TEXT_VOCAB_SENTENCEPIECE_LIBRARY_H_
#define MESHRT_TEXT_VOCAB_SENTENCEPIECE_LIBRARY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "text/vocab/sentencepiece_abi.h"

namespace meshrt {
namespace text {

// The shim's functions, loading it on the first call (thread-safe; later calls return the same
// result, including a failure).
absl::StatusOr<const MeshrtSpmApi*> SentencePieceApi();

// The training sentences, pulled in order by TrainSentencePiece.
class SentenceSource {
 public:
  virtual ~SentenceSource() = default;
  // Sets *line to the next sentence (valid until the next call) and returns true; false at the end
  // or on an error (then status() says which).
  virtual bool Next(absl::string_view* line) = 0;
  virtual absl::Status status() const = 0;
};

// Trains a SentencePiece model with SentencePiece's own flags (name, value; e.g. {"vocab_size",
// "8000"}; neither "input" nor "model_prefix") on `sentences` and returns the serialized model
// (the bytes of a .model file). Errors: the source's status when it fails; SentencePiece's
// complaints (its CHECKs of the flags and the data, code Internal in SentencePiece) as
// InvalidArgument with its message; FailedPrecondition when SentencePiece cannot be loaded.
// Not to be called from two threads at once (SentencePiece's log level is process-wide).
absl::StatusOr<std::string> TrainSentencePiece(
    const std::vector<std::pair<std::string, std::string>>& flags, SentenceSource& sentences);

// A loaded SentencePiece model. Const methods may be called concurrently.
class SentencePieceModel {
 public:
  // InvalidArgument (with SentencePiece's message) when `bytes` are not a model.
  static absl::StatusOr<std::unique_ptr<SentencePieceModel>> FromBytes(absl::string_view bytes);
  ~SentencePieceModel();
  SentencePieceModel(const SentencePieceModel&) = delete;
  SentencePieceModel& operator=(const SentencePieceModel&) = delete;

  int32_t piece_size() const;
  // 'p' pad, 'e' EOS, 'u' UNK, 'b' BOS: the id, or -1 when the model has none.
  int32_t special_id(char which) const;
  // Requires 0 <= id < piece_size(). Points into the model.
  absl::string_view Piece(int32_t id) const;
  float Score(int32_t id) const;
  // The id of `piece`, or the UNK id.
  int32_t PieceToId(absl::string_view piece) const;

  absl::StatusOr<std::vector<int32_t>> Encode(absl::string_view text) const;
  // Requires every id in [0, piece_size()).
  absl::StatusOr<std::string> Decode(const std::vector<int32_t>& ids) const;

 private:
  SentencePieceModel(const MeshrtSpmApi* api, MeshrtSpmModel* model) : api_(api), model_(model) {}

  const MeshrtSpmApi* api_;  // static, never unloaded
  MeshrtSpmModel* model_;    // owned; api_->free_model frees it
};

}  // namespace text
}  // namespace meshrt

#endif  // MESHRT_TEXT_VOCAB_SENTENCEPIECE_LIBRARY_H_
