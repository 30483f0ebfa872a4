#include "rpc/tensor_chunks.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace meshrt {
namespace {

char* Bytes(Tensor& t) {
  return t.dtype() == DType::kFloat32 ? reinterpret_cast<char*>(t.f32())
                                      : reinterpret_cast<char*>(t.i32());
}
const char* Bytes(const Tensor& t) {
  return t.dtype() == DType::kFloat32 ? reinterpret_cast<const char*>(t.f32())
                                      : reinterpret_cast<const char*>(t.i32());
}

}  // namespace

absl::Status ForEachChunk(const std::string& name, const Tensor& tensor,
                          const std::function<absl::Status(v1::TensorChunk&)>& emit,
                          int64_t chunk_bytes) {
  const int64_t total = tensor.num_elements() * 4;
  int64_t offset = 0;
  do {
    const int64_t n = std::min(chunk_bytes, total - offset);
    v1::TensorChunk chunk;
    if (offset == 0) {
      chunk.set_name(name);
      chunk.set_dtype(DTypeToProto(tensor.dtype()));
      *chunk.mutable_shape() = tensor.shape().ToProto();
    } else {
      chunk.set_name(name);
    }
    chunk.set_offset(offset);
    chunk.set_data(Bytes(tensor) + offset, n);
    offset += n;
    chunk.set_last(offset == total);
    RETURN_IF_ERROR(emit(chunk));
  } while (offset < total);
  return absl::OkStatus();
}

absl::Status TensorAssembler::Add(v1::TensorChunk& chunk) {
  const std::string& name = chunk.name();
  auto it = partial_.find(name);
  if (chunk.offset() == 0 && it == partial_.end()) {
    auto dtype = DTypeFromProto(chunk.dtype());
    if (!dtype.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "': ", dtype.status().message()));
    }
    ASSIGN_OR_RETURN(Shape shape, Shape::FromProto(chunk.shape(), absl::StrCat("tensor '", name, "'")));
    const int64_t bytes = shape.num_elements() * 4;
    if (total_ + bytes > max_bytes_) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "' of shape ",
                                                     shape.ToString(), " exceeds the ",
                                                     max_bytes_, "-byte limit of one request"));
    }
    total_ += bytes;
    // Uninitialised: Finish returns only tensors whose every byte arrived.
    it = partial_.emplace(name, Partial{Tensor::Uninitialized(*dtype, shape), 0, false}).first;
  } else if (it == partial_.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunk of tensor '", name, "' at offset ", chunk.offset(),
                     " arrived before its first chunk"));
  }
  Partial& p = it->second;
  const int64_t size = p.tensor.num_elements() * 4;
  if (p.done) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "' was sent twice"));
  }
  if (chunk.offset() != p.received || chunk.offset() + static_cast<int64_t>(chunk.data().size()) > size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor '", name, "': chunk at offset ", chunk.offset(), " with ", chunk.data().size(),
        " bytes does not follow the ", p.received, " bytes received of ", size));
  }
  std::memcpy(Bytes(p.tensor) + p.received, chunk.data().data(), chunk.data().size());
  p.received += chunk.data().size();
  if (chunk.last()) {
    if (p.received != size) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "' ended after ",
                                                     p.received, " of ", size, " bytes"));
    }
    p.done = true;
  }
  return absl::OkStatus();
}

absl::StatusOr<TensorMap> TensorAssembler::Finish() {
  TensorMap out;
  for (auto& [name, p] : partial_) {
    if (!p.done) {
      return absl::FailedPreconditionError(absl::StrCat("tensor '", name, "' is incomplete: ",
                                                        p.received, " bytes received"));
    }
    out.emplace(name, std::move(p.tensor));
  }
  partial_.clear();
  total_ = 0;
  return out;
}

}  // namespace meshrt
