// KernelRunner: computes one op on local tensors. The reference interpreter runs it on whole
// tensors; the SPMD executor runs it on slices (the op's shapes are then slice shapes). Two
// implementations exist: ReferenceKernels() here (naive loops, the oracle) and the fast CPU kernels
// in //kernels (OpenBLAS), which workers use.
#ifndef MESHRT_CORE_OPS_KERNEL_RUNNER_H_
#define MESHRT_CORE_OPS_KERNEL_RUNNER_H_

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "core/ir/tensor.h"
#include "proto/graph.pb.h"
#include "util/file_access.h"

namespace meshrt {

class KernelRunner;

// What an op may touch on the host besides its tensors, given by the caller of every kernel.
struct KernelContext {
  // The files ops may read (text_windows' path). Borrowed for the call; never null. The default
  // allows every file (the reference interpreter, the simulated mesh); a worker daemon's executor
  // passes the policy of its --data_dir flags.
  const FileAccessPolicy* files = &FileAccessPolicy::AllowAll();
  // The runner computing the op: an op with a body graph (while_loop) runs the body's ops on it,
  // so a loop the interpreter runs with the fast kernels is fast inside too. Null: the reference
  // kernels.
  const KernelRunner* runner = nullptr;
};

class KernelRunner {
 public:
  virtual ~KernelRunner() = default;

  // Computes `op` (a "local" op: any type in core/ops/ops.h except placeholder) from `inputs` into
  // `*output`, whose dtype and shape are already set and storage allocated; its contents are
  // unspecified (Tensor::Uninitialized) and every element must be written. Inputs are in the op's
  // input order; dims are matched by name, so slices work as whole tensors do. Returns
  // Unimplemented for an op type this runner lacks, InvalidArgument for shapes that do not fit.
  // Thread-safe: one runner may serve several threads. An op reading a file that `context` does
  // not allow fails with the policy's PermissionDenied (util/file_access.h).
  virtual absl::Status Run(const v1::Op& op, absl::Span<const Tensor* const> inputs,
                           Tensor* output, const KernelContext& context) const = 0;
  // Run with the default context (every file readable).
  absl::Status Run(const v1::Op& op, absl::Span<const Tensor* const> inputs,
                   Tensor* output) const {
    return Run(op, inputs, output, KernelContext());
  }
};

// The naive, obviously-correct kernels (core/ops/reference_kernels.cc). Never null; lives forever.
const KernelRunner& ReferenceKernels();

}  // namespace meshrt

#endif  // MESHRT_CORE_OPS_KERNEL_RUNNER_H_
