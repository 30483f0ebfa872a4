#include "rpc/tensor_chunks.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/ir/slicing.h"
#include "util/status_macros.h"

namespace meshrt {

absl::Status ForEachChunk(const std::string& name, const Tensor& tensor,
                          const std::function<absl::Status(v1::TensorChunk&)>& emit,
                          int64_t chunk_bytes) {
  const int64_t total = TensorBytes(tensor);
  const char* bytes = static_cast<const char*>(TensorData(tensor));
  int64_t offset = 0;
  do {
    const int64_t n = std::min(chunk_bytes, total - offset);
    v1::TensorChunk chunk;
    chunk.set_name(name);
    if (offset == 0) {
      chunk.set_dtype(DTypeToProto(tensor.dtype()));
      *chunk.mutable_shape() = tensor.shape().ToProto();
    }
    chunk.set_offset(offset);
    chunk.set_data(bytes + offset, n);
    offset += n;
    chunk.set_last(offset == total);
    RETURN_IF_ERROR(emit(chunk));
  } while (offset < total);
  return absl::OkStatus();
}

void TensorAssembler::PlaceInto(const std::string& name, char* whole, const TensorRegion& region) {
  places_[name] = Place{whole, region};
}

absl::StatusOr<TensorAssembler::Partial*> TensorAssembler::Start(const v1::TensorChunk& chunk) {
  const std::string& name = chunk.name();
  auto dtype = DTypeFromProto(chunk.dtype());
  if (!dtype.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor '", name, "': ", dtype.status().message()));
  }
  ASSIGN_OR_RETURN(Shape shape,
                   Shape::FromProto(chunk.shape(), absl::StrCat("tensor '", name, "'")));
  Partial p;
  auto place = places_.find(name);
  if (place != places_.end()) {
    const TensorRegion& region = place->second.region;
    if (*dtype != region.dtype() || shape != region.slice_shape()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor '", name, "' arrived as ", DTypeName(*dtype), " ", shape.ToString(),
          " but its place holds ", DTypeName(region.dtype()), " ",
          region.slice_shape().ToString()));
    }
    p.place = &place->second;
    p.size = region.bytes();
  } else {
    const int64_t bytes = shape.num_elements() * DTypeSize(*dtype);
    if (total_ + bytes > max_bytes_) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "' of shape ",
                                                     shape.ToString(), " exceeds the ",
                                                     max_bytes_, "-byte limit of one request"));
    }
    total_ += bytes;
    // Uninitialised: Finish returns only tensors whose every byte arrived.
    p.tensor = NewTensorForWire(*dtype, shape);
    p.size = bytes;
  }
  return &partial_.emplace(name, std::move(p)).first->second;
}

absl::Status TensorAssembler::Add(const v1::TensorChunk& chunk) {
  const absl::string_view data = chunk.data();
  return Add(chunk, ChunkData(&data, 1));
}

absl::Status TensorAssembler::Add(const v1::TensorChunk& chunk, ChunkData data) {
  const std::string& name = chunk.name();
  auto it = partial_.find(name);
  Partial* p = nullptr;
  if (chunk.offset() == 0 && it == partial_.end()) {
    ASSIGN_OR_RETURN(p, Start(chunk));
  } else if (it == partial_.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunk of tensor '", name, "' at offset ", chunk.offset(),
                     " arrived before its first chunk"));
  } else {
    p = &it->second;
  }
  int64_t length = 0;
  for (absl::string_view piece : data) length += static_cast<int64_t>(piece.size());
  if (p->done) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "' was sent twice"));
  }
  if (chunk.offset() != p->received || length > p->size - p->received) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor '", name, "': chunk at offset ", chunk.offset(), " with ", length,
        " bytes does not follow the ", p->received, " bytes received of ", p->size));
  }
  for (absl::string_view piece : data) {
    if (piece.empty()) continue;
    if (p->place != nullptr) {
      p->place->region.Scatter(piece.data(), p->received, static_cast<int64_t>(piece.size()),
                               p->place->whole);
    } else {
      std::memcpy(static_cast<char*>(TensorData(&p->tensor)) + p->received, piece.data(),
                  piece.size());
    }
    p->received += static_cast<int64_t>(piece.size());
  }
  if (chunk.last()) {
    if (p->received != p->size) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "' ended after ",
                                                     p->received, " of ", p->size, " bytes"));
    }
    p->done = true;
  }
  return absl::OkStatus();
}

bool TensorAssembler::Complete(const std::string& name) const {
  auto it = partial_.find(name);
  return it != partial_.end() && it->second.done;
}

absl::StatusOr<TensorMap> TensorAssembler::Finish() {
  TensorMap out;
  for (auto& [name, p] : partial_) {
    if (!p.done) {
      return absl::FailedPreconditionError(absl::StrCat("tensor '", name, "' is incomplete: ",
                                                        p.received, " bytes received"));
    }
    if (p.place == nullptr) out.emplace(name, std::move(p.tensor));
  }
  partial_.clear();
  total_ = 0;
  return out;
}

}  // namespace meshrt
