// The coordinator's stuck-step watchdog without sockets: in-process workers whose steps are slowed
// or held by a wrapper, and heartbeats with fabricated activities sent by the test. A held step
// fails naming the processor the others wait for, and the workers are told to close the session;
// a request of many steps, each well within the limit, is not stuck however long it takes.
#include <atomic>
#include <functional>
#include <memory>
#include <thread>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "client/random_feeds.h"
#include "coordinator/coordinator.h"
#include "testing/cluster/in_process_workers.h"
#include "core/ops/builder.h"
#include "core/testing/test_util.h"
#include "gtest/gtest.h"

namespace meshrt {
namespace {

v1::CreateSessionRequest Request() {
  GraphBuilder b;
  TensorRef x = b.Placeholder("x", Shape({{"batch", 4}, {"d", 4}}));
  b.MarkOutput(b.ReduceSum(x, {"batch"}, "s"));
  v1::CreateSessionRequest r;
  *r.mutable_graph() = b.proto();
  Mesh m = Mesh::Parse("p:2").value();
  *r.mutable_mesh() = m.ToProto();
  *r.mutable_rules() = LayoutRules::Parse("batch:p", m).value().ToProto();
  r.set_timeout_ms(2000);
  return r;
}

// Real in-process workers, with each step first held while `hold` says so (until the step is
// cancelled) or slowed by `step_time` per step.
class HeldWorkers : public WorkerClientFactory {
 public:
  std::atomic<bool> hold{false};
  std::atomic<int64_t> step_time_ms{0};
  std::atomic<int> closes{0};
  InProcessWorkers inner;

  std::unique_ptr<WorkerClient> Connect(const std::string& address,
                                        const std::string& secret) override {
    return std::make_unique<Client>(this, inner.Connect(address, secret));
  }

 private:
  class Client : public WorkerClient {
   public:
    Client(HeldWorkers* owner, std::unique_ptr<WorkerClient> inner)
        : owner_(owner), inner_(std::move(inner)) {}
    absl::Status LoadSession(const v1::SessionSpec& spec, absl::Duration timeout) override {
      return inner_->LoadSession(spec, timeout);
    }
    absl::Status RunStep(const StepRequest& request, const FeedSlices& feeds,
                         FetchTargets* fetches, absl::Duration timeout, Cancellation* cancel,
                         std::vector<v1::StepTrace>* traces) override {
      if (owner_->hold) {
        for (int i = 0; i < 3000 && !cancel->cancelled(); ++i)
          absl::SleepFor(absl::Milliseconds(10));
        return absl::CancelledError("held step cancelled");
      }
      absl::SleepFor(absl::Milliseconds(owner_->step_time_ms * request.num_steps));
      return inner_->RunStep(request, feeds, fetches, timeout, cancel, traces);
    }
    absl::Status CloseSession(const std::string& session, absl::Duration timeout) override {
      ++owner_->closes;
      return inner_->CloseSession(session, timeout);
    }
    absl::StatusOr<v1::WorkerSaveCheckpointResponse> SaveCheckpoint(
        const v1::WorkerSaveCheckpointRequest& request, absl::Duration timeout) override {
      return inner_->SaveCheckpoint(request, timeout);
    }
    absl::Status RestoreCheckpoint(const v1::WorkerRestoreCheckpointRequest& request,
                                   absl::Duration timeout) override {
      return inner_->RestoreCheckpoint(request, timeout);
    }

   private:
    HeldWorkers* owner_;
    std::unique_ptr<WorkerClient> inner_;
  };
};

class WatchdogTest : public ::testing::Test {
 protected:
  WatchdogTest() : coordinator_(Options(), &workers_) {
    for (int i = 0; i < 2; ++i) {
      const std::string address = absl::StrCat("w", i);
      workers_.inner.AddWorker(address);
      v1::RegisterWorkerRequest r;
      r.set_address(address);
      r.set_incarnation("inc-" + address);
      r.set_secret("secret-of-" + address + "-0123456789");
      ids_.push_back(coordinator_.RegisterWorker(r).value().worker_id());
    }
  }
  ~WatchdogTest() override { StopHeartbeats(); }

  static CoordinatorOptions Options() {
    CoordinatorOptions o;
    o.heartbeat_interval = absl::Milliseconds(20);
    o.heartbeat_timeout = absl::Seconds(60);
    o.stuck_step.min = absl::Milliseconds(400);
    o.stuck_step.factor = 5;
    o.stuck_step.cpu_window = absl::Milliseconds(200);  // well within the 400 ms limit
    return o;
  }

  // Heartbeats every 20 ms for both workers with activity(processor) as their activity.
  void StartHeartbeats(std::function<v1::WorkerActivity(int processor)> activity) {
    heartbeats_ = std::thread([this, activity] {
      while (!stop_) {
        for (int p = 0; p < 2; ++p) {
          v1::HeartbeatRequest hb;
          hb.set_worker_id(ids_[p]);
          hb.set_incarnation(absl::StrCat("inc-w", p));
          *hb.add_activities() = activity(p);
          coordinator_.Heartbeat(hb).IgnoreError();
        }
        absl::SleepFor(absl::Milliseconds(20));
      }
    });
  }
  void StopHeartbeats() {
    stop_ = true;
    if (heartbeats_.joinable()) heartbeats_.join();
  }

  HeldWorkers workers_;
  Coordinator coordinator_;
  std::vector<int> ids_;
  std::atomic<bool> stop_{false};
  std::thread heartbeats_;
};

v1::WorkerActivity Activity(const std::string& session, int64_t step, int64_t ordinal,
                            int instruction, const std::string& kind,
                            const std::string& collective) {
  v1::WorkerActivity a;
  a.set_session(session);
  a.set_step(step);
  a.set_running(true);
  a.set_ordinal(ordinal);
  a.set_instruction(instruction);
  a.set_op("s");
  a.set_kind(kind);
  a.set_collective(collective);
  return a;
}

TEST_F(WatchdogTest, AHeldStepFailsNamingTheProcessorBehindAndClosesTheSession) {
  ASSERT_OK_AND_ASSIGN(v1::CreateSessionResponse s, coordinator_.CreateSession(Request()));
  const Graph g = Graph::Build(Request().graph()).value();
  const TensorMap feeds = RandomFeeds(g, 1);
  ASSERT_OK(coordinator_.RunStep(s.session(), feeds, {}).status());  // step 1
  const std::string id = s.session();
  // Step 2: processor 1 is stuck in a local op, processor 0 waits in the allreduce after it.
  StartHeartbeats([id](int p) {
    return p == 0 ? Activity(id, 2, 3, 1, "collective ALLREDUCE over [p]", "ALLREDUCE")
                  : Activity(id, 2, 1, 0, "local op 'sum'", "");
  });
  workers_.hold = true;
  const absl::Time start = absl::Now();
  const absl::Status st = coordinator_.RunStep(id, feeds, {}).status();
  const absl::Duration took = absl::Now() - start;
  EXPECT_TRUE(StatusIs(st, absl::StatusCode::kDeadlineExceeded,
                       {"step 2 has run for", "over the stuck-step limit of 400 ms",
                        "processor 1 (worker 1, w1, mesh coordinate (1)) has not arrived: it is "
                        "in instruction 0 (source_op 's', local op 'sum') of step 2",
                        "processor 0 (worker 0, w0, mesh coordinate (0)) waits in instruction 1"}));
  EXPECT_GE(took, absl::Milliseconds(400));
  EXPECT_LT(took, absl::Seconds(5));
  EXPECT_EQ(workers_.closes, 2);  // every worker is told to drop the session (ending its step)
  // The session is failed; the workers are free for the next one.
  EXPECT_TRUE(StatusIs(coordinator_.RunStep(id, feeds, {}).status(),
                       absl::StatusCode::kFailedPrecondition, {"stuck-step limit"}));
  StopHeartbeats();
  workers_.hold = false;
  ASSERT_OK(coordinator_.CloseSession(id));
  ASSERT_OK_AND_ASSIGN(v1::CreateSessionResponse next, coordinator_.CreateSession(Request()));
  ASSERT_OK(coordinator_.RunStep(next.session(), feeds, {}).status());
}

// A request of 12 steps of 100 ms (1.2 s in all, three times the 400 ms floor) whose heartbeats
// show the steps advancing: each step is judged alone, and none is stuck.
TEST_F(WatchdogTest, EachStepOfARequestHasItsOwnLimit) {
  ASSERT_OK_AND_ASSIGN(v1::CreateSessionResponse s, coordinator_.CreateSession(Request()));
  const Graph g = Graph::Build(Request().graph()).value();
  const TensorMap feeds = RandomFeeds(g, 1);
  const std::string id = s.session();
  workers_.step_time_ms = 100;
  const absl::Time start = absl::Now();
  StartHeartbeats([id, start](int) {
    const int64_t step = 1 + absl::ToInt64Milliseconds(absl::Now() - start) / 100;
    return Activity(id, std::min<int64_t>(step, 12), 2, 1, "collective ALLREDUCE over [p]",
                    "ALLREDUCE");
  });
  ASSERT_OK(coordinator_.RunStep(id, feeds, {}, /*num_steps=*/12).status());
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(1200));
  // The same request with frozen activities (nobody gets past step 13) is stuck.
  StopHeartbeats();
  stop_ = false;
  StartHeartbeats([id](int p) {
    return Activity(id, 13, p == 0 ? 2 : 1, 1, "collective ALLREDUCE over [p]", "ALLREDUCE");
  });
  EXPECT_TRUE(StatusIs(coordinator_.RunStep(id, feeds, {}, /*num_steps=*/12).status(),
                       absl::StatusCode::kDeadlineExceeded,
                       {"step 13 has run for", "processor 1 (worker 1, w1"}));
}

// Step `step` `in_step` along: processor 1 in a local op, its step thread computing at 90% of a
// core until `computes_for`; processor 0 waiting in the allreduce after it, using no CPU.
v1::WorkerActivity Computing(const std::string& session, int p, int64_t step,
                             absl::Duration in_step, absl::Duration computes_for) {
  v1::WorkerActivity a =
      p == 0 ? Activity(session, step, 3, 1, "collective ALLREDUCE over [p]", "ALLREDUCE")
             : Activity(session, step, 1, 0, "local op 'sum'", "");
  a.set_step_ms(absl::ToInt64Milliseconds(in_step));
  a.set_step_cpu_ms(p == 0 ? 1 : absl::ToInt64Milliseconds(std::min(in_step, computes_for) * 0.9));
  return a;
}

// A held step whose laggard stops computing after 0.8 s fails the 400 ms limit after that. The
// first step of a new session (no median yet: the limit is the 400 ms floor) takes 1.5 s, its
// laggard computing all along: slow, not stuck; it completes.
TEST_F(WatchdogTest, ALaggardStillComputingIsSlowNotStuck) {
  ASSERT_OK_AND_ASSIGN(v1::CreateSessionResponse s, coordinator_.CreateSession(Request()));
  const Graph g = Graph::Build(Request().graph()).value();
  const TensorMap feeds = RandomFeeds(g, 1);
  std::string id = s.session();
  ASSERT_OK(coordinator_.RunStep(id, feeds, {}).status());  // step 1
  absl::Mutex mu;
  absl::Time step_start = absl::Now();
  int64_t step = 2;
  absl::Duration computes_for = absl::Milliseconds(800);
  StartHeartbeats([&](int p) {
    absl::MutexLock lock(&mu);
    return Computing(id, p, step, absl::Now() - step_start, computes_for);
  });
  workers_.hold = true;
  absl::Time start = absl::Now();
  const absl::Status st = coordinator_.RunStep(id, feeds, {}).status();
  const absl::Duration took = absl::Now() - start;
  EXPECT_TRUE(StatusIs(st, absl::StatusCode::kDeadlineExceeded,
                       {"step 2 has run for",
                        "processor 1 (worker 1, w1, mesh coordinate (1)) "
                        "has not arrived",
                        "its step thread using 0% of a core", "last seen computing"}));
  EXPECT_GE(took, absl::Milliseconds(1200));
  EXPECT_LT(took, absl::Seconds(5));

  workers_.hold = false;
  ASSERT_OK(coordinator_.CloseSession(id));
  ASSERT_OK_AND_ASSIGN(v1::CreateSessionResponse next, coordinator_.CreateSession(Request()));
  {
    absl::MutexLock lock(&mu);
    id = next.session();
    step = 1;
    step_start = absl::Now();
    computes_for = absl::Hours(1);
  }
  workers_.step_time_ms = 1500;
  start = absl::Now();
  ASSERT_OK(coordinator_.RunStep(next.session(), feeds, {}).status());
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(1500));
  StopHeartbeats();
}

}  // namespace
}  // namespace meshrt
