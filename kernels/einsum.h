// The fast float32 einsum: named-dim contractions mapped onto (batched) OpenBLAS sgemm.
//
// Two inputs: dims are classified by name (as XLA does) into batch (both inputs and the output),
// contracted K (both inputs, not the output), free M (first input and output) and free N (second
// input and output). Dims in one input only and not in the output are summed out first; dims only
// in the output are broadcast at the end. Operands are read in place whenever their layout is a
// (possibly transposed, possibly strided) [batch..., M, K] / [batch..., K, N] matrix, and the
// result is written in place when the output is [.., M, N] or [.., N, M] (operands swapped); only
// the operands that do not fit are permuted into scratch. Batch dims may sit anywhere: each batch
// element is one GEMM at pointer offsets.
// One input: sum out + permute (+ broadcast). N > 2 inputs: contracted pairwise, greedily picking
// the pair with the smallest result, keeping every dim a later operand or the output needs.
//
// Pure functions; thread-safe for disjoint outputs. GEMMs run through GetBlas() (kernels/blas.h).
#ifndef MESHRT_KERNELS_EINSUM_H_
#define MESHRT_KERNELS_EINSUM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/ir/shape.h"
#include "core/ir/tensor.h"

namespace meshrt {
namespace kernels {

// What one Einsum call did, for tests and profiling. Counters add up across calls.
struct EinsumStats {
  int64_t scratch_bytes = 0;  // temporaries: pre-summed/permuted operands, GEMM results awaiting a
                              // permutation, intermediates of >2-input einsums
  int permute_copies = 0;     // operands or results copied into another dim order
  int presums = 0;            // operands with dims summed out before the contraction
  int gemm_calls = 0;         // GEMMs issued (one per batch element)
  int accumulating_gemms = 0; // EinsumAccumulate calls that added inside the GEMM (beta = 1)
  int contractions = 0;       // pairwise contractions
};

// How one pairwise contraction C = A . B maps onto GEMM. Dims of size 1 are ignored (they change
// no layout), so they appear in no list.
struct EinsumPlan {
  std::vector<std::string> batch, m, k, n;  // dim names per role, in the order the GEMM uses
  int64_t batch_size = 1, m_size = 1, k_size = 1, n_size = 1;
  bool copy_a = false;   // A is first permuted into [batch, M, K]
  bool copy_b = false;   // B is first permuted into [batch, K, N]
  bool copy_c = false;   // the GEMM writes [batch, M, N] scratch, then it is permuted into C
  bool trans_a = false;  // A is read as stored [K, M] (CblasTrans), in place
  bool trans_b = false;  // B is read as stored [N, K] (CblasTrans), in place
  bool swap = false;     // C is stored [N, M]: computed as C^T = B^T . A^T, in place
};

// Plans C = A . B for shapes with nothing to pre-sum or broadcast: every dim must be in at least
// two of a, b, c with one size (InvalidArgument otherwise). Among the dim orders that the operands
// and result already have, picks the one that copies the fewest elements.
absl::StatusOr<EinsumPlan> PlanContraction(const Shape& a, const Shape& b, const Shape& c);

// *out = einsum(inputs), semantics as in core/ops/reference_kernels.h. Inputs and output float32
// (Unimplemented otherwise); at least one input; one size per dim name (InvalidArgument naming
// the dim otherwise). `stats` (optional, borrowed) accumulates what the call did.
absl::Status Einsum(absl::Span<const Tensor* const> inputs, Tensor* out,
                    EinsumStats* stats = nullptr);

// *out += alpha * einsum(inputs), `out` holding the values to add to: e.g. an SGD step,
// w - lr * (x^T . dy), made by the gradient's GEMM with beta = 1 instead of writing the gradient
// and reading it back twice. Two-input contractions whose result needs no permutation, pre-sum or
// broadcast run that way; others compute the einsum into scratch and add it. Same checks and
// errors as Einsum.
absl::Status EinsumAccumulate(absl::Span<const Tensor* const> inputs, float alpha, Tensor* out,
                              EinsumStats* stats = nullptr);

}  // namespace kernels
}  // namespace meshrt

#endif  // MESHRT_KERNELS_EINSUM_H_
