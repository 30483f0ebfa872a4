// The fast kernels: what CpuKernels() (cpu_kernels.h) runs instead of an op's reference kernel,
// the way TensorFlow registers kernels apart from ops. Two sources: this package's table (the
// kernels built on BLAS and this package's vectorised loops, fast_kernels.cc), and an op record's
// own `fast` facet (core/ops/ops.h FastKernelFn: a loop written in the op's file), used when the
// table has none. The op itself (shape inference, gradient, lowering, reference kernel, cost) is
// its OpInfo in //core.
//
// Adding a fast kernel: in the op's file, set its record's `fast`; or, for a kernel on this
// package's code, write a FastKernelFn in fast_kernels.cc and add its record to the table there
// (kernels/README.md). A FastKernelFn only sees float32 inputs and output; it returns nullopt to
// send the op to the reference kernel (an arity, attribute or form it does not take: the
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
#include "core/ops/ops.h"
#include "proto/graph.pb.h"

namespace meshrt {

// The fast kernel of op type `type` (the table's, else its record's facet), or nullptr (the op runs
// on its reference kernel). One or two hash lookups.
FastKernelFn FindFastKernel(absl::string_view type);

// Every type with a fast kernel (the table's and the records'), sorted.
std::vector<std::string> FastKernelTypes();

// What CpuKernels() does before falling back: nullopt when `op` goes to the reference kernels (a
// non-float32 tensor, a type without a fast kernel, or a form its kernel does not take), else the
// fast kernel's status. `output` non-null (a null input goes to the reference kernels).
std::optional<absl::Status> RunFastKernel(const v1::Op& op, absl::Span<const Tensor* const> inputs,
                                          Tensor* output);

}  // namespace meshrt

#endif  // MESHRT_KERNELS_FAST_KERNELS_H_
