// Internal to lowering: one function per op family (lower_<family>.cc). Each lowers `op` whose
// inputs are laid out in their rule layouts and returns its output in the rule layout.
#ifndef MESHRT_CORE_LOWER_OPS_H_
#define MESHRT_CORE_LOWER_OPS_H_

#include <set>
#include <string>
#include <vector>

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

// Lowers one op by its family (or its OpInfo::lower hook). lowering.cc.
LaidOutTensor LowerOp(LoweringContext& ctx, const v1::Op& op,
                      const std::vector<LaidOutTensor>& inputs);

LaidOutTensor LowerSource(LoweringContext& ctx, const v1::Op& op);
LaidOutTensor LowerElementwise(LoweringContext& ctx, const v1::Op& op,
                               const std::vector<LaidOutTensor>& inputs);
LaidOutTensor LowerEinsum(LoweringContext& ctx, const v1::Op& op,
                          const std::vector<LaidOutTensor>& inputs);
LaidOutTensor LowerReduce(LoweringContext& ctx, const v1::Op& op, const LaidOutTensor& input);
LaidOutTensor LowerReshape(LoweringContext& ctx, const v1::Op& op, const LaidOutTensor& input);

}  // namespace meshrt

#endif  // MESHRT_CORE_LOWER_OPS_H_
