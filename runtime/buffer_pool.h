// Recycles the storage of a step's intermediate tensors.
//
// A training step allocates the same large intermediates every step (a 2-layer Transformer step:
// ~100 tensors of 1-8 MiB). Through malloc, memory freed at the end of a step goes back to the
// kernel (glibc trims, the per-thread arenas the step threads use unmap whole heaps, and every
// block above 32 MiB is its own mmap), so every step faults it in again: ~11k page faults, ~45 MB
// zeroed by the kernel, per step and worker (perf stat on a worker of //bench:train_bench). The
// executor gives dead buffers to this pool and takes outputs, collective scratch and feed copies
// from it instead.
//
// Buffers are matched by dtype and exact element count: a step's shapes repeat every step, so
// exact matching reuses nearly everything without wasting memory on near-misses. Buffers under
// kMinBytes are left to malloc (which serves them from its bins without faults). The pool holds
// at most `max_bytes`; beyond it, released tensors are freed.
//
// Ageing: NewStep() (the executor calls it once per step) frees every buffer that was already
// pooled at the previous NewStep and has not been taken since. A size the steps stopped using (or
// storage that arrives every step from outside, e.g. feeds moved in) is kept for at most two
// steps instead of piling up to max_bytes.
//
// Thread-safety: thread-safe (one mutex); a communication thread may take and release while the
// compute thread does.
#ifndef MESHRT_RUNTIME_BUFFER_POOL_H_
#define MESHRT_RUNTIME_BUFFER_POOL_H_

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "core/ir/tensor.h"

namespace meshrt {

class BufferPool {
 public:
  static constexpr int64_t kMinBytes = 64 << 10;
  static constexpr int64_t kDefaultMaxBytes = int64_t{1} << 30;

  explicit BufferPool(int64_t max_bytes = kDefaultMaxBytes) : max_bytes_(max_bytes) {}
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // An uninitialized tensor (see Tensor::Uninitialized), in a released tensor's memory when one
  // of the same dtype and element count is pooled (the most recently released one).
  Tensor Take(DType dtype, Shape shape);
  // Keeps `t`'s memory for a later Take, unless it is small or the pool is full.
  void Release(Tensor t);
  // Starts a step: frees what was pooled before the previous NewStep and not taken since.
  void NewStep();
  // Frees everything pooled.
  void Clear();

  int64_t pooled_bytes() const;
  int64_t reused() const;  // Takes served from the pool

 private:
  using Key = std::pair<DType, int64_t>;  // dtype, element count
  struct Entry {
    Tensor tensor;
    int64_t step;  // the value of step_ when it was released
  };
  mutable absl::Mutex mu_;
  std::map<Key, std::vector<Entry>> free_ ABSL_GUARDED_BY(mu_);
  const int64_t max_bytes_;
  int64_t pooled_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t reused_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t step_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace meshrt

#endif  // MESHRT_RUNTIME_BUFFER_POOL_H_
