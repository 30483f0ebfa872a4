// The fixture of the coordinator's checkpoint tests (checkpoint_test.cc,
// checkpoint_partial_test.cc): a coordinator with in-process workers and a --checkpoint_root, and
// a small regression trained by SGD with a step counter.
#ifndef MESHRT_COORDINATOR_CHECKPOINT_TEST_FIXTURE_H_
#define MESHRT_COORDINATOR_CHECKPOINT_TEST_FIXTURE_H_

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "coordinator/coordinator.h"
#include "testing/cluster/in_process_workers.h"
#include "core/ops/builder.h"
#include "core/testing/test_util.h"
#include "core/train/autodiff.h"
#include "core/train/optimizers.h"
#include "gtest/gtest.h"

namespace meshrt {
namespace checkpoint_testing {

namespace fs = std::filesystem;

inline std::string MakeTempDir() { return MakeTestTempDir("ckpt"); }

inline const Shape kX({{"batch", 8}, {"d_in", 16}});
inline const Shape kY({{"batch", 8}, {"d_out", 4}});

// A two-layer regression's weights and mean squared error on placeholders x and y.
struct Regression {
  TensorRef w1, w2, loss;
};
inline Regression AddRegression(GraphBuilder& b, const std::string& w2_name = "w2") {
  TensorRef x = b.Placeholder("x", kX);
  TensorRef y = b.Placeholder("y", kY);
  Initializer init;
  init.kind = "glorot_uniform";
  init.seed = 5;
  Regression r;
  r.w1 = b.Variable("w1", Shape({{"d_in", 16}, {"hidden", 8}}), init);
  r.w2 = b.Variable(w2_name, Shape({{"hidden", 8}, {"d_out", 4}}), init);
  TensorRef h = b.Relu(b.Einsum({x, r.w1}, Shape({{"batch", 8}, {"hidden", 8}})));
  TensorRef err = b.Sub(b.Einsum({h, r.w2}, kY), y);
  r.loss = b.ReduceMean(b.Mul(err, err), {}, "loss");
  return r;
}

// The regression trained by SGD, with a step counter.
inline v1::Graph TrainGraph(bool with_w2 = true) {
  GraphBuilder b;
  const auto [w1, w2, loss] = AddRegression(b, with_w2 ? "w2" : "w3");
  TensorRef step = b.Variable("step", Shape({}));
  auto grads = Gradients(b, loss, {w1, w2});
  EXPECT_TRUE(grads.ok()) << grads.status();
  b.Assign(w1, b.Sub(w1, b.Scale((*grads)[0], 0.1f)), "update_w1");
  b.Assign(w2, b.Sub(w2, b.Scale((*grads)[1], 0.1f)), "update_w2");
  v1::Op one;
  one.set_type("ones");
  b.AssignAdd(step, b.Apply(one, {}, "one"), "count");
  b.MarkOutput(loss);
  return b.proto();
}

// The same regression trained by Minimize with 4 microbatches: on a mesh splitting the batch the
// "<var>/acc" accumulators are partial sums on the workers (core/lowering/lower_accumulate.cc).
inline v1::Graph MicrobatchTrainGraph() {
  GraphBuilder b;
  const auto [w1, w2, loss] = AddRegression(b);
  TrainOptions o;
  o.learning_rate.base = 0.1f;
  o.microbatches = 4;
  EXPECT_TRUE(Minimize(b, loss, {w1, w2}, o).ok());
  b.MarkOutput(loss);
  return b.proto();
}

inline TensorMap Feeds(int step) {
  Tensor x(DType::kFloat32, kX), y(DType::kFloat32, kY);
  for (int64_t i = 0; i < x.num_elements(); ++i) x.f32()[i] = std::sin(0.37f * (i + 11 * step));
  for (int64_t i = 0; i < y.num_elements(); ++i) y.f32()[i] = std::cos(0.23f * (i + 7 * step));
  return {{"x", x}, {"y", y}};
}

// A fresh directory, resolved (the coordinator reports resolved paths).
inline std::string RealTempDir() {
  return fs::canonical(MakeTempDir()).string();
}

class CheckpointCoordinatorTest : public ::testing::Test {
 protected:
  CheckpointCoordinatorTest() : root_(RealTempDir()), coordinator_(Options(root_), &workers_) {}

  static CoordinatorOptions Options(const std::string& root) {
    CoordinatorOptions o;
    o.heartbeat_timeout = absl::Seconds(60);
    o.checkpoint_root = root;
    return o;
  }

  // The committed version directory of checkpoint `name`.
  std::string Committed(const std::string& name) const {
    std::ifstream in(fs::path(root_) / name / "CURRENT");
    std::string version;
    in >> version;
    EXPECT_FALSE(version.empty()) << name << " has no CURRENT";
    return (fs::path(root_) / name / version).string();
  }

  // Every version directory of checkpoint `name`.
  std::vector<std::string> Versions(const std::string& name) const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(fs::path(root_) / name)) {
      if (absl::StartsWith(e.path().filename().string(), "v-")) out.push_back(e.path().string());
    }
    return out;
  }

  void Register(int n, WorkerFileAccess files = WorkerFileAccess()) {
    for (int i = 0; i < n; ++i) {
      std::string address = absl::StrCat("w", next_++);
      workers_.AddWorker(address, files);
      v1::RegisterWorkerRequest r;
      r.set_address(address);
      r.set_incarnation("inc-" + address);
      r.set_secret("secret-of-" + address + "-0123456789");
      ASSERT_TRUE(coordinator_.RegisterWorker(r).ok());
    }
  }

  std::string Create(const std::string& mesh_text, const std::string& rules_text,
                     const v1::Graph& graph = TrainGraph()) {
    v1::CreateSessionRequest r;
    *r.mutable_graph() = graph;
    Mesh m = Mesh::Parse(mesh_text).value();
    *r.mutable_mesh() = m.ToProto();
    *r.mutable_rules() = LayoutRules::Parse(rules_text, m).value().ToProto();
    r.set_timeout_ms(2000);
    auto s = coordinator_.CreateSession(r);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? s->session() : "";
  }

  float Step(const std::string& session, int step) {
    auto out = coordinator_.RunStep(session, Feeds(step), {"loss", "step"});
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok()) return NAN;
    EXPECT_EQ(out->at("step").f32()[0], step - 1);  // read at the start of the step
    return out->at("loss").f32()[0];
  }

  const std::string root_;  // --checkpoint_root
  InProcessWorkers workers_;
  Coordinator coordinator_;
  int next_ = 0;
};

}  // namespace checkpoint_testing
}  // namespace meshrt

#endif  // MESHRT_COORDINATOR_CHECKPOINT_TEST_FIXTURE_H_
