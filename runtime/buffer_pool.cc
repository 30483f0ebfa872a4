#include "runtime/buffer_pool.h"

namespace meshrt {
namespace {

int64_t Bytes(DType dtype, int64_t elements) {
  return elements * static_cast<int64_t>(dtype == DType::kFloat32 ? sizeof(float)
                                                                  : sizeof(int32_t));
}

}  // namespace

Tensor BufferPool::Take(DType dtype, Shape shape) {
  Tensor storage;
  {
    absl::MutexLock lock(&mu_);
    auto it = free_.find(Key(dtype, shape.num_elements()));
    if (it == free_.end() || it->second.empty()) {
      return Tensor::Uninitialized(dtype, std::move(shape));
    }
    storage = std::move(it->second.back());
    it->second.pop_back();
    pooled_bytes_ -= Bytes(storage.dtype(), storage.num_elements());
    ++reused_;
  }
  return Tensor::UninitializedFrom(std::move(storage), dtype, std::move(shape));
}

void BufferPool::Release(Tensor t) {
  const int64_t bytes = Bytes(t.dtype(), t.num_elements());
  {
    absl::MutexLock lock(&mu_);
    if (bytes >= kMinBytes && pooled_bytes_ + bytes <= max_bytes_) {
      pooled_bytes_ += bytes;
      free_[Key(t.dtype(), t.num_elements())].push_back(std::move(t));
      return;
    }
  }
  // Freed here, outside the lock.
}

void BufferPool::Clear() {
  std::map<Key, std::vector<Tensor>> freed;
  {
    absl::MutexLock lock(&mu_);
    freed.swap(free_);
    pooled_bytes_ = 0;
  }
}

}  // namespace meshrt
