#include "runtime/buffer_pool.h"

#include <algorithm>

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
    storage = std::move(it->second.back().tensor);
    it->second.pop_back();
    pooled_bytes_ -= Bytes(storage.dtype(), storage.num_elements());
    ++reused_;
  }
  return Tensor::UninitializedFrom(std::move(storage), dtype, std::move(shape));
}

void BufferPool::Release(Tensor t) {
  const int64_t bytes = Bytes(t.dtype(), t.num_elements());
  if (bytes < kMinBytes) return;  // freed here
  absl::MutexLock lock(&mu_);
  if (pooled_bytes_ + bytes > max_bytes_) return;  // freed when `t` goes (after the unlock)
  pooled_bytes_ += bytes;
  const Key key(t.dtype(), t.num_elements());
  free_[key].push_back(Entry{std::move(t), step_});
}

void BufferPool::NewStep() {
  std::vector<Tensor> stale;  // freed after the unlock
  {
    absl::MutexLock lock(&mu_);
    for (auto it = free_.begin(); it != free_.end();) {
      std::vector<Entry>& entries = it->second;
      // Released before the previous NewStep: entries are in release order, so a prefix.
      auto keep = std::find_if(entries.begin(), entries.end(),
                               [&](const Entry& e) { return e.step >= step_; });
      for (auto e = entries.begin(); e != keep; ++e) {
        pooled_bytes_ -= Bytes(e->tensor.dtype(), e->tensor.num_elements());
        stale.push_back(std::move(e->tensor));
      }
      entries.erase(entries.begin(), keep);
      it = entries.empty() ? free_.erase(it) : std::next(it);
    }
    ++step_;
  }
}

void BufferPool::Clear() {
  std::map<Key, std::vector<Entry>> all;
  absl::MutexLock lock(&mu_);
  all.swap(free_);
  pooled_bytes_ = 0;
}

int64_t BufferPool::pooled_bytes() const {
  absl::MutexLock lock(&mu_);
  return pooled_bytes_;
}

int64_t BufferPool::reused() const {
  absl::MutexLock lock(&mu_);
  return reused_;
}

}  // namespace meshrt
