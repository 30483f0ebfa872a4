#include "worker/worker_metrics.h"

#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "core/testing/test_util.h"
#include "gtest/gtest.h"
#include "monitoring/metrics.h"
#include "runtime/local_communicator.h"

namespace meshrt {
namespace {

LabelValues L(const char* kind, const char* dims) { return {kind, dims}; }

TEST(MeshDimsLabelTest, NamesTheGroupsDimsInMeshOrder) {
  absl::StatusOr<Mesh> mesh = Mesh::Parse("rows:2,cols:3");
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  EXPECT_EQ(MeteredCommunicator::MeshDimsLabel(*mesh, {1, 0}), "rows,cols");
  EXPECT_EQ(MeteredCommunicator::MeshDimsLabel(*mesh, {1, 1}), "cols");
  EXPECT_EQ(MeteredCommunicator::MeshDimsLabel(*mesh, {}), "");
  EXPECT_EQ(MeteredCommunicator::MeshDimsLabel(*mesh, {7, -1, 0}), "rows");
}

// Four processors on a 2x2 mesh, each behind a MeteredCommunicator sharing one WorkerMetrics
// (as four sessions' communicators of one worker would).
class MeteredCommunicatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<Mesh> mesh = Mesh::Parse("rows:2,cols:2");
    ASSERT_TRUE(mesh.ok()) << mesh.status();
    hub_ = std::make_unique<LocalCollectiveHub>(*mesh);
    for (int p = 0; p < 4; ++p) {
      metered_.push_back(std::make_unique<MeteredCommunicator>(
          std::make_unique<ForwardingCommunicator>(hub_->communicator(p)), &metrics_));
    }
  }
  std::vector<absl::Status> OnAll(const std::function<absl::Status(int, Communicator*)>& fn) {
    std::vector<std::thread> threads;
    std::vector<absl::Status> out(4);
    for (int p = 0; p < 4; ++p) {
      threads.emplace_back([&, p] { out[p] = fn(p, metered_[p].get()); });
    }
    for (std::thread& t : threads) t.join();
    return out;
  }

  MetricsRegistry registry_;
  WorkerMetrics metrics_{&registry_};
  std::unique_ptr<LocalCollectiveHub> hub_;
  std::vector<std::unique_ptr<MeteredCommunicator>> metered_;
};

TEST_F(MeteredCommunicatorTest, CountsCallsBytesAndSecondsByKindAndMeshDims) {
  for (const absl::Status& s : OnAll([](int p, Communicator* c) -> absl::Status {
         std::vector<float> data(10, static_cast<float>(p));
         absl::Status s = c->AllReduce({0}, v1::REDUCE_SUM, DType::kFloat32, data.data(), 10);
         if (!s.ok()) return s;
         if (data[0] != (p % 2) + (p % 2 + 2)) {
           return absl::InternalError(absl::StrCat("allreduce gave ", data[0]));
         }
         s = c->AllReduce({1, 0}, v1::REDUCE_SUM, DType::kFloat32, data.data(), 10);
         if (!s.ok()) return s;
         std::vector<char> out(4 * 6);
         s = c->AllGather({0, 1}, "abcdef", 6, out.data());
         if (!s.ok()) return s;
         std::vector<char> in(2 * 8), got(2 * 8);
         s = c->AllToAll({1}, in.data(), got.data(), 8);
         if (!s.ok()) return s;
         return c->Barrier({0, 1});
       })) {
    ASSERT_TRUE(s.ok()) << s;
  }
  EXPECT_EQ(metrics_.collective_calls->WithLabels(L("allreduce", "rows"))->value(), 4);
  EXPECT_EQ(metrics_.collective_bytes->WithLabels(L("allreduce", "rows"))->value(), 4 * 40);
  EXPECT_EQ(metrics_.collective_calls->WithLabels(L("allreduce", "rows,cols"))->value(), 4);
  EXPECT_EQ(metrics_.collective_bytes->WithLabels(L("allgather", "rows,cols"))->value(), 4 * 6);
  // alltoall: all g = 2 chunks of 8 bytes this processor sends.
  EXPECT_EQ(metrics_.collective_bytes->WithLabels(L("alltoall", "cols"))->value(), 4 * 16);
  EXPECT_EQ(metrics_.collective_calls->WithLabels(L("barrier", "rows,cols"))->value(), 4);
  EXPECT_EQ(metrics_.collective_bytes->WithLabels(L("barrier", "rows,cols"))->value(), 0);
  EXPECT_GT(metrics_.collective_seconds->WithLabels(L("allreduce", "rows"))->value(), 0);
  const std::string text = registry_.Render();
  EXPECT_TRUE(absl::StrContains(
      text, "meshrt_worker_collective_calls_total{kind=\"allgather\",mesh_dims=\"rows,cols\"} 4\n"))
      << text;
}

TEST_F(MeteredCommunicatorTest, BlockedAndOutOfPlaceCallsCountAsTheirKind) {
  for (const absl::Status& s : OnAll([](int p, Communicator* c) -> absl::Status {
         std::vector<float> in(8, 1.0f), out(8);
         absl::Status s =
             c->AllReduceInto({1}, v1::REDUCE_SUM, DType::kFloat32, in.data(), out.data(), 8);
         if (!s.ok()) return s;
         if (out[0] != 2) return absl::InternalError("allreduce_into");
         std::vector<float> rs(4);
         s = c->ReduceScatterBlocked({0}, v1::REDUCE_SUM, DType::kFloat32, in.data(), 2, 4,
                                     rs.data());
         if (!s.ok()) return s;
         std::vector<char> a(2 * 6), b(2 * 6);
         return c->AllToAllBlocked({0}, a.data(), 3, b.data(), 1, 6);
       })) {
    ASSERT_TRUE(s.ok()) << s;
  }
  EXPECT_EQ(metrics_.collective_calls->WithLabels(L("allreduce", "cols"))->value(), 4);
  EXPECT_EQ(metrics_.collective_bytes->WithLabels(L("reduce_scatter", "rows"))->value(),
            4 * 2 * 4 * 4);
  EXPECT_EQ(metrics_.collective_bytes->WithLabels(L("alltoall", "rows"))->value(), 4 * 12);
}

TEST_F(MeteredCommunicatorTest, FailedCallsCountAndKeepTheirStatus) {
  hub_->Abort(absl::UnavailableError("peer gone"));
  std::vector<float> data(2);
  absl::Status s = metered_[0]->AllReduce({0}, v1::REDUCE_SUM, DType::kFloat32, data.data(), 2);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_EQ(metrics_.collective_calls->WithLabels(L("allreduce", "rows"))->value(), 1);
}

TEST(WorkerMetricsTest, StepsCountOnlySuccessesAndComputeIsCpuTime) {
  MetricsRegistry registry;
  WorkerMetrics metrics(&registry);
  metrics.StepDone(true, absl::Milliseconds(20), absl::Milliseconds(15));
  metrics.StepDone(true, absl::Milliseconds(30), std::nullopt);
  metrics.StepDone(false, absl::Milliseconds(5), absl::Milliseconds(5));
  const std::string text = registry.Render();
  EXPECT_TRUE(absl::StrContains(text, "\nmeshrt_worker_steps_total 2\n")) << text;
  EXPECT_TRUE(absl::StrContains(text, "\nmeshrt_worker_step_failures_total 1\n")) << text;
  EXPECT_TRUE(absl::StrContains(text, "\nmeshrt_worker_step_duration_seconds_count 2\n")) << text;
  EXPECT_TRUE(absl::StrContains(text, "\nmeshrt_worker_step_duration_seconds_sum 0.05\n")) << text;
  EXPECT_TRUE(absl::StrContains(text, "\nmeshrt_worker_compute_seconds_total 0.015\n")) << text;
}

}  // namespace
}  // namespace meshrt
