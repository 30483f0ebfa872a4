// The data-movement family: shape inference (and its errors) and the reference kernels on
// hand-computed values.
#include <cmath>

#include "core/ir/program_builder.h"  // LaidOutTensor: OpInfo::lower is compared below
#include "core/ops/kernel_runner.h"
#include "core/ops/ops.h"
#include "core/testing/data_index_test_util.h"
#include "gtest/gtest.h"

namespace meshrt {
namespace {

using testing_util::Attr;
using testing_util::GraphWriter;

v1::Op MakeOp(const std::string& type, const std::vector<std::string>& dims,
              const std::vector<Attr>& attrs) {
  GraphWriter w;
  return w.Op("op", type, {}, dims, attrs);
}

// Runs `op` with the reference kernels into an output of `shape`, pre-filled with garbage so a
// kernel that skips elements is caught.
Tensor RunKernel(const v1::Op& op, std::vector<const Tensor*> inputs, const Shape& shape,
                 DType dtype = DType::kFloat32) {
  Tensor out(dtype, shape);
  for (int64_t i = 0; i < out.num_elements(); ++i) {
    if (dtype == DType::kFloat32) {
      out.f32()[i] = 99.0f;
    } else {
      out.i32()[i] = 99;
    }
  }
  absl::Status s = ReferenceKernels().Run(op, inputs, &out);
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

std::vector<float> F(const Tensor& t) { return {t.floats().begin(), t.floats().end()}; }
std::vector<int32_t> I(const Tensor& t) { return {t.ints().begin(), t.ints().end()}; }

Tensor Iota(const Shape& shape, float start = 0) {
  std::vector<float> v(shape.num_elements());
  for (size_t i = 0; i < v.size(); ++i) v[i] = start + static_cast<float>(i);
  return Tensor::Float(shape, v);
}

TEST(DataKernelsTest, SliceKeepsTheRangeAndMatchesDimsByName) {
  const Tensor x = Iota(Shape({{"a", 2}, {"s", 5}}));
  const v1::Op op = MakeOp("slice", {"s"}, {{"begin", 1}, {"size", 3}, {"new_dim", "t"}});
  EXPECT_EQ(F(RunKernel(op, {&x}, Shape({{"a", 2}, {"t", 3}}))),
            (std::vector<float>{1, 2, 3, 6, 7, 8}));
  // The output's dims in another order: matched by name.
  EXPECT_EQ(F(RunKernel(op, {&x}, Shape({{"t", 3}, {"a", 2}}))),
            (std::vector<float>{1, 6, 2, 7, 3, 8}));
}

TEST(DataKernelsTest, SplitByCountAndBySizes) {
  const Tensor x = Iota(Shape({{"s", 6}}), 10);
  EXPECT_EQ(F(RunKernel(MakeOp("split", {"s"}, {{"index", 2}, {"num", 3}, {"new_dim", "p"}}), {&x},
                        Shape({{"p", 2}}))),
            (std::vector<float>{14, 15}));
  const std::vector<int64_t> sizes = {1, 2, 3};
  EXPECT_EQ(F(RunKernel(MakeOp("split", {"s"}, {{"index", 1}, {"sizes", sizes}, {"new_dim", "p"}}),
                        {&x}, Shape({{"p", 2}}))),
            (std::vector<float>{11, 12}));
  EXPECT_EQ(F(RunKernel(MakeOp("split", {"s"}, {{"index", 2}, {"sizes", sizes}, {"new_dim", "p"}}),
                        {&x}, Shape({{"p", 3}}))),
            (std::vector<float>{13, 14, 15}));
}

TEST(DataKernelsTest, PadFillsZeros) {
  const Tensor x = Tensor::Float(Shape({{"a", 2}, {"s", 2}}), {1, 2, 3, 4});
  const v1::Op op = MakeOp("pad", {"s"}, {{"before", 1}, {"after", 2}, {"new_dim", "p"}});
  EXPECT_EQ(F(RunKernel(op, {&x}, Shape({{"a", 2}, {"p", 5}}))),
            (std::vector<float>{0, 1, 2, 0, 0, 0, 3, 4, 0, 0}));
  const Tensor xi = Tensor::Int(Shape({{"s", 2}, {"a", 2}}), {1, 2, 3, 4});
  EXPECT_EQ(I(RunKernel(op, {&xi}, Shape({{"p", 5}, {"a", 2}}), DType::kInt32)),
            (std::vector<int32_t>{0, 0, 1, 2, 3, 4, 0, 0, 0, 0}));
}

TEST(DataKernelsTest, ConcatAlongDifferentlyNamedDims) {
  const Tensor x = Tensor::Float(Shape({{"a", 2}, {"s", 2}}), {1, 2, 3, 4});
  const Tensor y = Tensor::Float(Shape({{"t", 1}, {"a", 2}}), {5, 6});  // other dim order
  const v1::Op op = MakeOp("concat", {"s", "t"}, {{"new_dim", "u"}});
  EXPECT_EQ(F(RunKernel(op, {&x, &y}, Shape({{"a", 2}, {"u", 3}}))),
            (std::vector<float>{1, 2, 5, 3, 4, 6}));
  const Tensor xi = Tensor::Int(Shape({{"a", 2}, {"s", 2}}), {1, 2, 3, 4});
  EXPECT_EQ(I(RunKernel(MakeOp("concat", {"s"}, {{"new_dim", "u"}}), {&xi, &xi},
                        Shape({{"a", 2}, {"u", 4}}), DType::kInt32)),
            (std::vector<int32_t>{1, 2, 1, 2, 3, 4, 3, 4}));
}

TEST(DataKernelsTest, StackAtAnAxisAndUnstack) {
  const Tensor x = Tensor::Float(Shape({{"a", 2}}), {1, 2});
  const Tensor y = Tensor::Float(Shape({{"a", 2}}), {3, 4});
  EXPECT_EQ(F(RunKernel(MakeOp("stack", {}, {{"new_dim", "k"}, {"axis", 1}}), {&x, &y},
                        Shape({{"a", 2}, {"k", 2}}))),
            (std::vector<float>{1, 3, 2, 4}));
  EXPECT_EQ(
      F(RunKernel(MakeOp("stack", {}, {{"new_dim", "k"}}), {&x, &y}, Shape({{"k", 2}, {"a", 2}}))),
      (std::vector<float>{1, 2, 3, 4}));
  const Tensor z = Iota(Shape({{"a", 2}, {"s", 3}}));
  EXPECT_EQ(F(RunKernel(MakeOp("unstack", {"s"}, {{"index", 2}}), {&z}, Shape({{"a", 2}}))),
            (std::vector<float>{2, 5}));
  EXPECT_EQ(F(RunKernel(MakeOp("unstack", {"a"}, {{"index", 1}}), {&z}, Shape({{"s", 3}}))),
            (std::vector<float>{3, 4, 5}));
}

TEST(DataKernelsTest, ReplaceDimsIsARowMajorCopy) {
  const Tensor x = Iota(Shape({{"a", 2}, {"s", 6}}));
  GraphWriter w;
  v1::Op& op = w.Op("op", "replace_dims", {}, {"s"});
  *op.mutable_shape() = Shape({{"u", 2}, {"w", 3}}).ToProto();
  EXPECT_EQ(F(RunKernel(op, {&x}, Shape({{"a", 2}, {"u", 2}, {"w", 3}}))), F(x));
}

// ---- shape inference -----------------------------------------------------------------------

TEST(DataInferTest, OutputShapes) {
  GraphWriter w;
  w.Placeholder("x", Shape({{"b", 2}, {"s", 8}, {"h", 3}}));
  w.Placeholder("y", Shape({{"h", 3}, {"t", 4}, {"b", 2}}));
  w.Op("sl", "slice", {"x"}, {"s"}, {{"begin", 2}, {"size", 4}, {"new_dim", "s4"}});
  w.Op("sp", "split", {"x"}, {"s"}, {{"index", 3}, {"num", 4}, {"new_dim", "s2"}});
  w.Op("pd", "pad", {"x"}, {"s"}, {{"before", 1}, {"new_dim", "s9"}});
  w.Op("cc", "concat", {"x", "y"}, {"s", "t"}, {{"new_dim", "st"}});
  w.Op("st", "stack", {"x", "x", "x"}, {}, {{"new_dim", "k"}, {"axis", 3}});
  w.Op("us", "unstack", {"x"}, {"h"}, {{"index", 2}});
  v1::Op& rd = w.Op("rd", "replace_dims", {"x"}, {"s"});
  *rd.mutable_shape() = Shape({{"s_a", 2}, {"s_b", 4}}).ToProto();
  w.Op("same", "slice", {"x"}, {"s"}, {{"size", 8}});  // whole dim: the name may stay
  ASSERT_OK_AND_ASSIGN(Graph g, w.Build());
  EXPECT_EQ(g.type("sl").shape, Shape({{"b", 2}, {"s4", 4}, {"h", 3}}));
  EXPECT_EQ(g.type("sp").shape, Shape({{"b", 2}, {"s2", 2}, {"h", 3}}));
  EXPECT_EQ(g.type("pd").shape, Shape({{"b", 2}, {"s9", 9}, {"h", 3}}));
  EXPECT_EQ(g.type("cc").shape, Shape({{"b", 2}, {"st", 12}, {"h", 3}}));
  EXPECT_EQ(g.type("st").shape, Shape({{"b", 2}, {"s", 8}, {"h", 3}, {"k", 3}}));
  EXPECT_EQ(g.type("us").shape, Shape({{"b", 2}, {"s", 8}}));
  EXPECT_EQ(g.type("rd").shape, Shape({{"b", 2}, {"s_a", 2}, {"s_b", 4}, {"h", 3}}));
  EXPECT_EQ(g.type("same").shape, g.type("x").shape);
}

// Builds x[b:2, s:8] plus one op; returns the graph's build status.
absl::Status BuildWith(const std::string& type, const std::vector<std::string>& inputs,
                       const std::vector<std::string>& dims, const std::vector<Attr>& attrs) {
  GraphWriter w;
  w.Placeholder("x", Shape({{"b", 2}, {"s", 8}}));
  w.Placeholder("z", Shape({{"b", 2}, {"q", 3}}));
  w.Op("op", type, inputs, dims, attrs);
  return w.Build().status();
}

TEST(DataInferTest, ErrorsNameTheOpAndTheFix) {
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  EXPECT_TRUE(
      StatusIs(BuildWith("slice", {"x"}, {"s"}, {{"begin", 6}, {"size", 3}, {"new_dim", "t"}}),
               kInvalid, {"op 'op' (slice)", "[6, 9)", "size 8"}));
  EXPECT_TRUE(
      StatusIs(BuildWith("slice", {"x"}, {"s"}, {{"size", 3}}), kInvalid, {"'s'", "new_dim"}));
  EXPECT_TRUE(StatusIs(BuildWith("slice", {"x"}, {"nope"}, {{"size", 1}}), kInvalid,
                       {"'nope'", "[b:2, s:8]"}));
  EXPECT_TRUE(StatusIs(BuildWith("slice", {"x"}, {"s"}, {{"size", 2}, {"new_dim", "b"}}), kInvalid,
                       {"new_dim 'b' is already a dim"}));
  EXPECT_TRUE(StatusIs(BuildWith("split", {"x"}, {"s"}, {{"index", 0}, {"num", 3}}), kInvalid,
                       {"3 equal pieces"}));
  EXPECT_TRUE(StatusIs(
      BuildWith("split", {"x"}, {"s"}, {{"index", 0}, {"sizes", std::vector<int64_t>{3, 4}}}),
      kInvalid, {"do not sum to", "8"}));
  EXPECT_TRUE(StatusIs(BuildWith("split", {"x"}, {"s"}, {{"index", 4}, {"num", 4}}), kInvalid,
                       {"index 4"}));
  EXPECT_TRUE(StatusIs(BuildWith("pad", {"x"}, {"s"}, {{"before", -1}, {"new_dim", "p"}}), kInvalid,
                       {">= 0"}));
  EXPECT_TRUE(StatusIs(BuildWith("concat", {"x", "z"}, {"s", "b"}, {{"new_dim", "u"}}), kInvalid,
                       {"op 'op' (concat)", "[q:3]", "[b:2]"}));
  EXPECT_TRUE(StatusIs(BuildWith("concat", {"x", "z"}, {"s", "s"}, {{"new_dim", "u"}}), kInvalid,
                       {"along 's'", "'z'"}));
  EXPECT_TRUE(StatusIs(BuildWith("stack", {"x", "z"}, {}, {{"new_dim", "k"}}), kInvalid,
                       {"different shapes"}));
  EXPECT_TRUE(
      StatusIs(BuildWith("stack", {"x"}, {}, {{"new_dim", "s"}}), kInvalid, {"already a dim"}));
  EXPECT_TRUE(StatusIs(BuildWith("stack", {"x"}, {}, {{"new_dim", "k"}, {"axis", 3}}), kInvalid,
                       {"axis 3"}));
  EXPECT_TRUE(StatusIs(BuildWith("unstack", {"x"}, {"s"}, {{"index", 8}}), kInvalid,
                       {"index 8", "size 8"}));
  GraphWriter w;
  w.Placeholder("x", Shape({{"b", 2}, {"s", 8}}));
  *w.Op("rd", "replace_dims", {"x"}, {"s"}).mutable_shape() = Shape({{"u", 3}}).ToProto();
  EXPECT_TRUE(StatusIs(w.Build().status(), kInvalid, {"sizes must match"}));
}

TEST(DataInferTest, RegisteredWithFamilyAndCollectives) {
  for (const char* type : {"slice", "pad", "concat", "split", "stack", "unstack"}) {
    const OpInfo* info = FindOp(type);
    ASSERT_NE(info, nullptr) << type;
    EXPECT_EQ(info->family, OpFamily::kData) << type;
    EXPECT_TRUE(info->differentiable) << type;
    EXPECT_FALSE(info->collectives.empty()) << type;
    EXPECT_NE(info->lower, nullptr) << type;
  }
  ASSERT_NE(FindOp("replace_dims"), nullptr);
  EXPECT_EQ(FindOp("replace_dims")->family, OpFamily::kReshape);
}

}  // namespace
}  // namespace meshrt
