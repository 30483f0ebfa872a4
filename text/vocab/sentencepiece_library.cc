#include "text/vocab/sentencepiece_library.h"

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "text/vocab/sentencepiece_shim_embed.h"

namespace meshrt {
namespace text {
namespace {

// The one conversion of a shim error to a Status. SentencePiece reports bad flags and data through
// failed CHECKs (code Internal); for a caller they are invalid input.
absl::Status SpmError(const MeshrtSpmError& error) {
  const absl::StatusCode code = error.code == static_cast<int>(absl::StatusCode::kInternal)
                                    ? absl::StatusCode::kInvalidArgument
                                    : static_cast<absl::StatusCode>(error.code);
  return absl::Status(code, absl::StrCat("SentencePiece: ", error.message));
}

bool WriteAll(int fd, const unsigned char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// dlopen of the embedded shim, written to `fd`; closes fd. Null with *error set on failure.
void* OpenFromFd(int fd, const std::string& path, std::string* error) {
  void* handle = nullptr;
  if (!WriteAll(fd, kSentencePieceShim, kSentencePieceShimSize)) {
    *error = absl::StrCat("cannot write ", path, ": ", std::strerror(errno));
  } else {
    // RTLD_LOCAL keeps SentencePiece's google::protobuf symbols out of the global scope;
    // RTLD_DEEPBIND makes SentencePiece use them rather than libprotobuf's.
    handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (handle == nullptr) *error = dlerror();
  }
  close(fd);
  return handle;
}

absl::StatusOr<const MeshrtSpmApi*> LoadShim() {
  std::string memfd_error, file_error;
  void* handle = nullptr;
  // An in-memory file first; a temporary file where memfds are unavailable or not executable.
  const int memfd = memfd_create("libmeshrt_sentencepiece.so", MFD_CLOEXEC);
  if (memfd >= 0) {
    handle = OpenFromFd(memfd, absl::StrCat("/proc/self/fd/", memfd), &memfd_error);
  } else {
    memfd_error = absl::StrCat("memfd_create: ", std::strerror(errno));
  }
  if (handle == nullptr) {
    const char* tmp = std::getenv("TMPDIR");
    std::string path = absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp",
                                    "/libmeshrt_sentencepiece.XXXXXX");
    const int fd = mkstemp(path.data());
    if (fd < 0) {
      file_error = absl::StrCat("cannot create ", path, ": ", std::strerror(errno));
    } else {
      handle = OpenFromFd(fd, path, &file_error);
      unlink(path.c_str());
    }
  }
  if (handle == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot load SentencePiece (Debian's libsentencepiece0, which tools/setup.sh installs "
        "with libsentencepiece-dev): ",
        memfd_error, "; from a temporary file: ", file_error));
  }
  const auto api_function =
      reinterpret_cast<MeshrtSpmApiFunction>(dlsym(handle, MESHRT_SPM_API_SYMBOL));
  if (api_function == nullptr) {
    return absl::InternalError(
        absl::StrCat("the SentencePiece shim lacks ", MESHRT_SPM_API_SYMBOL, ": ", dlerror()));
  }
  const MeshrtSpmApi* api = api_function();
  if (api->abi_version != MESHRT_SPM_ABI_VERSION) {
    return absl::InternalError(absl::StrCat("the SentencePiece shim has interface version ",
                                            api->abi_version, ", meshrt expects ",
                                            MESHRT_SPM_ABI_VERSION));
  }
  // Never dlclose'd: SentencePiece keeps process-wide state.
  return api;
}

// Adapts a SentenceSource to the shim's MeshrtSpmLineSource.
int NextLine(void* context, const char** line, size_t* size) {
  auto* source = static_cast<SentenceSource*>(context);
  absl::string_view view;
  if (source->Next(&view)) {
    *line = view.data();
    *size = view.size();
    return 1;
  }
  return source->status().ok() ? 0 : -1;
}

void AppendToString(void* context, const char* data, size_t size) {
  static_cast<std::string*>(context)->append(data, size);
}

}  // namespace

absl::StatusOr<const MeshrtSpmApi*> SentencePieceApi() {
  static const auto* const api = new absl::StatusOr<const MeshrtSpmApi*>(LoadShim());
  return *api;
}

absl::StatusOr<std::string> TrainSentencePiece(
    const std::vector<std::pair<std::string, std::string>>& flags, SentenceSource& sentences) {
  absl::StatusOr<const MeshrtSpmApi*> api = SentencePieceApi();
  if (!api.ok()) return api.status();
  std::vector<const char*> keys, values;
  for (const auto& [key, value] : flags) {
    keys.push_back(key.c_str());
    values.push_back(value.c_str());
  }
  const MeshrtSpmLineSource source{&sentences, &NextLine};
  std::string model;
  const MeshrtSpmSink sink{&model, &AppendToString};
  MeshrtSpmError error;
  const int code = (*api)->train(keys.data(), values.data(), keys.size(), &source, &sink, &error);
  if (!sentences.status().ok()) return sentences.status();
  if (code != 0) return SpmError(error);
  return model;
}

absl::StatusOr<std::unique_ptr<SentencePieceModel>> SentencePieceModel::FromBytes(
    absl::string_view bytes) {
  absl::StatusOr<const MeshrtSpmApi*> api = SentencePieceApi();
  if (!api.ok()) return api.status();
  MeshrtSpmError error;
  MeshrtSpmModel* model = (*api)->load(bytes.data(), bytes.size(), &error);
  if (model == nullptr) return SpmError(error);
  return std::unique_ptr<SentencePieceModel>(new SentencePieceModel(*api, model));
}

SentencePieceModel::~SentencePieceModel() { api_->free_model(model_); }

int32_t SentencePieceModel::piece_size() const { return api_->piece_size(model_); }

int32_t SentencePieceModel::special_id(char which) const { return api_->special_id(model_, which); }

absl::string_view SentencePieceModel::Piece(int32_t id) const {
  size_t size = 0;
  const char* data = api_->id_to_piece(model_, id, &size);
  return absl::string_view(data, size);
}

float SentencePieceModel::Score(int32_t id) const { return api_->score(model_, id); }

int32_t SentencePieceModel::PieceToId(absl::string_view piece) const {
  return api_->piece_to_id(model_, piece.data(), piece.size());
}

absl::StatusOr<std::vector<int32_t>> SentencePieceModel::Encode(absl::string_view text) const {
  // Usually fewer ids than bytes; normalisation can expand text, hence the second try.
  std::vector<int32_t> ids(text.size() + 16);
  for (int attempt = 0; attempt < 2; ++attempt) {
    size_t count = 0;
    MeshrtSpmError error;
    if (api_->encode(model_, text.data(), text.size(), ids.data(), ids.size(), &count, &error) !=
        0) {
      return SpmError(error);
    }
    if (count <= ids.size()) {
      ids.resize(count);
      return ids;
    }
    ids.resize(count);
  }
  return absl::InternalError("SentencePiece: the id count changed between two encodings");
}

absl::StatusOr<std::string> SentencePieceModel::Decode(const std::vector<int32_t>& ids) const {
  std::string text;
  const MeshrtSpmSink sink{&text, &AppendToString};
  MeshrtSpmError error;
  if (api_->decode(model_, ids.data(), ids.size(), &sink, &error) != 0) return SpmError(error);
  return text;
}

}  // namespace text
}  // namespace meshrt
