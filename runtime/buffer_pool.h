// Recycles the storage of a step's intermediate tensors.
//
// A training step allocates the same large intermediates every step (a 2-layer Transformer step:
// ~100 tensors of 1-8 MiB). Through malloc, memory freed at the end of a step goes back to the
// kernel (glibc trims, and the per-thread arenas the step threads use unmap whole heaps), so every
// step faults it in again: ~11k page faults, ~45 MB zeroed by the kernel, per step and worker
// (perf stat on a worker of //bench:train_bench). The executor gives dead buffers to this pool
// and takes outputs from it instead.
//
// Buffers are matched by dtype and exact element count: a step's shapes repeat every step, so
// exact matching reuses nearly everything without wasting memory on near-misses. Buffers under
// kMinBytes are left to malloc (which serves them from its bins without faults). The pool holds
// at most `max_bytes`; beyond it, released tensors are freed.
//
// Thread-safe: an executor's calling thread and its communication thread share one pool.
#ifndef MESHRT_RUNTIME_BUFFER_POOL_H_
#define MESHRT_RUNTIME_BUFFER_POOL_H_

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "core/tensor.h"

namespace meshrt {

class BufferPool {
 public:
  static constexpr int64_t kMinBytes = 64 << 10;
  static constexpr int64_t kDefaultMaxBytes = int64_t{1} << 30;

  explicit BufferPool(int64_t max_bytes = kDefaultMaxBytes) : max_bytes_(max_bytes) {}
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // An uninitialized tensor (see Tensor::Uninitialized), in a released tensor's memory when one
  // of the same dtype and element count is pooled.
  Tensor Take(DType dtype, Shape shape);
  // Keeps `t`'s memory for a later Take, unless it is small or the pool is full.
  void Release(Tensor t);
  // Frees everything pooled.
  void Clear();

  int64_t pooled_bytes() const {
    absl::MutexLock lock(&mu_);
    return pooled_bytes_;
  }
  int64_t reused() const {  // Takes served from the pool
    absl::MutexLock lock(&mu_);
    return reused_;
  }

 private:
  using Key = std::pair<DType, int64_t>;  // dtype, element count
  mutable absl::Mutex mu_;
  std::map<Key, std::vector<Tensor>> free_ ABSL_GUARDED_BY(mu_);
  const int64_t max_bytes_;
  int64_t pooled_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t reused_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace meshrt

#endif  // MESHRT_RUNTIME_BUFFER_POOL_H_
