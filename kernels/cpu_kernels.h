// CpuKernels(): the KernelRunner workers use. float32 ops with a record in the fast-kernel table
// (fast_kernels.h: einsum, elementwise, reductions, softmax and norms) run on the kernels in this
// package (OpenBLAS for GEMMs); every other op or dtype falls back to ReferenceKernels()
// (core/ops/kernel_runner.h), so both runners accept the same ops with the same semantics and error
// codes.
#ifndef MESHRT_KERNELS_CPU_KERNELS_H_
#define MESHRT_KERNELS_CPU_KERNELS_H_

#include "core/ops/kernel_runner.h"

namespace meshrt {

// Never null; lives forever; thread-safe (see KernelRunner). The first einsum loads OpenBLAS
// (kernels/blas.h), which logs one line naming the CPU kernel it chose.
const KernelRunner& CpuKernels();

}  // namespace meshrt

#endif  // MESHRT_KERNELS_CPU_KERNELS_H_
