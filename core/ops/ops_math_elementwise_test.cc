// The elementwise math ops: shape inference and reference kernels against hand-computed values
// (math by hand or Python's math module, never by this code), and the errors bad graphs get.
#include <cmath>
#include <string>
#include <vector>

#include "core/ops/kernel_runner.h"
#include "core/ops/ops.h"
#include "core/testing/op_test_util.h"
#include "core/testing/test_util.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "util/status_macros.h"

namespace meshrt {
namespace {

using namespace op_test;  // NOLINT: terse helpers for table-driven cases

struct Case {
  std::string op;
  std::vector<Tensor> in;
  Tensor want;
};

const float kNan = std::nanf("");

std::vector<Case> Cases() {
  return {
      // Unary, float32.
      {"type: 'exp'",
       {F("n:4", {0, 1, -1, 2})},
       F("n:4", {1, 2.7182818f, 0.36787944f, 7.3890561f})},
      {"type: 'log'",
       {F("n:4", {1, 2.7182818f, 0.5f, 4})},
       F("n:4", {0, 1, -0.69314718f, 1.3862944f})},
      {"type: 'sqrt'", {F("n:4", {0, 4, 2.25f, 2})}, F("n:4", {0, 2, 1.5f, 1.4142136f})},
      {"type: 'rsqrt'", {F("n:4", {4, 0.25f, 1, 16})}, F("n:4", {0.5f, 2, 1, 0.25f})},
      {"type: 'square'", {F("n:4", {-3, 0.5f, 0, 2})}, F("n:4", {9, 0.25f, 0, 4})},
      {"type: 'tanh'", {F("n:4", {0, 0.5f, -1, 20})}, F("n:4", {0, 0.46211716f, -0.76159416f, 1})},
      {"type: 'sigmoid'",
       {F("n:4", {0, 2, -2, 40})},
       F("n:4", {0.5f, 0.88079708f, 0.11920292f, 1})},
      {"type: 'gelu'",
       {F("n:4", {0, 1, -1, 3})},
       F("n:4", {0, 0.84119199f, -0.15880801f, 2.9963626f})},
      {"type: 'gelu' attrs { key: 'approximate' value { b: false } }",
       {F("n:4", {0, 1, -1, 3})},
       F("n:4", {0, 0.84134475f, -0.15865525f, 2.9959503f})},
      {"type: 'relu'", {F("n:3", {-1, 0, 2.5f})}, F("n:3", {0, 0, 2.5f})},
      {"type: 'abs'", {F("n:3", {-1.5f, 0, 2})}, F("n:3", {1.5f, 0, 2})},
      {"type: 'sign'", {F("n:3", {-0.25f, 0, 7})}, F("n:3", {-1, 0, 1})},
      {"type: 'neg'", {F("n:2", {-1.5f, 2})}, F("n:2", {1.5f, -2})},
      {"type: 'reciprocal'", {F("n:3", {4, -0.5f, 1})}, F("n:3", {0.25f, -2, 1})},
      {"type: 'scale' attrs { key: 'scalar' value { f: 1.5 } }",
       {F("n:2", {2, -4})},
       F("n:2", {3, -6})},
      // Unary, int32.
      {"type: 'square'", {I("n:2", {-3, 4})}, I("n:2", {9, 16})},
      {"type: 'relu'", {I("n:2", {-3, 5})}, I("n:2", {0, 5})},
      {"type: 'abs'", {I("n:2", {-3, 5})}, I("n:2", {3, 5})},
      {"type: 'sign'", {I("n:3", {-3, 0, 5})}, I("n:3", {-1, 0, 1})},
      {"type: 'neg'", {I("n:2", {-3, 5})}, I("n:2", {3, -5})},
      // Cast: truncation toward zero, saturation, NaN -> 0; the dtype field works too.
      {"type: 'cast' attrs { key: 'dtype' value { s: 'int32' } }",
       {F("n:5", {1.7f, -1.7f, 3e9f, -3e9f, kNan})},
       I("n:5", {1, -1, 2147483647, -2147483647 - 1, 0})},
      {"type: 'cast' dtype: DT_FLOAT32", {I("n:2", {3, -2})}, F("n:2", {3, -2})},
      // Binary: broadcasting by name in both directions; output dims in order of appearance.
      {"type: 'add'",
       {F("i:2,j:3", {1, 2, 3, 4, 5, 6}), F("j:3", {10, 20, 30})},
       F("i:2,j:3", {11, 22, 33, 14, 25, 36})},
      {"type: 'sub'",
       {F("j:3", {10, 20, 30}), F("i:2", {1, 2})},
       F("j:3,i:2", {9, 8, 19, 18, 29, 28})},
      {"type: 'mul'",
       {F("i:2,j:2", {1, 2, 3, 4}), F("j:2,i:2", {1, 10, 100, 1000})},
       F("i:2,j:2", {1, 200, 30, 4000})},
      {"type: 'div'", {F("n:3", {1, 9, -4}), F("n:3", {4, 3, 8})}, F("n:3", {0.25f, 3, -0.5f})},
      {"type: 'minimum'", {F("n:3", {1, 9, -4}), F("n:3", {4, 3, -8})}, F("n:3", {1, 3, -8})},
      {"type: 'maximum'", {I("n:3", {1, 9, -4}), I("n:3", {4, 3, -8})}, I("n:3", {4, 9, -4})},
      {"type: 'pow'", {F("n:3", {2, 9, 4}), F("n:3", {3, 0.5f, -1})}, F("n:3", {8, 3, 0.25f})},
      {"type: 'add'", {I("n:2", {1, -2}), I("", {5})}, I("n:2", {6, 3})},
      // Predicates: float32 0/1 from float32 or int32 inputs.
      {"type: 'equal'", {F("n:3", {1, 2, 3}), F("n:3", {1, 0, 3})}, F("n:3", {1, 0, 1})},
      {"type: 'less'", {I("n:3", {1, 2, 3}), I("", {2})}, F("n:3", {1, 0, 0})},
      {"type: 'greater'", {F("n:3", {1, 2, 3}), F("", {2})}, F("n:3", {0, 0, 1})},
      {"type: 'logical_and'",
       {F("n:4", {0, 0, 2, -1}), F("n:4", {0, 3, 0, 0.5f})},
       F("n:4", {0, 0, 0, 1})},
      {"type: 'logical_or'",
       {I("n:4", {0, 0, 2, -1}), I("n:4", {0, 3, 0, 5})},
       F("n:4", {0, 1, 1, 1})},
      // The scalar operand.
      {"type: 'sub' attrs { key: 'scalar' value { f: 1 } }",
       {F("n:2", {3, -1})},
       F("n:2", {2, -2})},
      {"type: 'sub' attrs { key: 'scalar' value { f: 1 } } "
       "attrs { key: 'scalar_first' value { b: true } }",
       {F("n:2", {3, -1})},
       F("n:2", {-2, 2})},
      {"type: 'pow' attrs { key: 'scalar' value { f: 2 } }",
       {F("n:2", {3, -1.5f})},
       F("n:2", {9, 2.25f})},
      {"type: 'div' attrs { key: 'scalar' value { i: 2 } } "
       "attrs { key: 'scalar_first' value { b: true } }",
       {F("n:2", {4, -1})},
       F("n:2", {0.5f, -2})},
      {"type: 'add' attrs { key: 'scalar' value { i: 3 } }",
       {I("n:2", {1, -5})},
       I("n:2", {4, -2})},
      {"type: 'less' attrs { key: 'scalar' value { f: 0.5 } }",
       {F("n:3", {0.25f, 0.5f, 0.75f})},
       F("n:3", {1, 0, 0})},
      // where: broadcast by name; a float or int32 condition; y as a scalar.
      {"type: 'where'",
       {F("i:2", {1, 0}), F("i:2,j:2", {1, 2, 3, 4}), F("j:2", {-1, -2})},
       F("i:2,j:2", {1, 2, -1, -2})},
      {"type: 'where'",
       {I("j:2", {0, 7}), I("i:2", {1, 2}), I("", {0})},
       I("j:2,i:2", {0, 0, 1, 2})},
      {"type: 'where' attrs { key: 'scalar' value { f: -1e9 } }",
       {F("n:3", {0, 1, 0.5f}), F("n:3", {1, 2, 3})},
       F("n:3", {-1e9f, 2, 3})},
  };
}

TEST(MathElementwiseTest, ReferenceKernelsMatchHandValues) {
  const std::vector<Case> cases = Cases();
  for (const Case& c : cases) {
    SCOPED_TRACE(c.op);
    ASSERT_OK_AND_ASSIGN(Tensor got, InferAndRun(c.op, c.in));
    EXPECT_EQ(got.shape(), c.want.shape());
    ASSERT_EQ(got.dtype(), c.want.dtype());
    EXPECT_LE(MaxRelativeError(got, c.want), 2e-7);
  }
  EXPECT_GE(cases.size(), 40u);  // the table has not been emptied
}

// Kernels match dims by name, so an output in another dim order (as a slice may be) works.
TEST(MathElementwiseTest, KernelsMatchDimsByName) {
  Tensor out(DType::kFloat32, S("j:3,i:2"));
  const Tensor x = F("i:2,j:3", {1, 2, 3, 4, 5, 6});
  ASSERT_OK(ReferenceKernels().Run(ParseOp("type: 'square'", 1), {&x}, &out));
  EXPECT_EQ(out.floats(), F("j:3,i:2", {1, 16, 4, 25, 9, 36}).floats());
  const Tensor c = F("j:3", {1, 0, 1});
  const Tensor y = F("", {0});
  ASSERT_OK(ReferenceKernels().Run(ParseOp("type: 'where'", 3), {&c, &x, &y}, &out));
  EXPECT_EQ(out.floats(), F("j:3,i:2", {1, 4, 0, 0, 3, 6}).floats());
}

struct BadCase {
  std::string op;
  std::vector<Tensor> in;
  std::vector<std::string> message;
};

TEST(MathElementwiseTest, BadGraphsGetInvalidArgumentNamingTheProblem) {
  const std::vector<BadCase> cases = {
      {"type: 'exp'", {I("n:2", {1, 2})}, {"op 't' (exp)", "'a' is int32", "needs float32"}},
      {"type: 'add'", {F("n:2", {1, 2}), I("n:2", {1, 2})}, {"different dtypes"}},
      {"type: 'add'",
       {F("j:3", {1, 2, 3}), F("j:4", {1, 2, 3, 4})},
       {"dim 'j' is 3 in 'a' but 4 in 'b'"}},
      {"type: 'add'", {F("n:2", {1, 2})}, {"takes 2 input(s) but has 1"}},
      {"type: 'add' attrs { key: 'scalar' value { f: 1 } }",
       {F("n:2", {1, 2}), F("n:2", {1, 2})},
       {"has attrs.scalar, so takes 1 input(s)"}},
      {"type: 'add' attrs { key: 'scalar' value { f: 0.5 } }",
       {I("n:2", {1, 2})},
       {"not a whole number", "int32"}},
      {"type: 'add' attrs { key: 'scalar_first' value { b: true } }",
       {F("n:2", {1, 2}), F("n:2", {1, 2})},
       {"scalar_first but no attrs.scalar"}},
      {"type: 'div'", {I("n:2", {1, 2}), I("n:2", {1, 2})}, {"needs float32"}},
      {"type: 'cast'", {F("n:2", {1, 2})}, {"needs attrs {dtype"}},
      {"type: 'cast' attrs { key: 'dtype' value { s: 'float64' } }",
       {F("n:2", {1, 2})},
       {"'float64'", "\"int32\""}},
      {"type: 'cast' dtype: DT_INT32 attrs { key: 'dtype' value { s: 'float32' } }",
       {F("n:2", {1, 2})},
       {"disagrees"}},
      {"type: 'where'",
       {F("n:2", {1, 0}), F("n:2", {1, 2}), I("n:2", {1, 2})},
       {"different dtypes"}},
      {"type: 'where' attrs { key: 'scalar' value { f: 0 } } "
       "attrs { key: 'scalar_first' value { b: true } }",
       {F("n:2", {1, 0}), F("n:2", {1, 2})},
       {"scalar_first is for binary ops"}},
      {"type: 'scale'", {F("n:2", {1, 2})}, {"'scalar'"}},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.op);
    const v1::Op op = ParseOp(c.op, c.in.size());
    EXPECT_TRUE(StatusIs(InferOutputType(op, Types(c.in)).status(),
                         absl::StatusCode::kInvalidArgument, c.message));
  }
}

TEST(MathElementwiseTest, RegistryEntries) {
  for (const char* type :
       {"exp",   "log",   "sqrt", "rsqrt",   "square",      "tanh",       "sigmoid",
        "gelu",  "relu",  "abs",  "sign",    "neg",         "reciprocal", "cast",
        "scale", "add",   "sub",  "mul",     "div",         "minimum",    "maximum",
        "pow",   "equal", "less", "greater", "logical_and", "logical_or", "where"}) {
    const OpInfo* info = FindOp(type);
    ASSERT_NE(info, nullptr) << type;
    EXPECT_EQ(info->family, OpFamily::kElementwise) << type;
    EXPECT_EQ(info->collectives, "none") << type;
  }
  EXPECT_TRUE(FindOp("gelu")->differentiable);
  EXPECT_FALSE(FindOp("less")->differentiable);
  EXPECT_FALSE(FindOp("sign")->differentiable);
}

}  // namespace
}  // namespace meshrt
