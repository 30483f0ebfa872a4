// The indexing family: shape inference (and its errors) and the reference kernels on
// hand-computed values, including ties, NaN, out-of-range indices and slice offsets.
#include <cmath>
#include <limits>

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
              const std::vector<Attr>& attrs = {}) {
  GraphWriter w;
  return w.Op("op", type, {}, dims, attrs);
}

v1::Op WithSliceBegin(v1::Op op, const std::vector<int64_t>& begin) {
  for (int64_t b : begin) (*op.mutable_attrs())["_slice_begin"].mutable_ints()->add_values(b);
  return op;
}

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
constexpr DType kI = DType::kInt32;

TEST(IndexKernelsTest, OneHotWithAndWithoutSliceBegin) {
  const Tensor idx = Tensor::Int(Shape({{"a", 3}}), {0, 2, 5});
  const v1::Op op = MakeOp("one_hot", {});
  EXPECT_EQ(F(RunKernel(op, {&idx}, Shape({{"a", 3}, {"v", 4}}))),
            (std::vector<float>{1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0}));
  // The slice holding depth positions 2..3: index 2 is its first column.
  EXPECT_EQ(F(RunKernel(WithSliceBegin(op, {0, 2}), {&idx}, Shape({{"a", 3}, {"v", 2}}))),
            (std::vector<float>{0, 0, 1, 0, 0, 0}));
  const v1::Op ints = MakeOp("one_hot", {}, {{"on_value", 7.0f}, {"off_value", -1.0f}});
  EXPECT_EQ(I(RunKernel(ints, {&idx}, Shape({{"a", 3}, {"v", 3}}), kI)),
            (std::vector<int32_t>{7, -1, -1, -1, -1, 7, -1, -1, -1}));
  // Depth outermost (strided runs); a negative index and one past the depth are all off.
  const Tensor odd = Tensor::Int(Shape({{"a", 3}}), {1, -1, 3});
  EXPECT_EQ(F(RunKernel(op, {&odd}, Shape({{"v", 3}, {"a", 3}}))),
            (std::vector<float>{0, 0, 0, 1, 0, 0, 0, 0, 0}));
}

TEST(IndexKernelsTest, GatherRowsZerosOutOfRangeAndRowIds) {
  const Tensor w = Tensor::Float(Shape({{"v", 3}, {"e", 2}}), {1, 2, 3, 4, 5, 6});
  const Tensor idx = Tensor::Int(Shape({{"b", 2}, {"q", 2}}), {2, 0, 1, 7});
  const v1::Op op = MakeOp("gather", {"v"});
  EXPECT_EQ(F(RunKernel(op, {&w, &idx}, Shape({{"b", 2}, {"q", 2}, {"e", 2}}))),
            (std::vector<float>{5, 6, 1, 2, 3, 4, 0, 0}));
  // A slice holding rows 1..2 (row_ids 1, 2): row 0 is someone else's.
  const Tensor part = Tensor::Float(Shape({{"v", 2}, {"e", 2}}), {3, 4, 5, 6});
  const Tensor ids = Tensor::Int(Shape({{"v", 2}}), {1, 2});
  EXPECT_EQ(F(RunKernel(op, {&part, &idx, &ids}, Shape({{"b", 2}, {"q", 2}, {"e", 2}}))),
            (std::vector<float>{5, 6, 0, 0, 3, 4, 0, 0}));
  // A dim in both weights and indices is a batch dim.
  const Tensor wb = Tensor::Int(Shape({{"b", 2}, {"v", 3}}), {1, 2, 3, 4, 5, 6});
  const Tensor ib = Tensor::Int(Shape({{"b", 2}}), {2, 0});
  EXPECT_EQ(I(RunKernel(op, {&wb, &ib}, Shape({{"b", 2}}), kI)), (std::vector<int32_t>{3, 4}));
}

TEST(IndexKernelsTest, RangeFromTheSliceBegin) {
  EXPECT_EQ(F(RunKernel(MakeOp("range", {}), {}, Shape({{"s", 4}}))),
            (std::vector<float>{0, 1, 2, 3}));
  EXPECT_EQ(I(RunKernel(WithSliceBegin(MakeOp("range", {}), {4}), {}, Shape({{"s", 4}}), kI)),
            (std::vector<int32_t>{4, 5, 6, 7}));
}

TEST(IndexKernelsTest, TopKValuesIndicesTiesAndIds) {
  const Tensor x = Tensor::Float(Shape({{"a", 2}, {"s", 5}}), {3, 1, 4, 1, 5, 9, 2, 6, 5, 3});
  const Shape out({{"a", 2}, {"k", 3}});
  EXPECT_EQ(F(RunKernel(MakeOp("top_k", {"s"}, {{"k", 3}, {"new_dim", "k"}}), {&x}, out)),
            (std::vector<float>{5, 4, 3, 9, 6, 5}));
  EXPECT_EQ(I(RunKernel(MakeOp("top_k", {"s"}, {{"k", 3}, {"new_dim", "k"}, {"output", "indices"}}),
                        {&x}, out, kI)),
            (std::vector<int32_t>{4, 2, 0, 0, 2, 3}));
  // Ties go to the smaller index, or the smaller id.
  const Tensor t = Tensor::Int(Shape({{"s", 5}}), {1, 3, 3, 0, 3});
  const v1::Op idx = MakeOp("top_k", {"s"}, {{"k", 2}, {"new_dim", "k"}, {"output", "indices"}});
  EXPECT_EQ(I(RunKernel(idx, {&t}, Shape({{"k", 2}}), kI)), (std::vector<int32_t>{1, 2}));
  const Tensor ids = Tensor::Int(Shape({{"s", 5}}), {10, 8, 7, 6, 9});
  EXPECT_EQ(I(RunKernel(idx, {&t, &ids}, Shape({{"k", 2}}), kI)), (std::vector<int32_t>{7, 8}));
  // NaN ranks above every number.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor n = Tensor::Float(Shape({{"s", 3}}), {1, nan, 3});
  EXPECT_EQ(I(RunKernel(MakeOp("top_k", {"s"}, {{"k", 2}, {"new_dim", "k"}, {"output", "indices"}}),
                        {&n}, Shape({{"k", 2}}), kI)),
            (std::vector<int32_t>{1, 2}));
}

TEST(IndexKernelsTest, ArgmaxFirstOfTheLargest) {
  const Tensor x = Tensor::Float(Shape({{"a", 2}, {"s", 5}}), {3, 1, 4, 1, 5, 9, 2, 6, 5, 3});
  EXPECT_EQ(I(RunKernel(MakeOp("argmax", {"s"}), {&x}, Shape({{"a", 2}}), kI)),
            (std::vector<int32_t>{4, 0}));
  EXPECT_EQ(I(RunKernel(MakeOp("argmax", {"a"}), {&x}, Shape({{"s", 5}}), kI)),
            (std::vector<int32_t>{1, 1, 1, 1, 0}));
  const Tensor t = Tensor::Int(Shape({{"s", 5}}), {1, 3, 3, 0, 3});
  EXPECT_EQ(I(RunKernel(MakeOp("argmax", {"s"}), {&t}, Shape(), kI)), (std::vector<int32_t>{1}));
}

TEST(IndexKernelsTest, CumsumInclusiveExclusiveAndCarry) {
  const Tensor x = Tensor::Float(Shape({{"a", 2}, {"s", 3}}), {1, 2, 3, 4, 5, 6});
  const Shape shape = x.shape();
  EXPECT_EQ(F(RunKernel(MakeOp("cumsum", {"s"}), {&x}, shape)),
            (std::vector<float>{1, 3, 6, 4, 9, 15}));
  EXPECT_EQ(F(RunKernel(MakeOp("cumsum", {"s"}, {{"exclusive", true}}), {&x}, shape)),
            (std::vector<float>{0, 1, 3, 0, 4, 9}));
  EXPECT_EQ(F(RunKernel(MakeOp("cumsum", {"a"}), {&x}, shape)),
            (std::vector<float>{1, 2, 3, 5, 7, 9}));
  const Tensor carry = Tensor::Float(Shape({{"a", 2}}), {10, 20});
  EXPECT_EQ(F(RunKernel(MakeOp("cumsum", {"s"}), {&x, &carry}, shape)),
            (std::vector<float>{11, 13, 16, 24, 29, 35}));
  const Tensor carry1 = Tensor::Float(Shape({{"a", 2}, {"s", 1}}), {10, 20});
  EXPECT_EQ(F(RunKernel(MakeOp("cumsum", {"s"}, {{"exclusive", true}}), {&x, &carry1}, shape)),
            (std::vector<float>{10, 11, 13, 20, 24, 29}));
  const Tensor xi = Tensor::Int(Shape({{"s", 4}}), {1, -2, 3, 4});
  EXPECT_EQ(I(RunKernel(MakeOp("cumsum", {"s"}), {&xi}, xi.shape(), kI)),
            (std::vector<int32_t>{1, -1, 2, 6}));
}

TEST(IndexKernelsTest, SortStableBothWays) {
  const Tensor x = Tensor::Float(Shape({{"s", 5}}), {3, 1, 4, 1, 5});
  const Shape s = x.shape();
  EXPECT_EQ(F(RunKernel(MakeOp("sort", {"s"}), {&x}, s)), (std::vector<float>{1, 1, 3, 4, 5}));
  EXPECT_EQ(I(RunKernel(MakeOp("sort", {"s"}, {{"output", "indices"}}), {&x}, s, kI)),
            (std::vector<int32_t>{1, 3, 0, 2, 4}));
  EXPECT_EQ(F(RunKernel(MakeOp("sort", {"s"}, {{"descending", true}}), {&x}, s)),
            (std::vector<float>{5, 4, 3, 1, 1}));
  EXPECT_EQ(I(RunKernel(MakeOp("sort", {"s"}, {{"descending", true}, {"output", "indices"}}), {&x},
                        s, kI)),
            (std::vector<int32_t>{4, 2, 0, 1, 3}));
  // Along the leading dim.
  const Tensor y = Tensor::Int(Shape({{"s", 3}, {"a", 2}}), {3, 0, 1, 2, 2, 1});
  EXPECT_EQ(I(RunKernel(MakeOp("sort", {"s"}), {&y}, y.shape(), kI)),
            (std::vector<int32_t>{1, 0, 2, 1, 3, 2}));
}

// ---- shape inference -----------------------------------------------------------------------

TEST(IndexInferTest, OutputShapesAndDtypes) {
  GraphWriter w;
  w.Placeholder("ids", Shape({{"b", 2}, {"q", 3}}), kI);
  w.Placeholder("emb", Shape({{"v", 5}, {"e", 4}}));
  w.Placeholder("x", Shape({{"b", 2}, {"s", 6}}));
  *w.Op("oh", "one_hot", {"ids"}).mutable_shape() = Shape({{"v", 5}}).ToProto();
  w.Op("g", "gather", {"emb", "ids"}, {"v"});
  v1::Op& r = w.Op("r", "range", {});
  *r.mutable_shape() = Shape({{"s", 6}}).ToProto();
  r.set_dtype(v1::DT_INT32);
  w.Op("tk", "top_k", {"x"}, {"s"}, {{"k", 2}, {"new_dim", "k2"}, {"output", "indices"}});
  w.Op("am", "argmax", {"x"}, {"s"});
  w.Op("cs", "cumsum", {"x"}, {"s"}, {{"exclusive", true}});
  w.Op("so", "sort", {"x"}, {"b"}, {{"output", "indices"}});
  ASSERT_OK_AND_ASSIGN(Graph g, w.Build());
  EXPECT_EQ(g.type("oh").shape, Shape({{"b", 2}, {"q", 3}, {"v", 5}}));
  EXPECT_EQ(g.type("oh").dtype, DType::kFloat32);
  EXPECT_EQ(g.type("g").shape, Shape({{"b", 2}, {"q", 3}, {"e", 4}}));
  EXPECT_EQ(g.type("r").dtype, kI);
  EXPECT_EQ(g.type("tk").shape, Shape({{"b", 2}, {"k2", 2}}));
  EXPECT_EQ(g.type("tk").dtype, kI);
  EXPECT_EQ(g.type("am").shape, Shape({{"b", 2}}));
  EXPECT_EQ(g.type("am").dtype, kI);
  EXPECT_EQ(g.type("cs").shape, g.type("x").shape);
  EXPECT_EQ(g.type("so").dtype, kI);
}

absl::Status BuildWith(const std::string& type, const std::vector<std::string>& inputs,
                       const std::vector<std::string>& dims, const std::vector<Attr>& attrs,
                       const Shape& shape = Shape()) {
  GraphWriter w;
  w.Placeholder("x", Shape({{"b", 2}, {"s", 6}}));
  w.Placeholder("i", Shape({{"b", 2}}), kI);
  w.Placeholder("c", Shape({{"b", 2}, {"t", 2}}));
  v1::Op& op = w.Op("op", type, inputs, dims, attrs);
  if (shape.rank() > 0) *op.mutable_shape() = shape.ToProto();
  return w.Build().status();
}

TEST(IndexInferTest, ErrorsNameTheOpAndTheProblem) {
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  EXPECT_TRUE(StatusIs(BuildWith("one_hot", {"x"}, {}, {}, Shape({{"v", 3}})), kInvalid,
                       {"op 'op' (one_hot)", "must be int32"}));
  EXPECT_TRUE(
      StatusIs(BuildWith("one_hot", {"i"}, {}, {}, Shape({{"b", 2}})), kInvalid, {"depth dim"}));
  EXPECT_TRUE(StatusIs(BuildWith("gather", {"x", "x"}, {"s"}, {}), kInvalid, {"must be int32"}));
  EXPECT_TRUE(StatusIs(BuildWith("gather", {"x", "i"}, {"v"}, {}), kInvalid, {"'v'"}));
  EXPECT_TRUE(
      StatusIs(BuildWith("range", {}, {}, {}, Shape({{"s", 6}, {"b", 2}})), kInvalid, {"one dim"}));
  EXPECT_TRUE(StatusIs(BuildWith("top_k", {"x"}, {"s"}, {{"k", 7}, {"new_dim", "k"}}), kInvalid,
                       {"k = 7", "1..6"}));
  EXPECT_TRUE(StatusIs(BuildWith("top_k", {"x"}, {"s"}, {{"k", 2}}), kInvalid, {"new_dim"}));
  EXPECT_TRUE(
      StatusIs(BuildWith("top_k", {"x"}, {"s"}, {{"k", 2}, {"new_dim", "k"}, {"output", "both"}}),
               kInvalid, {"\"both\""}));
  EXPECT_TRUE(StatusIs(BuildWith("cumsum", {"x", "c"}, {"s"}, {}), kInvalid, {"'t'"}));
  EXPECT_TRUE(
      StatusIs(BuildWith("cumsum", {"x", "x"}, {"s"}, {}), kInvalid, {"must not have dim 's'"}));
  EXPECT_TRUE(StatusIs(BuildWith("sort", {"x"}, {"q"}, {}), kInvalid, {"'q'"}));
}

TEST(IndexInferTest, Registration) {
  for (const char* type : {"one_hot", "gather", "top_k", "argmax", "cumsum", "sort"}) {
    const OpInfo* info = FindOp(type);
    ASSERT_NE(info, nullptr) << type;
    EXPECT_EQ(info->family, OpFamily::kIndex) << type;
    EXPECT_NE(info->lower, nullptr) << type;
  }
  EXPECT_TRUE(FindOp("one_hot")->needs_slice_begin);
  EXPECT_TRUE(FindOp("range")->needs_slice_begin);
  EXPECT_FALSE(FindOp("gather")->needs_slice_begin);
  EXPECT_TRUE(FindOp("gather")->differentiable);
  EXPECT_FALSE(FindOp("argmax")->differentiable);
}

}  // namespace
}  // namespace meshrt
