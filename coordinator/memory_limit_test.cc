// The per-worker memory limit at CreateSession: a program over it is refused with
// ResourceExhausted naming the peak, the limit, the worker, the dominating tensors and a layout
// that fits, before any worker loads; the --memory_limit flag's parser.
#include "coordinator/memory_limit.h"

#include "coordinator/coordinator.h"
#include "testing/cluster/in_process_workers.h"
#include "core/ops/builder.h"
#include "core/testing/test_util.h"
#include "gtest/gtest.h"

namespace meshrt {
namespace {

// The MLP of coordinator_test: x [batch 8, d_in 16], w1 [d_in 16, hidden 32], w2 [hidden 32,
// d_out 8] placeholders; h = x.w1, r = relu(h), y = r.w2, s = sum(y); outputs y, s.
// Replicated, float32: feeds 512 + 2048 + 1024 = 3584 B; h [8,32] 1024 B, then r reads it: 2048 B
// live, the peak = 5632 B. Top at the peak: w1 2 KiB, then h, r, w2 1 KiB, x 512 B.
// With hidden:rows (the best one-rule fix): w1 [16,16] 1024, w2 [16,8] 512, x 512 = 2048 B; h
// and r [8,16] 512 each: peak 3072 B. batch:rows peaks at 3328 + 1024 = 4352 B, d_in:rows higher.
v1::CreateSessionRequest Request(const std::string& layout, int64_t memory_limit_bytes = 0) {
  GraphBuilder b;
  TensorRef x = b.Placeholder("x", Shape({{"batch", 8}, {"d_in", 16}}));
  TensorRef w1 = b.Placeholder("w1", Shape({{"d_in", 16}, {"hidden", 32}}));
  TensorRef w2 = b.Placeholder("w2", Shape({{"hidden", 32}, {"d_out", 8}}));
  TensorRef h = b.Relu(b.Einsum({x, w1}, Shape({{"batch", 8}, {"hidden", 32}}), "h"), "r");
  TensorRef y = b.Einsum({h, w2}, Shape({{"batch", 8}, {"d_out", 8}}), "y");
  b.MarkOutput(y);
  b.MarkOutput(b.ReduceSum(y, {"d_out"}, "s"));
  v1::CreateSessionRequest r;
  *r.mutable_graph() = b.proto();
  Mesh m = Mesh::Parse("rows:2,cols:2").value();
  *r.mutable_mesh() = m.ToProto();
  *r.mutable_rules() = LayoutRules::Parse(layout, m).value().ToProto();
  r.set_timeout_ms(2000);
  r.set_memory_limit_bytes(memory_limit_bytes);
  return r;
}

class MemoryLimitTest : public ::testing::Test {
 protected:
  explicit MemoryLimitTest(int64_t limit = kMemoryLimitAuto)
      : coordinator_(Options(limit), &workers_) {}

  static CoordinatorOptions Options(int64_t limit) {
    CoordinatorOptions o;
    o.heartbeat_timeout = absl::Seconds(60);
    o.memory_limit = limit;
    return o;
  }

  // Registers workers reporting `available` bytes each (0 = unknown), at addresses `host`0,
  // `host`1, ... (a host "h:" makes them share host h).
  void Register(int n, int64_t available, const std::string& host = "w") {
    for (int i = 0; i < n; ++i) {
      std::string address = absl::StrCat(host, next_++);
      workers_.AddWorker(address);
      v1::RegisterWorkerRequest r;
      r.set_address(address);
      r.set_incarnation("inc-" + address);
      r.set_secret("secret-of-" + address + "-0123456789");
      r.set_available_memory_bytes(available);
      ASSERT_TRUE(coordinator_.RegisterWorker(r).ok());
    }
  }

  int FreeWorkers() {
    int free = 0;
    const v1::ListWorkersResponse list = coordinator_.ListWorkers();
    for (const v1::WorkerInfo& w : list.workers()) free += w.session().empty();
    return free;
  }

  InProcessWorkers workers_;
  Coordinator coordinator_;
  int next_ = 0;
};

class FixedMemoryLimitTest : public MemoryLimitTest {
 protected:
  FixedMemoryLimitTest() : MemoryLimitTest(4000) {}
};

TEST_F(FixedMemoryLimitTest, RefusesBeforeDispatchNamingTensorsAndAFittingLayout) {
  Register(4, 0);
  EXPECT_TRUE(StatusIs(coordinator_.CreateSession(Request("")).status(),
                       absl::StatusCode::kResourceExhausted,
                       {"5632 bytes", "at op 'r'", "4000 bytes", "--memory_limit", "'w1' 2.00 KiB",
                        "'h' 1.00 KiB", "a layout that fits: 'hidden:rows' (peak 3.00 KiB)"}));
  EXPECT_EQ(workers_.loads(), 0);
  EXPECT_EQ(FreeWorkers(), 4);
  // The suggested layout is accepted and loads on every worker.
  ASSERT_OK(coordinator_.CreateSession(Request("hidden:rows")).status());
  EXPECT_EQ(workers_.loads(), 4);
}

TEST_F(FixedMemoryLimitTest, TheRequestsSmallerLimitApplies) {
  Register(4, 0);
  // hidden:rows (3072 B) fits the flag's 4000 B but not the request's 3000 B.
  EXPECT_TRUE(StatusIs(coordinator_.CreateSession(Request("hidden:rows", 3000)).status(),
                       absl::StatusCode::kResourceExhausted,
                       {"3072 bytes", "3000 bytes", "memory_limit_bytes"}));
  // A larger request limit does not lift the flag's.
  EXPECT_TRUE(StatusIs(coordinator_.CreateSession(Request("", 1 << 20)).status(),
                       absl::StatusCode::kResourceExhausted, {"4000 bytes", "--memory_limit"}));
  EXPECT_EQ(workers_.loads(), 0);
}

TEST_F(MemoryLimitTest, AutoUsesTheAvailableMemoryOfThePickedWorkers) {
  Register(3, 1 << 20);
  Register(1, 5000);  // worker 3 ("w3"): too small for the replicated program
  EXPECT_TRUE(StatusIs(coordinator_.CreateSession(Request("")).status(),
                       absl::StatusCode::kResourceExhausted,
                       {"5632 bytes", "5000 bytes", "worker 3 (w3)'s available memory", "'w1'",
                        "a layout that fits: 'hidden:rows'"}));
  EXPECT_EQ(workers_.loads(), 0);
  EXPECT_EQ(FreeWorkers(), 4);  // nobody was taken
  ASSERT_OK(coordinator_.CreateSession(Request("hidden:rows")).status());
  EXPECT_EQ(workers_.loads(), 4);
}

TEST_F(MemoryLimitTest, WorkersOnOneHostShareItsAvailableMemory) {
  // 20000 B each alone would fit 5632 B; four on one host get 5000 B each.
  Register(4, 20000, "h:");
  EXPECT_TRUE(StatusIs(coordinator_.CreateSession(Request("")).status(),
                       absl::StatusCode::kResourceExhausted,
                       {"5000 bytes", "worker 0 (h:0)", "shared by the session's 4 workers"}));
  EXPECT_EQ(workers_.loads(), 0);
  // Each of its workers holds 3072 B with hidden:rows: four fit in 20000 B.
  ASSERT_OK_AND_ASSIGN(v1::CreateSessionResponse s,
                       coordinator_.CreateSession(Request("hidden:rows")));
  EXPECT_EQ(workers_.loads(), 4);
  // The session's explain ends with the memory section.
  EXPECT_NE(s.explain().find("memory per worker"), std::string::npos) << s.explain();
  EXPECT_NE(s.explain().find("(3072 bytes"), std::string::npos) << s.explain();
}

TEST_F(MemoryLimitTest, UnknownAvailableMemoryIsNotChecked) {
  Register(4, 0);
  ASSERT_OK(coordinator_.CreateSession(Request("")).status());
  EXPECT_EQ(workers_.loads(), 4);
}

class NoMemoryLimitTest : public MemoryLimitTest {
 protected:
  NoMemoryLimitTest() : MemoryLimitTest(kMemoryLimitNone) {}
};

TEST_F(NoMemoryLimitTest, NoneDisablesTheCheck) {
  Register(4, 100);
  ASSERT_OK(coordinator_.CreateSession(Request("")).status());
  EXPECT_EQ(workers_.loads(), 4);
}

TEST_F(FixedMemoryLimitTest, NoFittingLayoutSaysSo) {
  Register(4, 0);
  // 1000 B: no one-rule layout of this graph fits (hidden:rows needs 3072 B).
  EXPECT_TRUE(StatusIs(coordinator_.CreateSession(Request("", 1000)).status(),
                       absl::StatusCode::kResourceExhausted,
                       {"1000 bytes", "no layout adding one rule fits"}));
}

TEST(ParseMemoryLimitFlagTest, AcceptsSizesAutoAndNone) {
  EXPECT_EQ(*ParseMemoryLimitFlag("8G"), int64_t{8} << 30);
  EXPECT_EQ(*ParseMemoryLimitFlag("512M"), int64_t{512} << 20);
  EXPECT_EQ(*ParseMemoryLimitFlag("auto"), kMemoryLimitAuto);
  EXPECT_EQ(*ParseMemoryLimitFlag("none"), kMemoryLimitNone);
  EXPECT_TRUE(StatusIs(ParseMemoryLimitFlag("lots").status(), absl::StatusCode::kInvalidArgument,
                       {"--memory_limit='lots'", "8G", "auto", "none"}));
  EXPECT_TRUE(StatusIs(ParseMemoryLimitFlag("8Q").status(), absl::StatusCode::kInvalidArgument,
                       {"--memory_limit='8Q'", "unknown suffix 'Q'"}));
  EXPECT_TRUE(StatusIs(ParseMemoryLimitFlag("0").status(), absl::StatusCode::kInvalidArgument,
                       {"--memory_limit='0'", "none"}));
}

}  // namespace
}  // namespace meshrt
