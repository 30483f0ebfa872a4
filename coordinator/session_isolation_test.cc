// One session's long call does not hold up another's: while a step of session A is held inside its
// worker call (a gate in front of the in-process workers), session B's steps, a new session, the
// listing, heartbeats, leases and closing B all complete within a bounded time.
#include <memory>
#include <map>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "client/random_feeds.h"
#include "coordinator/coordinator.h"
#include "core/ops/builder.h"
#include "core/testing/test_util.h"
#include "gtest/gtest.h"
#include "testing/cluster/in_process_workers.h"

namespace meshrt {
namespace {

v1::Graph SmallGraph() {
  GraphBuilder b;
  TensorRef x = b.Placeholder("x", Shape({{"batch", 4}, {"d_in", 8}}));
  TensorRef w = b.Placeholder("w", Shape({{"d_in", 8}, {"d_out", 4}}));
  b.MarkOutput(b.Einsum({x, w}, Shape({{"batch", 4}, {"d_out", 4}}), "y"));
  return b.proto();
}

v1::CreateSessionRequest TwoWorkerRequest() {
  v1::CreateSessionRequest r;
  *r.mutable_graph() = SmallGraph();
  Mesh m = Mesh::Parse("p:2").value();
  *r.mutable_mesh() = m.ToProto();
  *r.mutable_rules() = LayoutRules::Parse("batch:p", m).value().ToProto();
  r.set_timeout_ms(2000);
  return r;
}

// In front of InProcessWorkers: RunStep calls of a held session wait (up to a minute) until it is
// let go; `entered` is notified when the first such call arrives.
class GatedWorkers : public WorkerClientFactory {
 public:
  explicit GatedWorkers(InProcessWorkers* inner) : inner_(inner) {}

  void Hold(const std::string& session) {
    absl::MutexLock lock(&mu_);
    held_[session] = std::make_shared<absl::Notification>();
  }
  void LetGo(const std::string& session) {
    absl::MutexLock lock(&mu_);
    auto it = held_.find(session);
    if (it != held_.end() && !it->second->HasBeenNotified()) it->second->Notify();
  }
  absl::Notification entered;

  std::unique_ptr<WorkerClient> Connect(const std::string& address,
                                        const std::string& secret) override {
    return std::make_unique<Client>(this, inner_->Connect(address, secret));
  }

 private:
  class Client : public WorkerClient {
   public:
    Client(GatedWorkers* gate, std::unique_ptr<WorkerClient> inner)
        : gate_(gate), inner_(std::move(inner)) {}
    absl::Status LoadSession(const v1::SessionSpec& spec, absl::Duration timeout) override {
      return inner_->LoadSession(spec, timeout);
    }
    absl::Status RunStep(const StepRequest& request, const FeedSlices& feeds,
                         FetchTargets* fetches, absl::Duration timeout, Cancellation* cancel,
                         std::vector<v1::StepTrace>* traces) override {
      gate_->Pass(request.session);
      return inner_->RunStep(request, feeds, fetches, timeout, cancel, traces);
    }
    absl::Status CloseSession(const std::string& session, absl::Duration timeout) override {
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
    GatedWorkers* const gate_;
    const std::unique_ptr<WorkerClient> inner_;
  };

  void Pass(const std::string& session) {
    std::shared_ptr<absl::Notification> let_go;
    {
      absl::MutexLock lock(&mu_);
      auto it = held_.find(session);
      if (it == held_.end()) return;
      let_go = it->second;
      if (!entered.HasBeenNotified()) entered.Notify();
    }
    let_go->WaitForNotificationWithTimeout(absl::Minutes(1));
  }

  InProcessWorkers* const inner_;
  absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<absl::Notification>> held_ ABSL_GUARDED_BY(mu_);
};

class SessionIsolationTest : public ::testing::Test {
 protected:
  SessionIsolationTest() : gate_(&workers_), coordinator_(Options(), &gate_) {
    for (int i = 0; i < 6; ++i) {
      const std::string address = absl::StrCat("w", i);
      workers_.AddWorker(address);
      v1::RegisterWorkerRequest r;
      r.set_address(address);
      r.set_incarnation("inc-" + address);
      r.set_secret("secret-0123456789abcdef");
      EXPECT_TRUE(coordinator_.RegisterWorker(r).ok());
    }
  }

  static CoordinatorOptions Options() {
    CoordinatorOptions o;
    o.heartbeat_timeout = absl::Seconds(60);
    o.stuck_step.min = absl::ZeroDuration();  // no watchdog: the held step is held on purpose
    return o;
  }

  TensorMap Feeds() { return RandomFeeds(Graph::Build(SmallGraph()).value(), 5); }

  InProcessWorkers workers_;
  GatedWorkers gate_;
  Coordinator coordinator_;
};

TEST_F(SessionIsolationTest, AHeldStepHoldsUpNoOtherSession) {
  ASSERT_OK_AND_ASSIGN(v1::CreateSessionResponse a, coordinator_.CreateSession(TwoWorkerRequest()));
  ASSERT_OK_AND_ASSIGN(v1::CreateSessionResponse b, coordinator_.CreateSession(TwoWorkerRequest()));
  gate_.Hold(a.session());
  absl::Status a_step;
  std::thread held([&] { a_step = coordinator_.RunStep(a.session(), Feeds(), {}).status(); });
  ASSERT_TRUE(gate_.entered.WaitForNotificationWithTimeout(absl::Seconds(30)));

  // Everything another session's client, a worker or an operator does, on a thread of its own so
  // that a lock held by A's step fails the test instead of hanging it.
  absl::Notification done;
  absl::Status b_step, c_create, heartbeat, close_b;
  int listed_sessions = 0;
  int lost = -1;
  std::thread others([&] {
    b_step = coordinator_.RunStep(b.session(), Feeds(), {}).status();
    absl::StatusOr<v1::CreateSessionResponse> c = coordinator_.CreateSession(TwoWorkerRequest());
    c_create = c.status();
    listed_sessions = coordinator_.ListWorkers().session_infos_size();
    v1::HeartbeatRequest beat;
    beat.set_worker_id(0);
    beat.set_incarnation("inc-w0");
    heartbeat = coordinator_.Heartbeat(beat).status();
    lost = coordinator_.KeepAlive({a.session(), b.session()}).lost_size();
    (void)coordinator_.Snapshot();
    close_b = coordinator_.CloseSession(b.session());
    if (c.ok()) (void)coordinator_.CloseSession(c->session());
    done.Notify();
  });
  const bool in_time = done.WaitForNotificationWithTimeout(absl::Seconds(30));
  gate_.LetGo(a.session());
  others.join();
  held.join();
  ASSERT_TRUE(in_time) << "a call of another session waited for session A's held step";
  EXPECT_TRUE(b_step.ok()) << b_step;
  EXPECT_TRUE(c_create.ok()) << c_create;
  EXPECT_EQ(listed_sessions, 3);
  EXPECT_TRUE(heartbeat.ok()) << heartbeat;
  EXPECT_EQ(lost, 0);
  EXPECT_TRUE(close_b.ok()) << close_b;
  EXPECT_TRUE(a_step.ok()) << a_step;  // A's step, let go, completes
}

}  // namespace
}  // namespace meshrt
