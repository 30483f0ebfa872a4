#include "rpc/wire_buffers.h"

#include <sys/mman.h>

#include <utility>

#include "core/ir/slicing.h"

namespace meshrt {
namespace {

// Fresh storage for `bytes` bytes: the kernel is asked to back its 2 MiB-aligned interior with
// huge pages (one fault and one zeroing per 2 MiB instead of per 4 KiB). Advice only: when it
// fails nothing changes but the speed.
Tensor Fresh(DType dtype, const Shape& shape) {
  Tensor t = Tensor::Uninitialized(dtype, shape);
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  const int64_t bytes = TensorBytes(t);
  if (bytes >= static_cast<int64_t>(4 * kHuge)) {
    const uintptr_t start = reinterpret_cast<uintptr_t>(TensorData(&t));
    const uintptr_t begin = (start + kHuge - 1) & ~(kHuge - 1);
    const uintptr_t end = (start + bytes) & ~(kHuge - 1);
    if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
  }
  return t;
}

}  // namespace

WireBuffers& WireBuffers::Default() {
  static WireBuffers* const buffers = new WireBuffers(Options());
  return *buffers;
}

Tensor WireBuffers::New(DType dtype, const Shape& shape) {
  const int64_t bytes = shape.num_elements() * DTypeSize(dtype);
  if (bytes >= options_.min_bytes) {
    absl::MutexLock lock(&mu_);
    auto best = kept_.end();
    for (auto it = kept_.begin(); it != kept_.end(); ++it) {
      const int64_t size = TensorBytes(*it);
      if (it->dtype() == dtype && size >= bytes && size <= 2 * bytes &&
          (best == kept_.end() || size < TensorBytes(*best))) {
        best = it;
      }
    }
    if (best != kept_.end()) {
      Tensor storage = std::move(*best);
      kept_bytes_ -= TensorBytes(storage);
      kept_.erase(best);
      return Tensor::UninitializedFrom(std::move(storage), dtype, shape);
    }
  }
  return Fresh(dtype, shape);
}

void WireBuffers::Recycle(Tensor t) {
  const int64_t bytes = TensorBytes(t);
  if (bytes < options_.min_bytes || bytes > options_.max_bytes) return;
  std::deque<Tensor> dropped;  // freed after the lock is released
  absl::MutexLock lock(&mu_);
  kept_bytes_ += bytes;
  kept_.push_back(std::move(t));
  while (kept_bytes_ > options_.max_bytes ||
         static_cast<int>(kept_.size()) > options_.max_buffers) {
    kept_bytes_ -= TensorBytes(kept_.front());
    dropped.push_back(std::move(kept_.front()));
    kept_.pop_front();
  }
}

int64_t WireBuffers::kept_bytes() const {
  absl::MutexLock lock(&mu_);
  return kept_bytes_;
}

int WireBuffers::kept_buffers() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(kept_.size());
}

Tensor NewTensorForWire(DType dtype, const Shape& shape) {
  return WireBuffers::Default().New(dtype, shape);
}

void RecycleForWire(Tensor t) { WireBuffers::Default().Recycle(std::move(t)); }

std::shared_ptr<const std::map<std::string, Tensor>> ShareAndRecycle(
    std::map<std::string, Tensor> tensors) {
  using Map = std::map<std::string, Tensor>;
  return std::shared_ptr<const Map>(new Map(std::move(tensors)), [](const Map* done) {
    for (auto& entry : *const_cast<Map*>(done)) RecycleForWire(std::move(entry.second));
    delete done;
  });
}

}  // namespace meshrt
