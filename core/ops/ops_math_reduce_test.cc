// Reductions, softmax, norms (and their fused gradients) and cross-entropy: shape inference and
// reference kernels against hand-computed values (by hand or with Python's math module), and the
// errors bad graphs get.
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

// x[a:2, b:3] = [[1, -2, 3], [4, 5, -6]].
Tensor X() { return F("a:2,b:3", {1, -2, 3, 4, 5, -6}); }

std::vector<Case> Cases() {
  return {
      {"type: 'reduce_sum' dims: 'b'", {X()}, F("a:2", {2, 3})},
      {"type: 'reduce_sum' dims: 'a'", {X()}, F("b:3", {5, 3, -3})},
      {"type: 'reduce_sum'", {X()}, F("", {5})},
      {"type: 'reduce_mean' dims: 'b'", {X()}, F("a:2", {2.0f / 3, 1})},
      {"type: 'reduce_mean' dims: 'a' dims: 'b'", {X()}, F("", {5.0f / 6})},
      {"type: 'reduce_max' dims: 'b'", {X()}, F("a:2", {3, 5})},
      {"type: 'reduce_min' dims: 'a'", {X()}, F("b:3", {1, -2, -6})},
      {"type: 'reduce_min'", {X()}, F("", {-6})},
      {"type: 'reduce_any' dims: 'b'", {F("a:2,b:3", {0, 0, 0, 0, 2, 0})}, F("a:2", {0, 1})},
      {"type: 'reduce_all' dims: 'a'", {F("a:2,b:3", {1, 0, 3, 4, 5, -6})}, F("b:3", {1, 0, 1})},
      {"type: 'reduce_any'", {I("a:2", {0, 0})}, F("", {0})},
      {"type: 'reduce_all' dims: 'b'", {I("a:2,b:2", {1, 2, 0, 3})}, F("a:2", {1, 0})},
      // Stable: the naive form overflows exp(1000).
      {"type: 'reduce_logsumexp' dims: 'b'",
       {F("a:2,b:3", {0, 0, 0, 1000, 1000, 1000})},
       F("a:2", {1.0986123f, 1001.0986f})},
      {"type: 'reduce_logsumexp' dims: 'a'",
       {F("a:2,b:1", {0, 0.69314718f})},
       F("b:1", {1.0986123f})},
      {"type: 'reduce_sum' dims: 'b'", {I("a:2,b:3", {1, -2, 3, 4, 5, -6})}, I("a:2", {2, 3})},
      {"type: 'reduce_max' dims: 'a'", {I("a:2,b:3", {1, -2, 3, 4, 5, -6})}, I("b:3", {4, 5, 3})},
      {"type: 'reduce_min' dims: 'b'", {I("a:2,b:3", {1, -2, 3, 4, 5, -6})}, I("a:2", {-2, -6})},
      // softmax / log_softmax: e^x = 1, 2, 5 -> 1/8, 2/8, 5/8; a constant row is uniform.
      {"type: 'softmax' dims: 'b'",
       {F("a:2,b:3", {0, 0.69314718f, 1.6094379f, 1000, 1000, 1000})},
       F("a:2,b:3", {0.125f, 0.25f, 0.625f, 1.0f / 3, 1.0f / 3, 1.0f / 3})},
      {"type: 'log_softmax' dims: 'b'",
       {F("a:1,b:3", {0, 0.69314718f, 1.6094379f})},
       F("a:1,b:3", {-2.0794415f, -1.3862944f, -0.47000363f})},
      {"type: 'softmax' dims: 'a'",
       {F("a:2,b:2", {0, 5, 0, 5})},
       F("a:2,b:2", {0.5, 0.5, 0.5, 0.5})},
      {"type: 'softmax' dims: 'a' dims: 'b'",
       {F("a:2,b:2", {0, 0, 0, 1.0986123f})},
       F("a:2,b:2", {1.0f / 6, 1.0f / 6, 1.0f / 6, 0.5f})},
      // layer_norm: mean 2.5, variance 1.25 -> (x - 2.5) / sqrt(1.25).
      {"type: 'layer_norm' dims: 'd' attrs { key: 'epsilon' value { f: 0 } }",
       {F("a:1,d:4", {1, 2, 3, 4})},
       F("a:1,d:4", {-1.3416408f, -0.4472136f, 0.4472136f, 1.3416408f})},
      {"type: 'layer_norm' dims: 'd' attrs { key: 'epsilon' value { f: 0 } }",
       {F("a:1,d:4", {1, 2, 3, 4}), F("d:4", {1, 2, 1, 2}), F("d:4", {0, 0, 1, 1})},
       F("a:1,d:4", {-1.3416408f, -0.8944272f, 1.4472136f, 3.6832816f})},
      {"type: 'layer_norm' dims: 'd' attrs { key: 'epsilon' value { f: 1 } }",
       {F("d:2", {1, 3})},
       F("d:2", {-0.70710678f, 0.70710678f})},
      {"type: 'layer_norm' dims: 'a' dims: 'd' attrs { key: 'epsilon' value { f: 0 } }",
       {F("a:2,d:2", {1, 2, 3, 4})},
       F("a:2,d:2", {-1.3416408f, -0.4472136f, 0.4472136f, 1.3416408f})},
      // rms_norm: mean square 12.5.
      {"type: 'rms_norm' dims: 'd' attrs { key: 'epsilon' value { f: 0 } }",
       {F("d:2", {3, 4})},
       F("d:2", {0.84852814f, 1.1313708f})},
      {"type: 'rms_norm' dims: 'd' attrs { key: 'epsilon' value { f: 0 } }",
       {F("a:2,d:2", {3, 4, -1, 1}), F("d:2", {2, -1})},
       F("a:2,d:2", {1.6970563f, -1.1313708f, -2, -1})},
      // The norms' dx (inputs x [scale] dy), checked against central differences of the forward.
      {"type: 'layer_norm_grad' dims: 'd' attrs { key: 'epsilon' value { f: 0 } }",
       {F("a:1,d:4", {1, 2, 3, 4}), F("a:1,d:4", {1, 0, 0, 0})},
       F("a:1,d:4", {0.26832816f, -0.35777088f, -0.089442719f, 0.17888544f})},
      {"type: 'layer_norm_grad' dims: 'd' attrs { key: 'epsilon' value { f: 0 } }",
       {F("a:1,d:4", {1, 2, 3, 4}), F("d:4", {1, 2, 1, 2}), F("a:1,d:4", {1, 1, 1, 1})},
       F("a:1,d:4", {-0.17888544f, 0.53665631f, -0.53665631f, 0.17888544f})},
      {"type: 'layer_norm_grad' dims: 'd' attrs { key: 'epsilon' value { f: 1 } }",
       {F("d:2", {1, 3}), F("d:2", {2, -1})},
       F("d:2", {0.53033009f, -0.53033009f})},
      {"type: 'rms_norm_grad' dims: 'd' attrs { key: 'epsilon' value { f: 0 } }",
       {F("d:2", {3, 4}), F("d:2", {1, 0})},
       F("d:2", {0.18101934f, -0.1357645f})},
      {"type: 'rms_norm_grad' dims: 'd' attrs { key: 'epsilon' value { f: 0 } }",
       {F("d:2", {3, 4}), F("d:2", {2, -1}), F("d:2", {1, 1})},
       F("d:2", {0.49780317f, -0.37335238f})},
      // Cross-entropy: -log(5/8); a uniform half/half target over three equal logits: log 3.
      {"type: 'softmax_cross_entropy' dims: 'v'",
       {F("b:2,v:3", {0, 0.69314718f, 1.6094379f, 0, 0, 0}),
        F("b:2,v:3", {0, 0, 1, 0.5f, 0.5f, 0})},
       F("b:2", {0.47000363f, 1.0986123f})},
      // Targets in another dim order.
      {"type: 'softmax_cross_entropy' dims: 'v'",
       {F("b:2,v:3", {0, 0.69314718f, 1.6094379f, 0, 0, 0}),
        F("v:3,b:2", {0, 0.5f, 0, 0.5f, 1, 0})},
       F("b:2", {0.47000363f, 1.0986123f})},
  };
}

TEST(MathReduceTest, ReferenceKernelsMatchHandValues) {
  const std::vector<Case> cases = Cases();
  for (const Case& c : cases) {
    SCOPED_TRACE(c.op);
    ASSERT_OK_AND_ASSIGN(Tensor got, InferAndRun(c.op, c.in));
    EXPECT_EQ(got.shape(), c.want.shape());
    ASSERT_EQ(got.dtype(), c.want.dtype());
    EXPECT_LE(MaxRelativeError(got, c.want), 3e-7);
  }
  EXPECT_GE(cases.size(), 25u);  // the table has not been emptied
}

// Kernels reduce every input dim the output lacks and match dims by name, so an output in another
// dim order works; normalisations keep any output dim order too.
TEST(MathReduceTest, KernelsMatchDimsByName) {
  const Tensor x = F("a:2,b:2,c:2", {1, 2, 3, 4, 5, 6, 7, 8});
  Tensor out(DType::kFloat32, S("c:2,a:2"));
  ASSERT_OK(ReferenceKernels().Run(ParseOp("type: 'reduce_sum' dims: 'b'", 1), {&x}, &out));
  EXPECT_EQ(out.floats(), F("c:2,a:2", {4, 12, 6, 14}).floats());
  ASSERT_OK(ReferenceKernels().Run(ParseOp("type: 'reduce_min' dims: 'b'", 1), {&x}, &out));
  EXPECT_EQ(out.floats(), F("c:2,a:2", {1, 5, 2, 6}).floats());
  const Tensor y = F("a:1,b:2", {0, 1.0986123f});
  Tensor sm(DType::kFloat32, S("b:2,a:1"));
  ASSERT_OK(ReferenceKernels().Run(ParseOp("type: 'softmax' dims: 'b'", 1), {&y}, &sm));
  EXPECT_LE(MaxRelativeError(sm, F("b:2,a:1", {0.25f, 0.75f})), 3e-7);
}

struct BadCase {
  std::string op;
  std::vector<Tensor> in;
  std::vector<std::string> message;
};

TEST(MathReduceTest, BadGraphsGetInvalidArgumentNamingTheProblem) {
  const std::vector<BadCase> cases = {
      {"type: 'reduce_sum' dims: 'z'",
       {X()},
       {"op 't' (reduce_sum)", "reduces dim 'z'", "[a:2, b:3]"}},
      {"type: 'reduce_sum' dims: 'a' dims: 'a'", {X()}, {"lists dim 'a' twice"}},
      {"type: 'reduce_mean'", {I("a:2", {1, 2})}, {"needs float32"}},
      {"type: 'reduce_logsumexp'", {I("a:2", {1, 2})}, {"needs float32"}},
      {"type: 'softmax'", {X()}, {"needs `dims`"}},
      {"type: 'log_softmax' dims: 'q'", {X()}, {"reduces dim 'q'"}},
      {"type: 'softmax' dims: 'b'", {I("b:2", {1, 2})}, {"needs float32"}},
      {"type: 'layer_norm' dims: 'b'", {X(), F("c:3", {1, 2, 3})}, {"scale 'b' has dim c:3"}},
      {"type: 'layer_norm' dims: 'b'",
       {X(), F("b:3", {1, 2, 3}), F("b:2", {1, 2})},
       {"bias 'c' has dim b:2"}},
      {"type: 'rms_norm' dims: 'b' attrs { key: 'epsilon' value { f: -1 } }",
       {X()},
       {"epsilon must be >= 0"}},
      {"type: 'rms_norm' dims: 'b' attrs { key: 'epsilon' value { s: 'x' } }",
       {X()},
       {"epsilon must be a number"}},
      {"type: 'softmax_cross_entropy' dims: 'b'",
       {X(), F("b:3", {1, 2, 3})},
       {"targets 'b' [b:3] must have the dims of logits 'a' [a:2, b:3]"}},
      {"type: 'softmax_cross_entropy'", {X(), X()}, {"needs `dims`"}},
      {"type: 'layer_norm_grad' dims: 'b'",
       {X(), F("b:3,a:2", {1, 2, 3, 4, 5, 6})},
       {"op 't' (layer_norm_grad)", "dy 'b' [b:3, a:2] must have the shape of x 'a' [a:2, b:3]"}},
      {"type: 'rms_norm_grad' dims: 'b'",
       {X(), F("a:2", {1, 2}), X()},
       {"scale 'b' has dim a:2 which is not a normalised dim of x [a:2, b:3]"}},
      {"type: 'layer_norm_grad' dims: 'b'",
       {X(), F("b:2", {1, 2}), X()},
       {"scale 'b' has dim b:2"}},
      {"type: 'layer_norm_grad'", {X(), X()}, {"needs `dims`"}},
      {"type: 'rms_norm_grad' dims: 'z'", {X(), X()}, {"reduces dim 'z'"}},
      {"type: 'layer_norm_grad' dims: 'b'", {I("a:2", {1, 2}), X()}, {"needs float32"}},
      {"type: 'layer_norm_grad' dims: 'b' attrs { key: 'epsilon' value { f: -1 } }",
       {X(), X()},
       {"epsilon must be >= 0"}},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.op);
    const v1::Op op = ParseOp(c.op, c.in.size());
    EXPECT_TRUE(StatusIs(InferOutputType(op, Types(c.in)).status(),
                         absl::StatusCode::kInvalidArgument, c.message));
  }
  // Too many inputs is refused by the registry's arity.
  EXPECT_TRUE(StatusIs(
      InferOutputType(ParseOp("type: 'rms_norm' dims: 'b'", 3), Types({X(), X(), X()})).status(),
      absl::StatusCode::kInvalidArgument, {"takes 1 to 2 input(s) but has 3"}));
  EXPECT_TRUE(StatusIs(
      InferOutputType(ParseOp("type: 'layer_norm_grad' dims: 'b'", 1), Types({X()})).status(),
      absl::StatusCode::kInvalidArgument, {"takes 2 to 3 input(s) but has 1"}));
}

TEST(MathReduceTest, RegistryEntriesNameTheirCollectives) {
  EXPECT_EQ(FindOp("reduce_min")->collectives,
            "allreduce(min) over the mesh dims of split reduced dims");
  EXPECT_EQ(FindOp("reduce_any")->collectives,
            "allreduce(max) over the mesh dims of split reduced dims");
  EXPECT_EQ(FindOp("softmax")->collectives,
            "allreduce(max) then allreduce(sum) over the mesh dims of split normalised dims");
  EXPECT_FALSE(FindOp("reduce_all")->differentiable);
  EXPECT_TRUE(FindOp("layer_norm")->differentiable);
  EXPECT_FALSE(FindOp("layer_norm_grad")->differentiable);
  EXPECT_EQ(FindOp("rms_norm_grad")->collectives,
            "allreduce(sum) twice (mean(x^2), mean(g xhat)) over the mesh dims of split normalised "
            "dims");
  for (const char* t : {"reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_any",
                        "reduce_all", "reduce_logsumexp", "softmax", "log_softmax", "layer_norm",
                        "rms_norm", "softmax_cross_entropy", "layer_norm_grad", "rms_norm_grad"}) {
    ASSERT_NE(FindOp(t), nullptr) << t;
    EXPECT_EQ(FindOp(t)->family, OpFamily::kReduce) << t;
  }
}

}  // namespace
}  // namespace meshrt
