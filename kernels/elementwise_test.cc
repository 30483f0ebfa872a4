// The fast elementwise kernels (kernels::Binary, Where, Unary) against the reference kernels on
// the same random inputs: odd sizes, broadcasts in every direction (row, column, both operands,
// 0-d scalars), transposed operands and outputs, float32 and int32. The fast functions are called
// directly, so a silent fallback cannot hide a wrong fast path; a second test runs the same ops
// through CpuKernels() to check its dispatch (scalar operands, scalar_first, gelu's attribute).
#include "kernels/elementwise.h"

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/ops/kernel_runner.h"
#include "core/testing/test_util.h"
#include "gtest/gtest.h"
#include "kernels/cpu_kernels.h"

namespace meshrt {
namespace {

enum class Domain { kAny, kPositive, kAwayFromZero, kFlags };

Tensor Random(const std::string& shape, DType dtype, Domain domain, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-2, 2);
  Tensor t(dtype, Shape::Parse(shape).value());
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    float v = dist(rng);
    if (domain == Domain::kPositive) v = 0.25f + std::fabs(v);
    if (domain == Domain::kAwayFromZero) v = v < 0 ? v - 0.5f : v + 0.5f;
    if (domain == Domain::kFlags) v = v > 0.5f ? 1.0f : 0.0f;
    if (dtype == DType::kInt32) {
      t.i32()[i] = static_cast<int32_t>(std::lround(v * 3));  // small, with repeats and zeros
    } else {
      t.f32()[i] = v;
    }
  }
  return t;
}

v1::Op MakeOp(const std::string& type) {
  v1::Op op;
  op.set_name("case");
  op.set_type(type);
  return op;
}

Tensor Reference(const v1::Op& op, std::vector<const Tensor*> in, DType dtype, const Shape& out) {
  Tensor t(dtype, out);
  const absl::Status s = ReferenceKernels().Run(op, in, &t);
  EXPECT_TRUE(s.ok()) << s;
  return t;
}

// Operand shapes against one output shape: broadcasts in every direction and transposes.
struct Shapes {
  std::string a, b, out;
};
const std::vector<Shapes>& BinaryShapes() {
  static const auto* shapes = new std::vector<Shapes>{
      {"a:3,b:5,c:7", "a:3,b:5,c:7", "a:3,b:5,c:7"},  // same shape: one flat loop
      {"a:3,b:5,c:7", "c:7", "a:3,b:5,c:7"},          // row broadcast
      {"c:7", "a:3,b:5,c:7", "a:3,b:5,c:7"},          // row broadcast, first operand
      {"a:3,b:5,c:7", "a:3", "a:3,b:5,c:7"},          // column broadcast
      {"b:5", "a:3,c:7", "a:3,b:5,c:7"},              // both operands broadcast
      {"c:7,a:3,b:5", "a:3,b:5,c:7", "a:3,b:5,c:7"},  // transposed operand
      {"a:3,b:5,c:7", "b:5", "c:7,a:3,b:5"},          // transposed output
      {"", "a:3,b:5,c:7", "a:3,b:5,c:7"},             // 0-d scalar first
      {"a:3,n:37", "", "a:3,n:37"},                   // 0-d scalar second, long odd rows
      {"a:1,b:5", "b:5,c:1", "a:1,b:5,c:1"},          // size-1 dims
      {"", "", ""},                                   // scalars only
  };
  return *shapes;
}

struct BinaryCase {
  const char* type;
  kernels::BinaryOp op;
  Domain domain_a, domain_b;
  double tolerance;
};

const std::vector<BinaryCase>& BinaryCases() {
  using kernels::BinaryOp;
  static const auto* cases = new std::vector<BinaryCase>{
      {"add", BinaryOp::kAdd, Domain::kAny, Domain::kAny, 1e-6},
      {"sub", BinaryOp::kSub, Domain::kAny, Domain::kAny, 1e-6},
      {"mul", BinaryOp::kMul, Domain::kAny, Domain::kAny, 1e-6},
      {"div", BinaryOp::kDiv, Domain::kAny, Domain::kAwayFromZero, 1e-6},
      {"minimum", BinaryOp::kMinimum, Domain::kAny, Domain::kAny, 0},
      {"maximum", BinaryOp::kMaximum, Domain::kAny, Domain::kAny, 0},
      {"pow", BinaryOp::kPow, Domain::kPositive, Domain::kAny, 2e-6},
      {"equal", BinaryOp::kEqual, Domain::kFlags, Domain::kFlags, 0},
      {"less", BinaryOp::kLess, Domain::kAny, Domain::kAny, 0},
      {"greater", BinaryOp::kGreater, Domain::kAny, Domain::kAny, 0},
      {"logical_and", BinaryOp::kLogicalAnd, Domain::kFlags, Domain::kFlags, 0},
      {"logical_or", BinaryOp::kLogicalOr, Domain::kFlags, Domain::kFlags, 0},
  };
  return *cases;
}

bool IsPredicate(const std::string& t) {
  return t == "equal" || t == "less" || t == "greater" || t == "logical_and" || t == "logical_or";
}

TEST(ElementwiseKernelTest, BinaryMatchesReference) {
  int compared = 0;
  for (const BinaryCase& c : BinaryCases()) {
    for (DType dtype : {DType::kFloat32, DType::kInt32}) {
      if (dtype == DType::kInt32 &&
          (c.op == kernels::BinaryOp::kDiv || c.op == kernels::BinaryOp::kPow)) {
        continue;
      }
      for (const Shapes& s : BinaryShapes()) {
        SCOPED_TRACE(absl::StrCat(c.type, " ", DTypeName(dtype), " [", s.a, "] x [", s.b, "] -> [",
                                  s.out, "]"));
        const Tensor a = Random(s.a, dtype, c.domain_a, 1);
        const Tensor b = Random(s.b, dtype, c.domain_b, 2);
        const DType out_dtype = IsPredicate(c.type) ? DType::kFloat32 : dtype;
        const Shape out_shape = Shape::Parse(s.out).value();
        Tensor fast(out_dtype, out_shape);
        ASSERT_OK(kernels::Binary(c.op, a, b, &fast));
        const Tensor want = Reference(MakeOp(c.type), {&a, &b}, out_dtype, out_shape);
        EXPECT_LE(MaxRelativeError(fast, want), c.tolerance);
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, 12 * 11 * 2 - 2 * 11);
}

TEST(ElementwiseKernelTest, WhereMatchesReference) {
  const std::vector<std::vector<std::string>> shapes = {
      {"a:3,b:5,c:7", "a:3,b:5,c:7", "a:3,b:5,c:7", "a:3,b:5,c:7"},
      {"a:3", "b:5,c:7", "", "a:3,b:5,c:7"},
      {"c:7,a:3", "a:3,b:5,c:7", "b:5", "b:5,a:3,c:7"},
      {"", "n:37", "n:37", "n:37"},
  };
  for (const auto& s : shapes) {
    for (DType cond_dtype : {DType::kFloat32, DType::kInt32}) {
      for (DType dtype : {DType::kFloat32, DType::kInt32}) {
        SCOPED_TRACE(absl::StrCat(s[0], " ", s[1], " ", s[2], " -> ", s[3], " cond ",
                                  DTypeName(cond_dtype), " values ", DTypeName(dtype)));
        const Tensor c = Random(s[0], cond_dtype, Domain::kFlags, 3);
        const Tensor x = Random(s[1], dtype, Domain::kAny, 4);
        const Tensor y = Random(s[2], dtype, Domain::kAny, 5);
        const Shape out_shape = Shape::Parse(s[3]).value();
        Tensor fast(dtype, out_shape);
        ASSERT_OK(kernels::Where(c, x, y, &fast));
        EXPECT_EQ(
            MaxRelativeError(fast, Reference(MakeOp("where"), {&c, &x, &y}, dtype, out_shape)), 0);
      }
    }
  }
}

TEST(ElementwiseKernelTest, UnaryMatchesReference) {
  using kernels::UnaryOp;
  struct UnaryCase {
    const char* type;
    UnaryOp op;
    Domain domain;
  };
  const std::vector<UnaryCase> cases = {
      {"relu", UnaryOp::kRelu, Domain::kAny},
      {"exp", UnaryOp::kExp, Domain::kAny},
      {"neg", UnaryOp::kNeg, Domain::kAny},
      {"scale", UnaryOp::kScale, Domain::kAny},
      {"log", UnaryOp::kLog, Domain::kPositive},
      {"sqrt", UnaryOp::kSqrt, Domain::kPositive},
      {"rsqrt", UnaryOp::kRsqrt, Domain::kPositive},
      {"square", UnaryOp::kSquare, Domain::kAny},
      {"tanh", UnaryOp::kTanh, Domain::kAny},
      {"sigmoid", UnaryOp::kSigmoid, Domain::kAny},
      {"gelu", UnaryOp::kGelu, Domain::kAny},
      {"abs", UnaryOp::kAbs, Domain::kAny},
      {"sign", UnaryOp::kSign, Domain::kAny},
      {"reciprocal", UnaryOp::kReciprocal, Domain::kAwayFromZero},
  };
  for (const UnaryCase& c : cases) {
    for (const char* out : {"a:3,b:5,c:7", "c:7,a:3,b:5"}) {
      SCOPED_TRACE(absl::StrCat(c.type, " -> [", out, "]"));
      const Tensor x = Random("a:3,b:5,c:7", DType::kFloat32, c.domain, 6);
      const Shape out_shape = Shape::Parse(out).value();
      Tensor fast(DType::kFloat32, out_shape);
      ASSERT_OK(kernels::Unary(c.op, -1.75f, x, &fast));
      v1::Op op = MakeOp(c.type);
      (*op.mutable_attrs())["scalar"].set_f(-1.75f);
      EXPECT_LE(MaxRelativeError(fast, Reference(op, {&x}, DType::kFloat32, out_shape)), 2e-6);
    }
  }
  const Tensor x = Random("n:37", DType::kFloat32, Domain::kAny, 7);
  Tensor fast(DType::kFloat32, x.shape());
  ASSERT_OK(kernels::Unary(UnaryOp::kGeluErf, 0, x, &fast));
  v1::Op op = MakeOp("gelu");
  (*op.mutable_attrs())["approximate"].set_b(false);
  EXPECT_LE(MaxRelativeError(fast, Reference(op, {&x}, DType::kFloat32, x.shape())), 2e-6);
}

TEST(ElementwiseKernelTest, ErrorsNameTheProblem) {
  const Tensor a = Random("a:3", DType::kFloat32, Domain::kAny, 1);
  const Tensor i = Random("a:3", DType::kInt32, Domain::kAny, 1);
  Tensor out(DType::kFloat32, Shape::Parse("b:3").value());
  EXPECT_TRUE(StatusIs(kernels::Binary(kernels::BinaryOp::kAdd, a, a, &out),
                       absl::StatusCode::kInvalidArgument, {"dim 'a'"}));
  Tensor iout(DType::kInt32, Shape::Parse("a:3").value());
  EXPECT_TRUE(StatusIs(kernels::Binary(kernels::BinaryOp::kPow, i, i, &iout),
                       absl::StatusCode::kUnimplemented));
  EXPECT_TRUE(StatusIs(kernels::Binary(kernels::BinaryOp::kEqual, i, i, &iout),
                       absl::StatusCode::kInvalidArgument, {"int32"}));
  EXPECT_TRUE(StatusIs(kernels::Where(a, a, i, &iout), absl::StatusCode::kInvalidArgument));
}

// The same ops through CpuKernels(): its dispatch reads the scalar operand, scalar_first and
// gelu's `approximate`, and must agree with the reference runner.
TEST(ElementwiseKernelTest, CpuKernelsDispatch) {
  struct Case {
    std::string type;
    std::vector<std::pair<std::string, v1::AttrValue>> attrs;
    int inputs;
  };
  v1::AttrValue scalar, yes, no;
  scalar.set_f(0.75f);
  yes.set_b(true);
  no.set_b(false);
  const std::vector<Case> cases = {
      {"sub", {{"scalar", scalar}}, 1},
      {"sub", {{"scalar", scalar}, {"scalar_first", yes}}, 1},
      {"div", {{"scalar", scalar}, {"scalar_first", yes}}, 1},
      {"pow", {{"scalar", scalar}}, 1},
      {"less", {{"scalar", scalar}}, 1},
      {"where", {{"scalar", scalar}}, 2},
      {"where", {}, 3},
      {"gelu", {{"approximate", no}}, 1},
      {"gelu", {}, 1},
      {"maximum", {}, 2},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.type);
    v1::Op op = MakeOp(c.type);
    for (const auto& [k, v] : c.attrs) (*op.mutable_attrs())[k] = v;
    std::vector<Tensor> in;
    for (int k = 0; k < c.inputs; ++k) {
      in.push_back(Random("a:3,b:5", DType::kFloat32,
                          k == 0 && c.type == "where" ? Domain::kFlags : Domain::kPositive, 8 + k));
    }
    std::vector<const Tensor*> ptrs;
    for (const Tensor& t : in) ptrs.push_back(&t);
    const Shape shape = in[0].shape();
    Tensor fast(DType::kFloat32, shape);
    ASSERT_OK(CpuKernels().Run(op, ptrs, &fast));
    EXPECT_LE(MaxRelativeError(fast, Reference(op, ptrs, DType::kFloat32, shape)), 2e-6);
  }
}

}  // namespace
}  // namespace meshrt
