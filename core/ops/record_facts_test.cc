// Facts kept in the ops' records: linearity (OpInfo::linear), which lazy partial sums read
// (core/lowering/lower_partial.cc) — exactly the ops a partial sum may flow through, and for each
// the inputs it may be partial in — and the variable updates (OpInfo::updates_variable).
#include <set>
#include <string>
#include <vector>

#include "core/ops/ops.h"
#include "gtest/gtest.h"

namespace meshrt {
namespace {

v1::Op Op(const std::string& type) {
  v1::Op op;
  op.set_type(type);
  return op;
}

bool Linear(const v1::Op& op, std::vector<bool> partial, std::vector<DType> in = {},
            DType out = DType::kFloat32) {
  const OpInfo* info = FindOp(op.type());
  EXPECT_NE(info, nullptr) << op.type();
  if (info == nullptr || info->linear == nullptr) return false;
  if (in.empty()) in.assign(partial.size(), DType::kFloat32);
  return info->linear(op, partial, in, out);
}

TEST(LinearityTest, TheRecordsSayWhichOpsAPartialSumFlowsThrough) {
  std::set<std::string> linear;
  for (const OpInfo& info : AllOps()) {
    if (info.linear != nullptr) linear.insert(info.type);
  }
  EXPECT_EQ(linear, (std::set<std::string>{"add", "cast", "div", "mul", "neg", "reduce_mean",
                                           "reduce_sum", "rename_dim", "replace_dims", "reshape",
                                           "scale", "sub", "where"}));
}

TEST(LinearityTest, EachOpIsLinearInTheRightInputs) {
  EXPECT_TRUE(Linear(Op("reshape"), {true}));
  EXPECT_TRUE(Linear(Op("reduce_sum"), {true}));
  EXPECT_TRUE(Linear(Op("neg"), {true}));
  // add/sub: both addends partial (a whole addend would be counted once per processor summed).
  EXPECT_TRUE(Linear(Op("add"), {true, true}));
  EXPECT_FALSE(Linear(Op("add"), {true, false}));
  v1::Op add_scalar = Op("add");
  (*add_scalar.mutable_attrs())["scalar"].set_f(1);
  EXPECT_FALSE(Linear(add_scalar, {true}));
  // mul: in exactly one operand, or by a scalar.
  EXPECT_TRUE(Linear(Op("mul"), {true, false}));
  EXPECT_TRUE(Linear(Op("mul"), {false, true}));
  EXPECT_FALSE(Linear(Op("mul"), {true, true}));
  // div: in the dividend only.
  EXPECT_TRUE(Linear(Op("div"), {true, false}));
  EXPECT_FALSE(Linear(Op("div"), {false, true}));
  // cast: only when it keeps the dtype.
  EXPECT_TRUE(Linear(Op("cast"), {true}, {DType::kFloat32}, DType::kFloat32));
  EXPECT_FALSE(Linear(Op("cast"), {true}, {DType::kFloat32}, DType::kInt32));
  // where(c, x, y): in x and y together, or x with a scalar 0; never in the condition.
  EXPECT_TRUE(Linear(Op("where"), {false, true, true}));
  EXPECT_FALSE(Linear(Op("where"), {true, true, true}));
  EXPECT_FALSE(Linear(Op("where"), {false, true, false}));
  v1::Op where0 = Op("where");
  (*where0.mutable_attrs())["scalar"].set_f(0);
  EXPECT_TRUE(Linear(where0, {false, true}));
  (*where0.mutable_attrs())["scalar"].set_f(2);
  EXPECT_FALSE(Linear(where0, {false, true}));
  // Not linear: no record facet.
  EXPECT_FALSE(Linear(Op("relu"), {true}));
  EXPECT_FALSE(Linear(Op("reduce_max"), {true}));
}

// The variable updates are a record flag too (OpInfo::updates_variable).
TEST(RecordFlagsTest, VariableUpdatesAreMarkedInTheirRecords) {
  std::set<std::string> updates;
  for (const OpInfo& info : AllOps()) {
    if (info.updates_variable) updates.insert(info.type);
  }
  EXPECT_EQ(updates, (std::set<std::string>{"assign", "assign_add"}));
}

}  // namespace
}  // namespace meshrt
