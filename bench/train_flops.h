// FLOPs of one training step, for train_bench's GFLOP/s columns.
//
// "Model FLOPs" are the peers' analytic counts of the GEMM work a step needs (forward, and the
// backward's two products per forward product: ~3x forward), the same number for ours and the
// peer, so ours/peer GFLOP/s equals ours/peer throughput:
//   Transformer (../shared/peers/transformer_bench.py, its docstring's formula):
//     3 * (2*B*L*(layers*(4*D*H*dk + 2*D*F) + D*V) + layers*4*B*L*L*H*dk)
//     (q, k, v, o projections, the two FFN products, the output logits; the attention scores and
//     values, causal positions included); 43.5 GFLOP for models::BenchConfig().
//   MLP (../shared/peers/mlp_bench.py): 2*B*D*F per product; forward 2, weight gradients 2, the
//     hidden gradient 1, and the input gradient 1 when MlpOptions::input_gradient (the peer's mp
//     mode; its DDP mode does not compute it): 12.9 GFLOP with, 10.7 without, at the defaults.
// GraphGemmFlops counts what a built graph actually executes in its multi-operand einsums, which
// checks the formulas against the real training graphs (train_flops_test) and shows ours' extra
// work: the Transformer's embedding is a one-hot GEMM (2*B*L*V*D forward, as much again for the
// embedding's gradient) where the peer gathers rows.
//
// Thread-safety: pure functions.
#ifndef MESHRT_BENCH_TRAIN_FLOPS_H_
#define MESHRT_BENCH_TRAIN_FLOPS_H_

#include <string>
#include <vector>

#include "core/ops/graph.h"
#include "models/mlp.h"
#include "models/transformer.h"

namespace meshrt {
namespace bench {

// The peer's FLOPs per training step (above).
double TransformerStepFlops(const models::TransformerOptions& o);
double MlpStepFlops(const models::MlpOptions& o);

// Ours' one-hot embedding GEMM per step (forward and the embedding's gradient): 4*B*L*V*D.
double TransformerEmbeddingFlops(const models::TransformerOptions& o);

// Sum over the einsums of `graph` with two or more operands of 2 * (product of the sizes of every
// distinct dim of the operands and the output) per pairwise product: what a GEMM-based einsum
// executes. Only the ops a step fetching `fetches` runs are counted: those the fetches and the
// variable updates (assign, assign_add) depend on, as runtime/executor.h prunes a step (so, e.g.,
// the gradient of the one-hot embedding input, which nothing reads, is not counted). While_loop
// bodies are not counted.
double GraphGemmFlops(const Graph& graph, const std::vector<std::string>& fetches);

}  // namespace bench
}  // namespace meshrt

#endif  // MESHRT_BENCH_TRAIN_FLOPS_H_
