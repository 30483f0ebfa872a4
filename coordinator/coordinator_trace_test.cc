// Step timelines through the coordinator with in-process workers: RunStep returns the requested
// repetitions of every processor, completed with names, coordinates and collective waits; a bad
// range is refused before anything runs.
#include <set>
#include <string>
#include <vector>

#include "client/random_feeds.h"
#include "coordinator/coordinator.h"
#include "testing/cluster/in_process_workers.h"
#include "core/ops/builder.h"
#include "core/testing/test_util.h"
#include "gtest/gtest.h"
#include "util/logging.h"

namespace meshrt {
namespace {

v1::CreateSessionRequest MlpRequest() {
  GraphBuilder b;
  TensorRef x = b.Placeholder("x", Shape({{"batch", 8}, {"d_in", 16}}));
  TensorRef w1 = b.Placeholder("w1", Shape({{"d_in", 16}, {"hidden", 32}}));
  TensorRef h = b.Relu(b.Einsum({x, w1}, Shape({{"batch", 8}, {"hidden", 32}}), "h"), "r");
  b.MarkOutput(b.ReduceSum(h, {"hidden"}, "s"));
  v1::CreateSessionRequest r;
  *r.mutable_graph() = b.proto();
  const Mesh m = Mesh::Parse("rows:2,cols:2").value();
  *r.mutable_mesh() = m.ToProto();
  // hidden over cols: the sum over hidden is an allreduce over cols.
  *r.mutable_rules() = LayoutRules::Parse("batch:rows,hidden:cols", m).value().ToProto();
  r.set_timeout_ms(2000);
  return r;
}

class CoordinatorTraceTest : public ::testing::Test {
 protected:
  CoordinatorTraceTest() : coordinator_(Options(), &workers_) {
    for (int i = 0; i < 4; ++i) {
      const std::string address = absl::StrCat("w", i);
      workers_.AddWorker(address);
      v1::RegisterWorkerRequest r;
      r.set_address(address);
      r.set_incarnation("inc-" + address);
      r.set_secret("secret-of-" + address + "-0123456789");
      MESHRT_CHECK(coordinator_.RegisterWorker(r).ok(), "register ", address);
    }
  }
  static CoordinatorOptions Options() {
    CoordinatorOptions o;
    o.heartbeat_timeout = absl::Seconds(60);
    return o;
  }
  InProcessWorkers workers_;
  Coordinator coordinator_;
};

TEST_F(CoordinatorTraceTest, ReturnsTheRequestedRepetitionsOfEveryProcessor) {
  ASSERT_OK_AND_ASSIGN(v1::CreateSessionResponse s, coordinator_.CreateSession(MlpRequest()));
  const Graph g = Graph::Build(MlpRequest().graph()).value();
  const TensorMap feeds = RandomFeeds(g, 1);
  ASSERT_OK(coordinator_.RunStep(s.session(), feeds, {}).status());  // step 1, untraced
  std::vector<v1::StepTrace> traces;
  // Steps 2..5; repetitions 2..3 are steps 3 and 4.
  ASSERT_OK(coordinator_.RunStep(s.session(), feeds, {}, 4, 2, 3, &traces).status());
  ASSERT_EQ(traces.size(), 8u);
  std::set<std::string> names;
  for (size_t k = 0; k < traces.size(); ++k) {
    const v1::StepTrace& t = traces[k];
    EXPECT_EQ(t.step(), 3 + static_cast<int64_t>(k) / 4);
    EXPECT_EQ(t.processor(), static_cast<int>(k % 4));
    ASSERT_EQ(t.coordinate_size(), 2);
    EXPECT_EQ(t.coordinate(0), t.processor() / 2);
    EXPECT_EQ(t.coordinate(1), t.processor() % 2);
    EXPECT_EQ(t.mesh(), "rows:2,cols:2");
    int collectives = 0;
    for (const v1::TraceEvent& e : t.events()) {
      names.insert(e.name());
      EXPECT_FALSE(e.what().empty()) << e.ShortDebugString();
      if (e.kind() != v1::TraceEvent::COLLECTIVE) continue;
      ++collectives;
      EXPECT_GT(e.bytes(), 0);
      // One process, one clock: the wait is known, within the call.
      EXPECT_GE(e.wait_us(), 0);
      EXPECT_LE(e.wait_us(), e.dur_us());
    }
    EXPECT_GT(collectives, 0);
  }
  EXPECT_TRUE(names.count("h")) << "the einsum's op name";
  EXPECT_TRUE(names.count("s")) << "the reduction's op name";

  traces.clear();
  ASSERT_OK(coordinator_.RunStep(s.session(), feeds, {}).status());  // no trace asked
  EXPECT_TRUE(traces.empty());
}

TEST_F(CoordinatorTraceTest, ABadRangeIsRefusedBeforeDispatch) {
  ASSERT_OK_AND_ASSIGN(v1::CreateSessionResponse s, coordinator_.CreateSession(MlpRequest()));
  const TensorMap feeds = RandomFeeds(Graph::Build(MlpRequest().graph()).value(), 1);
  std::vector<v1::StepTrace> traces;
  for (auto [first, last] : {std::pair<int, int>{3, 2}, {0, 2}, {1, 5}}) {
    EXPECT_TRUE(StatusIs(coordinator_.RunStep(s.session(), feeds, {}, 4, first, last, &traces)
                             .status(),
                         absl::StatusCode::kInvalidArgument, {"trace_first"}));
  }
  // Nothing ran: the next step is step 1.
  ASSERT_OK(coordinator_.RunStep(s.session(), feeds, {}, 1, 1, 1, &traces).status());
  ASSERT_EQ(traces.size(), 4u);
  EXPECT_EQ(traces[0].step(), 1);
}

}  // namespace
}  // namespace meshrt
