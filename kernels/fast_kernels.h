// The fast-kernel table: one record per op type that CpuKernels() (cpu_kernels.h) runs on this
// package's kernels instead of the reference kernel, the way TensorFlow registers kernels apart
// from ops. The op itself (shape inference, gradient, lowering, reference kernel, cost) is its
// OpInfo in //core (core/ops/ops.h); this table is the only place that knows which ops are fast.
//
// Adding a fast kernel: write a FastKernelFn in fast_kernels.cc and add its record to the table
// there (kernels/README.md). A FastKernelFn only sees float32 inputs and output; it returns nullopt
// to send the op to the reference kernel (an arity, attribute or form it does not take: the
// reference kernels own those error messages), else the kernel's status (unlabelled; CpuKernels()
// names the op).
//
// Types starting with '_' are the executor's fused ops (core/ir/step_fusion.h), which are not
// registered ops. Thread-safe: the table is immutable.
#ifndef MESHRT_KERNELS_FAST_KERNELS_H_
#define MESHRT_KERNELS_FAST_KERNELS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/ir/tensor.h"
#include "proto/graph.pb.h"

namespace meshrt {

using FastKernelFn = std::optional<absl::Status> (*)(const v1::Op& op,
                                                     absl::Span<const Tensor* const> inputs,
                                                     Tensor* output);

// The fast kernel of op type `type`, or nullptr (the op runs on its reference kernel). One hash
// lookup.
FastKernelFn FindFastKernel(absl::string_view type);

// Every type in the table, sorted.
std::vector<std::string> FastKernelTypes();

// What CpuKernels() does before falling back: nullopt when `op` goes to the reference kernels (a
// non-float32 tensor, a type without a fast kernel, or a form its kernel does not take), else the
// fast kernel's status. `output` non-null (a null input goes to the reference kernels).
std::optional<absl::Status> RunFastKernel(const v1::Op& op, absl::Span<const Tensor* const> inputs,
                                          Tensor* output);

}  // namespace meshrt

#endif  // MESHRT_KERNELS_FAST_KERNELS_H_
