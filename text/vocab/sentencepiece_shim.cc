// libmeshrt_sentencepiece.so: SentencePiece behind the C interface of sentencepiece_abi.h. The only
// code that includes SentencePiece's headers (whose `namespace absl { using std::string_view; }`
// cannot share a file with Abseil's own) and the one place that reads sentencepiece::util::Status
// and catches what SentencePiece throws (nothing may cross the C interface).
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "text/vocab/sentencepiece_abi.h"

struct MeshrtSpmModel {
  sentencepiece::SentencePieceProcessor processor;
};

namespace {

constexpr int kInternal = 13;  // absl::StatusCode::kInternal

void SetError(MeshrtSpmError* error, int code, std::string_view message) {
  error->code = code;
  const size_t n = std::min(message.size(), sizeof(error->message) - 1);
  std::memcpy(error->message, message.data(), n);
  error->message[n] = '\0';
}

// SentencePiece's codes are absl's (both follow google.rpc.Code), so the number carries over.
int FromStatus(const sentencepiece::util::Status& status, MeshrtSpmError* error) {
  if (status.ok()) {
    SetError(error, 0, "");
  } else {
    SetError(error, static_cast<int>(status.code()), status.error_message());
  }
  return error->code;
}

int FromException(MeshrtSpmError* error) {
  try {
    throw;
  } catch (const std::exception& e) {
    SetError(error, kInternal, std::string("SentencePiece threw: ") + e.what());
  } catch (...) {
    SetError(error, kInternal, "SentencePiece threw an unknown exception");
  }
  return error->code;
}

// Pulls the training sentences from the caller's MeshrtSpmLineSource.
class LineSourceIterator : public sentencepiece::SentenceIterator {
 public:
  explicit LineSourceIterator(const MeshrtSpmLineSource* source) : source_(source) { Next(); }

  bool done() const override { return done_; }
  void Next() override {
    if (done_) return;
    const char* line = nullptr;
    size_t size = 0;
    const int got = source_->next(source_->context, &line, &size);
    if (got == 1) {
      value_.assign(line, size);
    } else {
      done_ = true;
      if (got < 0) {
        status_ = sentencepiece::util::Status(sentencepiece::util::StatusCode::kAborted,
                                              "reading the training sentences failed");
      }
    }
  }
  const std::string& value() const override { return value_; }
  sentencepiece::util::Status status() const override { return status_; }

 private:
  const MeshrtSpmLineSource* source_;
  bool done_ = false;
  std::string value_;
  sentencepiece::util::Status status_;
};

int Train(const char* const* keys, const char* const* values, size_t count,
          const MeshrtSpmLineSource* source, const MeshrtSpmSink* model, MeshrtSpmError* error) {
  try {
    std::unordered_map<std::string, std::string> kwargs;
    for (size_t i = 0; i < count; ++i) kwargs[keys[i]] = values[i];
    LineSourceIterator sentences(source);
    std::string serialized;
    const sentencepiece::util::Status status =
        sentencepiece::SentencePieceTrainer::Train(kwargs, &sentences, &serialized);
    // A failing source ends the iteration early; say so even when training went on and failed
    // for lack of sentences.
    if (!sentences.status().ok()) return FromStatus(sentences.status(), error);
    if (FromStatus(status, error) != 0) return error->code;
    model->append(model->context, serialized.data(), serialized.size());
    return 0;
  } catch (...) {
    return FromException(error);
  }
}

MeshrtSpmModel* Load(const char* bytes, size_t size, MeshrtSpmError* error) {
  try {
    auto model = std::make_unique<MeshrtSpmModel>();
    if (FromStatus(model->processor.LoadFromSerializedProto(std::string_view(bytes, size)),
                   error) != 0) {
      return nullptr;
    }
    return model.release();
  } catch (...) {
    FromException(error);
    return nullptr;
  }
}

void FreeModel(MeshrtSpmModel* model) { delete model; }

int32_t PieceSize(const MeshrtSpmModel* model) { return model->processor.GetPieceSize(); }

int32_t SpecialId(const MeshrtSpmModel* model, char which) {
  switch (which) {
    case 'p':
      return model->processor.pad_id();
    case 'e':
      return model->processor.eos_id();
    case 'u':
      return model->processor.unk_id();
    case 'b':
      return model->processor.bos_id();
  }
  return -1;
}

const char* IdToPiece(const MeshrtSpmModel* model, int32_t id, size_t* size) {
  const std::string& piece = model->processor.IdToPiece(id);
  *size = piece.size();
  return piece.data();
}

float Score(const MeshrtSpmModel* model, int32_t id) { return model->processor.GetScore(id); }

int32_t PieceToId(const MeshrtSpmModel* model, const char* piece, size_t size) {
  return model->processor.PieceToId(std::string_view(piece, size));
}

int Encode(const MeshrtSpmModel* model, const char* text, size_t size, int32_t* ids,
           size_t capacity, size_t* count, MeshrtSpmError* error) {
  try {
    std::vector<int> encoded;
    if (FromStatus(model->processor.Encode(std::string_view(text, size), &encoded), error) != 0) {
      return error->code;
    }
    *count = encoded.size();
    if (encoded.size() <= capacity) {
      for (size_t i = 0; i < encoded.size(); ++i) ids[i] = encoded[i];
    }
    return 0;
  } catch (...) {
    return FromException(error);
  }
}

int Decode(const MeshrtSpmModel* model, const int32_t* ids, size_t count, const MeshrtSpmSink* text,
           MeshrtSpmError* error) {
  try {
    const std::vector<int> in(ids, ids + count);
    std::string decoded;
    if (FromStatus(model->processor.Decode(in, &decoded), error) != 0) return error->code;
    text->append(text->context, decoded.data(), decoded.size());
    return 0;
  } catch (...) {
    return FromException(error);
  }
}

constexpr MeshrtSpmApi kApi = {
    MESHRT_SPM_ABI_VERSION,
    &Train,
    &Load,
    &FreeModel,
    &PieceSize,
    &SpecialId,
    &IdToPiece,
    &Score,
    &PieceToId,
    &Encode,
    &Decode,
};

}  // namespace

extern "C" __attribute__((visibility("default"))) const MeshrtSpmApi* meshrt_sentencepiece_api() {
  return &kApi;
}
