// Storage for tensors that come off the wire (or go onto it), recycled. A step's feeds and fetches
// are large and short-lived, and fresh memory is dear: the first write of a fresh 64 MiB buffer
// takes 16,384 page faults and the kernel zeroes every page, which costs more than copying the
// bytes in. So the data path hands the storage of tensors it is done with (sent, or read by the
// step) back here and takes it again for the next step's tensors of about the same size. No gRPC
// here.
#ifndef MESHRT_RPC_WIRE_BUFFERS_H_
#define MESHRT_RPC_WIRE_BUFFERS_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "core/ir/shape.h"
#include "core/ir/tensor.h"

namespace meshrt {

// A bounded cache of tensor storage. Thread-safe.
class WireBuffers {
 public:
  struct Options {
    // The most bytes and buffers kept for reuse (an idle process holds at most this much).
    int64_t max_bytes = int64_t{512} << 20;
    int max_buffers = 16;
    // Smaller tensors are not kept: malloc recycles them well enough.
    int64_t min_bytes = int64_t{1} << 20;
  };

  explicit WireBuffers(const Options& options) : options_(options) {}
  WireBuffers(const WireBuffers&) = delete;
  WireBuffers& operator=(const WireBuffers&) = delete;

  // The process's cache, used by NewTensorForWire and RecycleForWire (never destroyed).
  static WireBuffers& Default();

  // A tensor of `dtype` and `shape` whose elements are unspecified until written: the storage of
  // the smallest kept buffer of `dtype` holding between its size and twice that, else fresh
  // memory (with huge pages advised when it is large).
  Tensor New(DType dtype, const Shape& shape);
  // Keeps `t`'s storage for New when it is at least min_bytes, dropping the oldest kept buffers
  // to stay within the limits (or `t`'s, when it alone passes them).
  void Recycle(Tensor t);

  int64_t kept_bytes() const;
  int kept_buffers() const;

 private:
  const Options options_;
  mutable absl::Mutex mu_;
  std::deque<Tensor> kept_ ABSL_GUARDED_BY(mu_);  // oldest first
  int64_t kept_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

// WireBuffers::Default().New / Recycle.
Tensor NewTensorForWire(DType dtype, const Shape& shape);
void RecycleForWire(Tensor t);

// `tensors` in shared ownership (e.g. with frames on the wire that reference their storage): when
// the last reference goes, each tensor's storage goes to RecycleForWire.
std::shared_ptr<const std::map<std::string, Tensor>> ShareAndRecycle(
    std::map<std::string, Tensor> tensors);

}  // namespace meshrt

#endif  // MESHRT_RPC_WIRE_BUFFERS_H_
