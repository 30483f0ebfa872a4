// Training as a request (core/train/training_spec.h): the graph a TrainingSpec trains is the graph the
// C++ builder's Minimize makes, op for op; it trains; every refusal names the field and tensor.
#include "core/train/training_spec.h"

#include <string>
#include <vector>

#include "core/ops/builder.h"
#include "core/reference/interpreter.h"
#include "core/testing/test_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"

namespace meshrt {
namespace {

// A linear regression: loss = mean((x . w - t)^2) over [batch, out], x and t fixed variables.
struct Forward {
  GraphBuilder b;
  TensorRef w, loss;
};

void BuildForward(Forward* f) {
  GraphBuilder& b = f->b;
  Initializer normal;
  normal.kind = "normal";
  normal.seed = 3;
  TensorRef x = b.Variable("x", Shape({{"batch", 8}, {"d_in", 4}}), normal);
  Initializer target = normal;
  target.seed = 4;
  TensorRef t = b.Variable("t", Shape({{"batch", 8}, {"out", 2}}), target);
  Initializer w_init = normal;
  w_init.seed = 5;
  f->w = b.Variable("w", Shape({{"d_in", 4}, {"out", 2}}), w_init);
  TensorRef y = b.Einsum({x, f->w}, Shape({{"batch", 8}, {"out", 2}}), "y");
  TensorRef d = b.Sub(y, t, "d");
  f->loss = b.ReduceMean(b.Mul(d, d, "sq"), {}, "loss");
  b.MarkOutput(f->loss);
}

v1::TrainingSpec AdamSpec() {
  v1::TrainingSpec spec;
  spec.set_loss("loss");
  spec.add_variables("w");
  spec.set_optimizer("adam");
  spec.mutable_learning_rate()->set_base(0.05f);
  spec.set_beta2(0.99f);
  spec.set_clip_global_norm(1.0f);
  return spec;
}

TEST(TrainingSpecTest, TheGraphIsTheOneMinimizeBuildsOpForOp) {
  Forward forward;
  BuildForward(&forward);
  ASSERT_OK_AND_ASSIGN(const Graph graph, forward.b.Build());
  ASSERT_OK_AND_ASSIGN(const TrainedGraph trained, AddTraining(graph, AdamSpec()));

  Forward expected;
  BuildForward(&expected);
  TrainOptions o;
  o.optimizer = "adam";
  o.learning_rate.base = 0.05f;
  o.beta2 = 0.99f;
  o.clip_global_norm = 1.0f;
  ASSERT_OK_AND_ASSIGN(const TrainOps ops, Minimize(expected.b, expected.loss, {expected.w}, o));
  for (const TensorRef* t : {&ops.loss, &ops.learning_rate, &ops.global_step, &ops.global_norm}) {
    expected.b.MarkOutput(*t);
  }
  ASSERT_OK_AND_ASSIGN(const Graph want, expected.b.Build());
  std::string diff;
  google::protobuf::util::MessageDifferencer differ;
  differ.ReportDifferencesToString(&diff);
  EXPECT_TRUE(differ.Compare(want.proto(), trained.graph.proto())) << diff;
  EXPECT_EQ(trained.graph.proto().ops_size(), want.proto().ops_size());
  EXPECT_EQ(trained.outputs.loss(), "loss");
  EXPECT_EQ(trained.outputs.learning_rate(), ops.learning_rate.name);
  EXPECT_EQ(trained.outputs.global_norm(), ops.global_norm.name);
  EXPECT_EQ(trained.outputs.global_step(), ops.global_step.name);
}

TEST(TrainingSpecTest, ItTrainsEveryVariableWhenNoneAreNamed) {
  Forward forward;
  BuildForward(&forward);
  ASSERT_OK_AND_ASSIGN(const Graph graph, forward.b.Build());
  v1::TrainingSpec spec;
  spec.set_loss("loss");
  spec.mutable_learning_rate()->set_base(0.1f);  // sgd
  ASSERT_OK_AND_ASSIGN(const TrainedGraph trained, AddTraining(graph, spec));
  TensorMap state;
  std::vector<float> losses;
  for (int step = 0; step < 20; ++step) {
    ASSERT_OK_AND_ASSIGN(TensorMap out, InterpretStep(trained.graph, {}, {"loss"}, &state));
    losses.push_back(out.at("loss").f32()[0]);
  }
  EXPECT_LT(losses.back(), 0.5f * losses.front());
  // x and t were trained too (no variables named: every float32 one), from their initial values.
  TensorMap initial;
  ASSERT_OK_AND_ASSIGN(const TensorMap unused, InterpretStep(graph, {}, {"loss"}, &initial));
  for (const char* name : {"x", "t", "w"}) {
    const Tensor& before = initial.at(name);
    const Tensor& after = state.at(name);
    bool moved = false;
    for (int64_t i = 0; i < before.num_elements(); ++i) moved |= before.f32()[i] != after.f32()[i];
    EXPECT_TRUE(moved) << name;
  }
}

TEST(TrainingSpecTest, RefusalsNameTheFieldAndTheTensor) {
  Forward forward;
  BuildForward(&forward);
  ASSERT_OK_AND_ASSIGN(const Graph graph, forward.b.Build());
  auto refused = [&](v1::TrainingSpec spec) { return AddTraining(graph, spec).status(); };
  v1::TrainingSpec spec = AdamSpec();
  spec.clear_loss();
  EXPECT_TRUE(StatusIs(refused(spec), absl::StatusCode::kInvalidArgument, {"TrainingSpec.loss"}));
  spec.set_loss("lost");
  EXPECT_TRUE(StatusIs(refused(spec), absl::StatusCode::kInvalidArgument,
                       {"the loss 'lost' is not in the graph"}));
  spec.set_loss("sq");
  EXPECT_TRUE(StatusIs(refused(spec), absl::StatusCode::kInvalidArgument,
                       {"the loss 'sq' must be a scalar float32"}));
  spec = AdamSpec();
  spec.add_variables("y");
  EXPECT_TRUE(StatusIs(refused(spec), absl::StatusCode::kInvalidArgument,
                       {"TrainingSpec.variables names 'y'", "not a variable"}));
  spec = AdamSpec();
  spec.set_optimizer("adamx");
  EXPECT_TRUE(StatusIs(refused(spec), absl::StatusCode::kInvalidArgument,
                       {"TrainOptions.optimizer", "adamx"}));
  spec = AdamSpec();
  spec.set_beta1(1.5f);
  EXPECT_TRUE(StatusIs(refused(spec), absl::StatusCode::kInvalidArgument, {"TrainOptions.beta1"}));
}

}  // namespace
}  // namespace meshrt
