// Internal to lowering: one function per op family (lower_<family>.cc). Each lowers `op` whose
// inputs are laid out in their rule layouts and returns its output in the rule layout.
#ifndef MESHRT_CORE_LOWER_OPS_H_
#define MESHRT_CORE_LOWER_OPS_H_

#include <vector>

#include "core/graph.h"
#include "core/program_builder.h"

namespace meshrt {

struct LoweringContext {
  const Graph& graph;
  const LayoutRules& rules;
  ProgramBuilder& builder;

  const Mesh& mesh() const { return builder.mesh(); }
  TensorLayout RuleLayout(const Shape& s) const { return rules.LayoutFor(s); }
};

LaidOutTensor LowerSource(LoweringContext& ctx, const v1::Op& op);
LaidOutTensor LowerElementwise(LoweringContext& ctx, const v1::Op& op,
                               const std::vector<LaidOutTensor>& inputs);
LaidOutTensor LowerEinsum(LoweringContext& ctx, const v1::Op& op,
                          const std::vector<LaidOutTensor>& inputs);
LaidOutTensor LowerReduce(LoweringContext& ctx, const v1::Op& op, const LaidOutTensor& input);
LaidOutTensor LowerReshape(LoweringContext& ctx, const v1::Op& op, const LaidOutTensor& input);

}  // namespace meshrt

#endif  // MESHRT_CORE_LOWER_OPS_H_
