// Internal to lowering: one function per op family (lower_<family>.cc). Each lowers `op` whose
// inputs are laid out in their rule layouts and returns its output in the rule layout, or an error:
// InvalidArgument naming the op (OpError) when its attrs or inputs cannot be lowered, Internal
// naming the op for a broken lowering invariant. Nothing on this path aborts the process.
#ifndef MESHRT_CORE_LOWER_OPS_H_
#define MESHRT_CORE_LOWER_OPS_H_

#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/graph.h"
#include "core/program_builder.h"

namespace meshrt {

struct LoweringContext {
  const Graph& graph;
  const LayoutRules& rules;
  ProgramBuilder& builder;
  // Ops whose partial sums the caller resolves itself (a loop's accumulators, summed over the
  // iterations first): their lowering may return a LaidOutTensor with partial_sum_axes.
  const std::set<std::string>* keep_partial = nullptr;

  const Mesh& mesh() const { return builder.mesh(); }
  TensorLayout RuleLayout(const Shape& s) const { return rules.LayoutFor(s); }
};

// Lowers one op by its family (or its OpInfo::lower hook). lowering.cc. InvalidArgument for an
// unknown op type or a wrong number of inputs; Internal for a registered type with no lowering.
absl::StatusOr<LaidOutTensor> LowerOp(LoweringContext& ctx, const v1::Op& op,
                                      const std::vector<LaidOutTensor>& inputs);

absl::StatusOr<LaidOutTensor> LowerSource(LoweringContext& ctx, const v1::Op& op);
absl::StatusOr<LaidOutTensor> LowerElementwise(LoweringContext& ctx, const v1::Op& op,
                                               const std::vector<LaidOutTensor>& inputs);
absl::StatusOr<LaidOutTensor> LowerEinsum(LoweringContext& ctx, const v1::Op& op,
                                          const std::vector<LaidOutTensor>& inputs);
absl::StatusOr<LaidOutTensor> LowerReduce(LoweringContext& ctx, const v1::Op& op,
                                          const LaidOutTensor& input);
absl::StatusOr<LaidOutTensor> LowerReshape(LoweringContext& ctx, const v1::Op& op,
                                           const LaidOutTensor& input);

// Internal "lowering op 'NAME' (TYPE): what (a lowering bug)": a broken invariant of lowering.
absl::Status LoweringBug(const v1::Op& op, absl::string_view what);

}  // namespace meshrt

#endif  // MESHRT_CORE_LOWER_OPS_H_
