// The fast layer_norm / rms_norm gradient (kernels::NormGrad) against the reference kernels of
// layer_norm_grad and rms_norm_grad on the same random inputs: every subset of normalised dims of
// [a:3, b:5, c:7] (innermost, outermost, middle, two, all), scales over every subset of the
// normalised dims and in other dim orders, size-1 dims among the kept dims, a long row (the
// 16-lane sums plus a tail), with and without scale, layer and rms. The fast function is called
// directly so a silent fallback cannot hide a wrong fast path; one test goes through CpuKernels().
#include "kernels/norm_grad.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/ops/kernel_runner.h"
#include "core/testing/test_util.h"
#include "gtest/gtest.h"
#include "kernels/cpu_kernels.h"

namespace meshrt {
namespace {

Tensor Random(const Shape& shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-3, 3);
  Tensor t(DType::kFloat32, shape);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.f32()[i] = dist(rng);
  return t;
}

Shape S(const std::string& text) { return Shape::Parse(text).value(); }

v1::Op GradOp(bool rms, const std::vector<std::string>& dims, float epsilon) {
  v1::Op op;
  op.set_name("case");
  op.set_type(rms ? "rms_norm_grad" : "layer_norm_grad");
  for (const std::string& d : dims) op.add_dims(d);
  (*op.mutable_attrs())["epsilon"].set_f(epsilon);
  return op;
}

// The reference kernel's dx for inputs x [, scale], dy.
Tensor Reference(bool rms, const std::vector<std::string>& dims, float epsilon, const Tensor& x,
                 const Tensor* scale, const Tensor& dy) {
  std::vector<const Tensor*> in = {&x};
  if (scale != nullptr) in.push_back(scale);
  in.push_back(&dy);
  Tensor t(DType::kFloat32, x.shape());
  const absl::Status s = ReferenceKernels().Run(GradOp(rms, dims, epsilon), in, &t);
  EXPECT_TRUE(s.ok()) << s;
  return t;
}

// The fast kernel against the reference on x of `shape` over `dims`, for each scale shape ("" =
// no scale) and both norms. Returns the number of comparisons.
int CompareAll(const Shape& shape, const std::vector<std::string>& dims,
               const std::vector<std::string>& scale_shapes, double tolerance) {
  const Tensor x = Random(shape, 1);
  const Tensor dy = Random(shape, 2);
  int compared = 0;
  for (bool rms : {false, true}) {
    for (const std::string& ss : scale_shapes) {
      for (float epsilon : {1e-5f, 0.5f}) {
        SCOPED_TRACE(absl::StrCat(rms ? "rms" : "layer", " of ", shape.ToString(), " over ",
                                  absl::StrJoin(dims, ","), " scale [", ss, "] eps ", epsilon));
        const bool has_scale = ss != "none";
        const Tensor scale = Random(has_scale ? S(ss) : Shape(), 3);
        const Tensor* s = has_scale ? &scale : nullptr;
        Tensor fast(DType::kFloat32, shape);
        const absl::Status status = kernels::NormGrad(x, s, dy, dims, epsilon, rms, &fast);
        EXPECT_TRUE(status.ok()) << status;
        EXPECT_LE(MaxRelativeError(fast, Reference(rms, dims, epsilon, x, s, dy)), tolerance);
        ++compared;
      }
    }
  }
  return compared;
}

TEST(NormGradKernelTest, EverySubsetOfNormalisedDimsMatchesReference) {
  const std::vector<Dim> all = {{"a", 3}, {"b", 5}, {"c", 7}};
  int compared = 0;
  for (int mask = 1; mask < 8; ++mask) {
    std::vector<std::string> dims;
    std::vector<std::string> scales = {"none"};
    for (int i = 0; i < 3; ++i) {
      if (mask & (1 << i)) {
        dims.push_back(all[i].name);
        scales.push_back(absl::StrCat(all[i].name, ":", all[i].size));  // one normalised dim
      }
    }
    if (dims.size() > 1) {
      // Every normalised dim in x's order and reversed.
      std::vector<std::string> full;
      for (const Dim& d : all) {
        if (std::find(dims.begin(), dims.end(), d.name) != dims.end()) {
          full.push_back(absl::StrCat(d.name, ":", d.size));
        }
      }
      scales.push_back(absl::StrJoin(full, ","));
      std::reverse(full.begin(), full.end());
      scales.push_back(absl::StrJoin(full, ","));
    }
    compared += CompareAll(S("a:3,b:5,c:7"), dims, scales, 1e-5);
    // The same dims listed in another order name the same op.
    std::reverse(dims.begin(), dims.end());
    compared += CompareAll(S("a:3,b:5,c:7"), dims, {"none"}, 1e-5);
  }
  // 7 subsets x (none + one per dim [+ two orders]) + 7 reversed listings, x 2 norms x 2 eps.
  EXPECT_EQ(compared, 4 * (3 * 2 + 3 * 5 + 1 * 6 + 7));
}

TEST(NormGradKernelTest, LongRowsAndUnitDimsMatchReference) {
  // 1031 = 64 * 16 + 7: the 16-lane sums and a tail.
  EXPECT_EQ(CompareAll(S("r:3,n:1031"), {"n"}, {"none", "n:1031"}, 2e-5), 8);
  // The normalised dim outermost over long kept rows: the transposing path.
  EXPECT_EQ(CompareAll(S("n:33,r:40"), {"n"}, {"none", "n:33"}, 1e-5), 8);
  // Size-1 dims around the normalised dims do not break contiguity (or the result).
  EXPECT_EQ(CompareAll(S("a:4,d:9,u:1"), {"d"}, {"none", "d:9"}, 1e-5), 8);
  EXPECT_EQ(CompareAll(S("u:1,d:9,a:4"), {"u", "d"}, {"none", "d:9", "u:1"}, 1e-5), 12);
  // A single row: every dim normalised.
  EXPECT_EQ(CompareAll(S("p:6,q:4"), {"q", "p"}, {"none", "q:4,p:6"}, 1e-5), 8);
}

// Independent of the reference: without a scale, layer_norm's dx sums to 0 over each row (the
// output is invariant to adding a constant to x), and rms_norm's dx is orthogonal to x when eps is
// 0 (the output is invariant to scaling x).
TEST(NormGradKernelTest, GradientsAreOrthogonalToTheInvariantDirections) {
  const Shape shape = S("r:4,n:50");
  const Tensor x = Random(shape, 5);
  const Tensor dy = Random(shape, 6);
  Tensor layer(DType::kFloat32, shape), rms(DType::kFloat32, shape);
  ASSERT_OK(kernels::NormGrad(x, nullptr, dy, {"n"}, 1e-5f, false, &layer));
  ASSERT_OK(kernels::NormGrad(x, nullptr, dy, {"n"}, 0.0f, true, &rms));
  for (int64_t r = 0; r < 4; ++r) {
    double sum = 0, dot = 0, magnitude = 0;
    for (int64_t j = 0; j < 50; ++j) {
      sum += layer.f32()[r * 50 + j];
      dot += rms.f32()[r * 50 + j] * x.f32()[r * 50 + j];
      magnitude += std::fabs(rms.f32()[r * 50 + j] * x.f32()[r * 50 + j]);
    }
    EXPECT_NEAR(sum, 0.0, 1e-4) << "row " << r;
    EXPECT_NEAR(dot, 0.0, 1e-5 * magnitude) << "row " << r;
    EXPECT_GT(magnitude, 1.0) << "row " << r;
  }
}

TEST(NormGradKernelTest, CpuKernelsDispatchesBothOps) {
  const Shape shape = S("b:2,s:3,d:16");
  const Tensor x = Random(shape, 7);
  const Tensor dy = Random(shape, 8);
  const Tensor scale = Random(S("d:16"), 9);
  for (bool rms : {false, true}) {
    SCOPED_TRACE(rms ? "rms_norm_grad" : "layer_norm_grad");
    Tensor got(DType::kFloat32, shape);
    ASSERT_OK(CpuKernels().Run(GradOp(rms, {"d"}, 1e-5f), {&x, &scale, &dy}, &got));
    EXPECT_LE(MaxRelativeError(got, Reference(rms, {"d"}, 1e-5f, x, &scale, dy)), 1e-5);
    // The default epsilon is the forward's (1e-6).
    v1::Op no_eps = GradOp(rms, {"d"}, 0);
    no_eps.mutable_attrs()->erase("epsilon");
    ASSERT_OK(CpuKernels().Run(no_eps, {&x, &dy}, &got));
    EXPECT_LE(MaxRelativeError(got, Reference(rms, {"d"}, 1e-6f, x, nullptr, dy)), 1e-5);
  }
  // An error through the runner names the op.
  const Tensor wrong = Random(S("b:2,d:16,s:3"), 10);
  Tensor out(DType::kFloat32, shape);
  EXPECT_TRUE(StatusIs(CpuKernels().Run(GradOp(false, {"d"}, 1e-5f), {&x, &wrong}, &out),
                       absl::StatusCode::kInvalidArgument,
                       {"op 'case' (layer_norm_grad)", "dy [b:2, d:16, s:3]"}));
}

TEST(NormGradKernelTest, BadInputsAreRefusedWithTheirName) {
  const Shape shape = S("b:2,d:4");
  const Tensor x = Random(shape, 11);
  const Tensor dy = Random(shape, 12);
  Tensor out(DType::kFloat32, shape);
  const Tensor other = Random(S("b:2,d:5"), 13);
  EXPECT_TRUE(StatusIs(kernels::NormGrad(x, nullptr, other, {"d"}, 1e-5f, false, &out),
                       absl::StatusCode::kInvalidArgument,
                       {"dy [b:2, d:5]", "must have the shape of x [b:2, d:4]"}));
  Tensor small(DType::kFloat32, S("b:2"));
  EXPECT_TRUE(StatusIs(kernels::NormGrad(x, nullptr, dy, {"d"}, 1e-5f, false, &small),
                       absl::StatusCode::kInvalidArgument, {"the output [b:2]"}));
  EXPECT_TRUE(StatusIs(kernels::NormGrad(x, nullptr, dy, {}, 1e-5f, true, &out),
                       absl::StatusCode::kInvalidArgument, {"no dims"}));
  EXPECT_TRUE(StatusIs(kernels::NormGrad(x, nullptr, dy, {"e"}, 1e-5f, true, &out),
                       absl::StatusCode::kInvalidArgument, {"'e'", "x is [b:2, d:4]"}));
  EXPECT_TRUE(StatusIs(kernels::NormGrad(x, nullptr, dy, {"d", "d"}, 1e-5f, true, &out),
                       absl::StatusCode::kInvalidArgument, {"twice"}));
  // A scale over a kept dim (b) or of another size is refused.
  const Tensor scale_b = Random(S("b:2"), 14);
  EXPECT_TRUE(StatusIs(kernels::NormGrad(x, &scale_b, dy, {"d"}, 1e-5f, false, &out),
                       absl::StatusCode::kInvalidArgument, {"scale", "'b'"}));
  const Tensor scale_5 = Random(S("d:5"), 15);
  EXPECT_TRUE(StatusIs(kernels::NormGrad(x, &scale_5, dy, {"d"}, 1e-5f, false, &out),
                       absl::StatusCode::kInvalidArgument, {"scale", "'d'"}));
  const Tensor ints = Tensor::Int(shape, {1, 2, 3, 4, 5, 6, 7, 8});
  EXPECT_TRUE(StatusIs(kernels::NormGrad(ints, nullptr, dy, {"d"}, 1e-5f, false, &out),
                       absl::StatusCode::kUnimplemented, {"x is int32"}));
}

}  // namespace
}  // namespace meshrt
