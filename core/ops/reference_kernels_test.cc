#include "core/ops/reference_kernels.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/ops/kernel_runner.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace meshrt {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

Shape S(const char* text) { return *Shape::Parse(text); }

Tensor F(const char* shape, std::vector<float> values) {
  return Tensor::Float(S(shape), std::move(values));
}

v1::Op MakeOp(const std::string& type) {
  v1::Op op;
  op.set_name("t");
  op.set_type(type);
  return op;
}

absl::StatusOr<Tensor> RunRef(const v1::Op& op, std::vector<const Tensor*> inputs,
                              const char* out_shape, DType dtype = DType::kFloat32) {
  Tensor out(dtype, S(out_shape));
  absl::Status s = ReferenceKernels().Run(op, inputs, &out);
  if (!s.ok()) return s;
  return out;
}

std::vector<float> Floats(const absl::StatusOr<Tensor>& t) {
  EXPECT_TRUE(t.ok()) << t.status();
  if (!t.ok()) return {};
  return std::vector<float>(t->floats().begin(), t->floats().end());
}

TEST(StridedIteratorTest, WalksRowMajorWithPerOperandStrides) {
  std::vector<int64_t> a, b;
  for (StridedIterator it({2, 3}, {{3, 1}, {1, 2}}); !it.done(); it.Next()) {
    a.push_back(it.offset(0));
    b.push_back(it.offset(1));
  }
  EXPECT_THAT(a, ElementsAre(0, 1, 2, 3, 4, 5));
  EXPECT_THAT(b, ElementsAre(0, 2, 4, 1, 3, 5));
}

TEST(StridedIteratorTest, ScalarSpaceHasOnePointAndZeroSizeNone) {
  int points = 0;
  for (StridedIterator it({}, {{}}); !it.done(); it.Next()) ++points;
  EXPECT_EQ(points, 1);
  points = 0;
  for (StridedIterator it({2, 0}, {{0, 1}}); !it.done(); it.Next()) ++points;
  EXPECT_EQ(points, 0);
}

TEST(StridesByNameTest, MissingDimsGetZero) {
  EXPECT_THAT(StridesByName(S("a:2,b:3,c:4"), S("c:4,x:5,a:2")), ElementsAre(1, 0, 12));
}

TEST(TransposeTest, PermutesAndBroadcastsByName) {
  Tensor in = F("i:2,j:3", {1, 2, 3, 4, 5, 6});
  Tensor out(DType::kFloat32, S("j:3,k:2,i:2"));
  ASSERT_TRUE(Transpose(in, &out).ok());
  EXPECT_THAT(out.floats(), ElementsAre(1, 4, 1, 4, 2, 5, 2, 5, 3, 6, 3, 6));
  Tensor bad(DType::kFloat32, S("j:3"));
  EXPECT_EQ(Transpose(in, &bad).code(), absl::StatusCode::kInvalidArgument);
}

TEST(ReferenceEinsumTest, MatmulInEitherOutputOrder) {
  Tensor a = F("i:2,j:3", {1, 2, 3, 4, 5, 6});
  Tensor b = F("j:3,k:2", {1, 2, 3, 4, 5, 6});
  EXPECT_THAT(Floats(RunRef(MakeOp("einsum"), {&a, &b}, "i:2,k:2")), ElementsAre(22, 28, 49, 64));
  EXPECT_THAT(Floats(RunRef(MakeOp("einsum"), {&a, &b}, "k:2,i:2")), ElementsAre(22, 49, 28, 64));
}

TEST(ReferenceEinsumTest, Int32Matmul) {
  Tensor a = Tensor::Int(S("i:2,j:3"), {1, 2, 3, 4, 5, 6});
  Tensor b = Tensor::Int(S("j:3,k:2"), {1, 2, 3, 4, 5, 6});
  auto out = RunRef(MakeOp("einsum"), {&a, &b}, "i:2,k:2", DType::kInt32);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(out->ints(), ElementsAre(22, 28, 49, 64));
}

TEST(ReferenceEinsumTest, ThreeInputsToScalar) {
  Tensor a = F("i:2", {1, 2});
  Tensor b = F("i:2,j:2", {1, 2, 3, 4});
  Tensor c = F("j:2", {5, 6});
  // 1*(1*5 + 2*6) + 2*(3*5 + 4*6) = 17 + 78.
  EXPECT_THAT(Floats(RunRef(MakeOp("einsum"), {&a, &b, &c}, "")), ElementsAre(95));
}

TEST(ReferenceEinsumTest, OneInputTransposesAndReduces) {
  Tensor x = F("i:2,j:3", {1, 2, 3, 4, 5, 6});
  EXPECT_THAT(Floats(RunRef(MakeOp("einsum"), {&x}, "j:3")), ElementsAre(5, 7, 9));
  EXPECT_THAT(Floats(RunRef(MakeOp("einsum"), {&x}, "")), ElementsAre(21));
  EXPECT_THAT(Floats(RunRef(MakeOp("einsum"), {&x}, "j:3,i:2")), ElementsAre(1, 4, 2, 5, 3, 6));
}

TEST(ReferenceEinsumTest, OutputOnlyDimBroadcasts) {
  Tensor x = F("i:2", {1, 2});
  EXPECT_THAT(Floats(RunRef(MakeOp("einsum"), {&x}, "i:2,k:3")), ElementsAre(1, 1, 1, 2, 2, 2));
  EXPECT_THAT(Floats(RunRef(MakeOp("einsum"), {&x}, "k:3,i:2")), ElementsAre(1, 2, 1, 2, 1, 2));
}

TEST(ReferenceEinsumTest, DimSummedOutOfOneInput) {
  Tensor a = F("i:2,s:2", {1, 2, 3, 4});
  Tensor b = F("i:2", {10, 20});
  EXPECT_THAT(Floats(RunRef(MakeOp("einsum"), {&a, &b}, "i:2")), ElementsAre(30, 140));
}

TEST(ReferenceEinsumTest, SizeMismatchNamesTheDim) {
  Tensor a = F("i:2,j:3", {1, 2, 3, 4, 5, 6});
  Tensor b = F("j:2", {1, 2});
  auto out = RunRef(MakeOp("einsum"), {&a, &b}, "i:2");
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("'j'"));
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("op 't' (einsum)"));
  EXPECT_EQ(RunRef(MakeOp("einsum"), {&a}, "i:3").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RunRef(MakeOp("einsum"), {}, "i:3").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ReferenceBinaryTest, BroadcastsByName) {
  Tensor a = F("i:2,j:3", {1, 2, 3, 4, 5, 6});
  Tensor row = F("j:3", {10, 20, 30});
  EXPECT_THAT(Floats(RunRef(MakeOp("add"), {&a, &row}, "i:2,j:3")),
              ElementsAre(11, 22, 33, 14, 25, 36));
  EXPECT_THAT(Floats(RunRef(MakeOp("add"), {&row, &a}, "i:2,j:3")),
              ElementsAre(11, 22, 33, 14, 25, 36));
  Tensor bt = F("j:3,i:2", {1, 2, 3, 4, 5, 6});
  EXPECT_THAT(Floats(RunRef(MakeOp("add"), {&a, &bt}, "i:2,j:3")), ElementsAre(2, 5, 8, 6, 9, 12));
  Tensor x = F("i:2", {10, 20});
  Tensor y = F("j:2", {1, 2});
  EXPECT_THAT(Floats(RunRef(MakeOp("sub"), {&x, &y}, "i:2,j:2")), ElementsAre(9, 8, 19, 18));
  EXPECT_THAT(Floats(RunRef(MakeOp("sub"), {&x, &y}, "j:2,i:2")), ElementsAre(9, 19, 8, 18));
}

TEST(ReferenceBinaryTest, EachOperator) {
  Tensor a = F("i:3", {1, -2, 3});
  Tensor b = F("i:3", {2, 2, -4});
  EXPECT_THAT(Floats(RunRef(MakeOp("mul"), {&a, &b}, "i:3")), ElementsAre(2, -4, -12));
  EXPECT_THAT(Floats(RunRef(MakeOp("div"), {&a, &b}, "i:3")), ElementsAre(0.5, -1, -0.75));
  EXPECT_THAT(Floats(RunRef(MakeOp("minimum"), {&a, &b}, "i:3")), ElementsAre(1, -2, -4));
  EXPECT_THAT(Floats(RunRef(MakeOp("maximum"), {&a, &b}, "i:3")), ElementsAre(2, 2, 3));
  Tensor ia = Tensor::Int(S("i:3"), {1, -2, 3});
  Tensor ib = Tensor::Int(S("i:3"), {2, 2, -4});
  auto sum = RunRef(MakeOp("add"), {&ia, &ib}, "i:3", DType::kInt32);
  ASSERT_TRUE(sum.ok());
  EXPECT_THAT(sum->ints(), ElementsAre(3, 0, -1));
  // div is float32 only.
  EXPECT_FALSE(RunRef(MakeOp("div"), {&ia, &ib}, "i:3", DType::kInt32).ok());
}

TEST(ReferenceBinaryTest, RejectsBadShapesAndDtypes) {
  Tensor a = F("i:3", {1, 2, 3});
  Tensor b = F("j:3", {1, 2, 3});
  auto out = RunRef(MakeOp("add"), {&a, &b}, "i:3");
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("'j'"));
  EXPECT_EQ(RunRef(MakeOp("add"), {&a, &a}, "i:4").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RunRef(MakeOp("add"), {&a}, "i:3").status().code(), absl::StatusCode::kInvalidArgument);
  Tensor ia = Tensor::Int(S("i:3"), {1, 2, 3});
  EXPECT_EQ(RunRef(MakeOp("add"), {&a, &ia}, "i:3").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ReferenceUnaryTest, EachOperator) {
  Tensor x = F("i:3", {-1, 0, 2});
  EXPECT_THAT(Floats(RunRef(MakeOp("relu"), {&x}, "i:3")), ElementsAre(0, 0, 2));
  EXPECT_THAT(Floats(RunRef(MakeOp("neg"), {&x}, "i:3")), ElementsAre(1, 0, -2));
  auto e = Floats(RunRef(MakeOp("exp"), {&x}, "i:3"));
  ASSERT_EQ(e.size(), 3u);
  EXPECT_FLOAT_EQ(e[0], std::exp(-1.0f));
  EXPECT_FLOAT_EQ(e[1], 1.0f);
  EXPECT_FLOAT_EQ(e[2], std::exp(2.0f));
  v1::Op scale = MakeOp("scale");
  (*scale.mutable_attrs())["scalar"].set_f(2.5f);
  EXPECT_THAT(Floats(RunRef(scale, {&x}, "i:3")), ElementsAre(-2.5, 0, 5));
  EXPECT_EQ(RunRef(MakeOp("scale"), {&x}, "i:3").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ReferenceUnaryTest, OutputInAnotherOrder) {
  Tensor x = F("i:2,j:3", {1, 2, 3, 4, 5, 6});
  EXPECT_THAT(Floats(RunRef(MakeOp("neg"), {&x}, "j:3,i:2")), ElementsAre(-1, -4, -2, -5, -3, -6));
  EXPECT_EQ(RunRef(MakeOp("neg"), {&x}, "j:3,k:2").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ReferenceReduceTest, LeadingTrailingMiddleAndAll) {
  Tensor x = F("i:2,j:3", {1, 2, 3, 4, 5, 6});
  EXPECT_THAT(Floats(RunRef(MakeOp("reduce_sum"), {&x}, "i:2")), ElementsAre(6, 15));
  EXPECT_THAT(Floats(RunRef(MakeOp("reduce_sum"), {&x}, "j:3")), ElementsAre(5, 7, 9));
  EXPECT_THAT(Floats(RunRef(MakeOp("reduce_sum"), {&x}, "")), ElementsAre(21));
  EXPECT_THAT(Floats(RunRef(MakeOp("reduce_mean"), {&x}, "i:2")), ElementsAre(2, 5));
  Tensor cube = F("a:2,b:2,c:2", {1, 2, 3, 4, 5, 6, 7, 8});
  EXPECT_THAT(Floats(RunRef(MakeOp("reduce_sum"), {&cube}, "a:2,c:2")), ElementsAre(4, 6, 12, 14));
  EXPECT_THAT(Floats(RunRef(MakeOp("reduce_sum"), {&cube}, "c:2,a:2")), ElementsAre(4, 12, 6, 14));
}

TEST(ReferenceReduceTest, MaxHandlesNegativesAndInfinity) {
  Tensor x = F("i:2,j:3", {1, -5, 3, -4, 2, -6});
  EXPECT_THAT(Floats(RunRef(MakeOp("reduce_max"), {&x}, "j:3")), ElementsAre(1, 2, 3));
  const float inf = std::numeric_limits<float>::infinity();
  Tensor y = F("i:2", {-inf, -inf});
  EXPECT_THAT(Floats(RunRef(MakeOp("reduce_max"), {&y}, "")), ElementsAre(-inf));
  Tensor ix = Tensor::Int(S("i:2,j:2"), {1, -7, 3, -4});
  auto m = RunRef(MakeOp("reduce_max"), {&ix}, "j:2", DType::kInt32);
  ASSERT_TRUE(m.ok());
  EXPECT_THAT(m->ints(), ElementsAre(3, -4));
  EXPECT_EQ(RunRef(MakeOp("reduce_sum"), {&x}, "k:2").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ReferenceCopyTest, ReshapeRenameAndConstant) {
  Tensor x = F("i:2,j:3", {1, 2, 3, 4, 5, 6});
  EXPECT_THAT(Floats(RunRef(MakeOp("reshape"), {&x}, "k:6")), ElementsAre(1, 2, 3, 4, 5, 6));
  EXPECT_THAT(Floats(RunRef(MakeOp("rename_dim"), {&x}, "i:2,q:3")), ElementsAre(1, 2, 3, 4, 5, 6));
  EXPECT_EQ(RunRef(MakeOp("reshape"), {&x}, "k:5").status().code(),
            absl::StatusCode::kInvalidArgument);
  v1::Op c = MakeOp("constant");
  *c.mutable_value() = F("x:3", {7, 8, 9}).ToProto();
  EXPECT_THAT(Floats(RunRef(c, {}, "x:3")), ElementsAre(7, 8, 9));
  v1::Op fill = MakeOp("constant");
  fill.mutable_value()->set_dtype(v1::DT_FLOAT32);
  *fill.mutable_value()->mutable_shape() = S("x:2").ToProto();
  fill.mutable_value()->add_float_val(4.5f);
  EXPECT_THAT(Floats(RunRef(fill, {}, "x:2")), ElementsAre(4.5, 4.5));
  EXPECT_EQ(RunRef(c, {}, "x:4").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ReferenceKernelsTest, UnknownTypeIsUnimplementedAndNamesTheOp) {
  Tensor x = F("i:1", {1});
  v1::Op op = MakeOp("fft");
  op.set_name("spectrum");
  auto out = RunRef(op, {&x}, "i:1");
  EXPECT_EQ(out.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("spectrum"));
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("fft"));
}

}  // namespace
}  // namespace meshrt
