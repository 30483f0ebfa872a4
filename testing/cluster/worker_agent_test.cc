// WorkerAgent against a real Coordinator in this process (its RPCs called directly, no sockets):
// registration, heartbeats that keep the worker alive, registering again with a restarted
// coordinator, the drain (a draining heartbeat, the calls in flight, then deregistering), and a
// prompt Stop.
#include "worker/worker_agent.h"

#include <memory>

#include "absl/strings/match.h"
#include "absl/synchronization/notification.h"
#include "coordinator/coordinator.h"
#include "testing/cluster/in_process_workers.h"
#include "gtest/gtest.h"
#include "kernels/cpu_kernels.h"

namespace meshrt {
namespace {

constexpr char kAddress[] = "agent-worker";

// Forwards to a Coordinator (swappable: a restart), or fails every call with `down`; records
// the heartbeats.
class CoordinatorLink : public CoordinatorClient {
 public:
  void Point(Coordinator* c) {
    absl::MutexLock lock(&mu_);
    coordinator_ = c;
  }
  absl::StatusOr<v1::RegisterWorkerResponse> Register(const v1::RegisterWorkerRequest& r,
                                                      absl::Duration) override {
    Coordinator* c = Current();
    if (c == nullptr) return absl::UnavailableError("coordinator down");
    return c->RegisterWorker(r);
  }
  absl::StatusOr<v1::HeartbeatResponse> Heartbeat(const v1::HeartbeatRequest& r,
                                                  absl::Duration) override {
    {
      absl::MutexLock lock(&mu_);
      heartbeats_.push_back(r);
    }
    Coordinator* c = Current();
    if (c == nullptr) return absl::UnavailableError("coordinator down");
    return c->Heartbeat(r);
  }
  absl::Status Deregister(const v1::DeregisterWorkerRequest& r, absl::Duration) override {
    Coordinator* c = Current();
    if (c == nullptr) return absl::UnavailableError("coordinator down");
    return c->DeregisterWorker(r);
  }
  void set_token(const std::string&) override {}
  std::vector<v1::HeartbeatRequest> heartbeats() {
    absl::MutexLock lock(&mu_);
    return heartbeats_;
  }

 private:
  Coordinator* Current() {
    absl::MutexLock lock(&mu_);
    return coordinator_;
  }
  absl::Mutex mu_;
  Coordinator* coordinator_ = nullptr;
  std::vector<v1::HeartbeatRequest> heartbeats_;
};

CoordinatorOptions FastCoordinator() {
  CoordinatorOptions o;
  o.heartbeat_interval = absl::Milliseconds(50);
  o.heartbeat_timeout = absl::Milliseconds(400);
  return o;
}

WorkerAgentOptions FastAgent() {
  WorkerAgentOptions o;
  o.registration.set_address(kAddress);
  o.registration.set_incarnation("agent-incarnation");
  o.registration.set_secret("secret-0123456789abcdef");
  o.coordinator = "in-process";
  o.register_timeout = absl::Seconds(5);
  o.initial_backoff = absl::Milliseconds(10);
  o.max_backoff = absl::Milliseconds(50);
  o.min_heartbeat_interval = absl::Milliseconds(20);
  o.drain_timeout = absl::Seconds(3);
  return o;
}

// Whether `c` lists a live worker with `id` at kAddress.
bool Lists(Coordinator& c, int id) {
  const v1::ListWorkersResponse listed = c.ListWorkers();
  for (const v1::WorkerInfo& w : listed.workers()) {
    if (w.worker_id() == id && w.address() == kAddress) return true;
  }
  return false;
}

// Polls `done` for up to 5 s.
template <typename Fn>
bool Eventually(Fn done) {
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (!done()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return true;
}

class WorkerAgentTest : public ::testing::Test {
 protected:
  WorkerAgentTest()
      : coordinator_(std::make_unique<Coordinator>(FastCoordinator(), &workers_)),
        worker_(&CpuKernels(), &workers_) {
    workers_.AddWorker(kAddress);
    link_.Point(coordinator_.get());
  }
  ~WorkerAgentTest() override { link_.Point(nullptr); }

  InProcessWorkers workers_;
  std::unique_ptr<Coordinator> coordinator_;
  Worker worker_;
  CoordinatorLink link_;
};

TEST_F(WorkerAgentTest, RegistersAndIsReadyAndSeenAlive) {
  bool ready = false;
  WorkerAgentHooks hooks;
  hooks.set_ready = [&](bool r) { ready = r; };
  WorkerAgent agent(FastAgent(), &link_, &worker_, hooks);
  EXPECT_EQ(agent.worker_id(), -1);
  ASSERT_TRUE(agent.Start().ok());
  EXPECT_TRUE(ready);
  EXPECT_GE(agent.worker_id(), 0);
  EXPECT_TRUE(Lists(*coordinator_, agent.worker_id()));
  EXPECT_EQ(agent.heartbeat_interval(), absl::Milliseconds(50));
}

TEST_F(WorkerAgentTest, HeartbeatsKeepItAlivePastTheCoordinatorsTimeout) {
  WorkerAgent agent(FastAgent(), &link_, &worker_);
  ASSERT_TRUE(agent.Start().ok());
  absl::SleepFor(absl::Seconds(1));  // 2.5 heartbeat timeouts
  EXPECT_TRUE(Lists(*coordinator_, agent.worker_id()));
  EXPECT_GE(link_.heartbeats().size(), 5u);
  for (const v1::HeartbeatRequest& hb : link_.heartbeats()) {
    EXPECT_EQ(hb.worker_id(), agent.worker_id());
    EXPECT_EQ(hb.incarnation(), "agent-incarnation");
    EXPECT_FALSE(hb.draining());
  }
}

TEST_F(WorkerAgentTest, WithoutHeartbeatsTheCoordinatorDropsIt) {
  WorkerAgent agent(FastAgent(), &link_, &worker_);
  ASSERT_TRUE(agent.Start().ok());
  agent.Stop();
  EXPECT_TRUE(Eventually([&] { return !Lists(*coordinator_, agent.worker_id()); }));
}

TEST_F(WorkerAgentTest, RegistersAgainWithARestartedCoordinator) {
  WorkerAgent agent(FastAgent(), &link_, &worker_);
  ASSERT_TRUE(agent.Start().ok());
  auto restarted = std::make_unique<Coordinator>(FastCoordinator(), &workers_);
  link_.Point(nullptr);  // down for a moment: heartbeats fail, the agent keeps trying
  absl::SleepFor(absl::Milliseconds(150));
  link_.Point(restarted.get());
  EXPECT_TRUE(Eventually([&] { return restarted->ListWorkers().workers_size() == 1; }));
  EXPECT_TRUE(Eventually([&] { return Lists(*restarted, agent.worker_id()); }));
  agent.Stop();
  link_.Point(nullptr);
}

TEST_F(WorkerAgentTest, DrainSaysDrainingWaitsForCallsInFlightThenDeregisters) {
  std::vector<bool> ready;
  std::string state_while_draining;
  absl::Notification in_flight_done;
  WorkerAgentHooks hooks;
  hooks.set_ready = [&](bool r) { ready.push_back(r); };
  hooks.drain_calls = [&](absl::Duration timeout) {
    const ClusterSnapshot snapshot = coordinator_->Snapshot();
    for (const WorkerSnapshot& w : snapshot.workers) state_while_draining = w.state;
    return in_flight_done.WaitForNotificationWithTimeout(timeout);
  };
  WorkerAgent agent(FastAgent(), &link_, &worker_, hooks);
  ASSERT_TRUE(agent.Start().ok());
  const int id = agent.worker_id();
  std::thread work([&] {
    absl::SleepFor(absl::Milliseconds(200));
    in_flight_done.Notify();
  });
  const absl::Time start = absl::Now();
  EXPECT_TRUE(agent.Drain());
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(150));  // it waited for the work
  work.join();
  EXPECT_EQ(state_while_draining, "draining");
  EXPECT_TRUE(link_.heartbeats().back().draining());
  EXPECT_EQ(ready, (std::vector<bool>{true, false}));
  EXPECT_FALSE(Lists(*coordinator_, id));
  const size_t sent = link_.heartbeats().size();
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_EQ(link_.heartbeats().size(), sent);  // no heartbeat after the drain
}

TEST_F(WorkerAgentTest, DrainThatTimesOutSaysSoInTheReason) {
  WorkerAgentHooks hooks;
  hooks.drain_calls = [](absl::Duration) { return false; };
  WorkerAgentOptions options = FastAgent();
  options.drain_timeout = absl::Seconds(7);
  WorkerAgent agent(options, &link_, &worker_, hooks);
  ASSERT_TRUE(agent.Start().ok());
  EXPECT_FALSE(agent.Drain());
  bool found = false;
  const ClusterSnapshot snapshot = coordinator_->Snapshot();
  for (const WorkerSnapshot& w : snapshot.workers) {
    if (w.state == "lost" && absl::StrContains(w.lost_why, "--drain_timeout_s=7")) found = true;
  }
  EXPECT_TRUE(found);
}

TEST_F(WorkerAgentTest, StopIsPromptDuringALongInterval) {
  CoordinatorOptions slow = FastCoordinator();
  slow.heartbeat_interval = absl::Seconds(30);
  slow.heartbeat_timeout = absl::Seconds(60);
  Coordinator coordinator(slow, &workers_);
  link_.Point(&coordinator);
  WorkerAgent agent(FastAgent(), &link_, &worker_);
  ASSERT_TRUE(agent.Start().ok());
  absl::SleepFor(absl::Milliseconds(50));
  const absl::Time start = absl::Now();
  agent.Stop();
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(500));
  link_.Point(nullptr);
}

TEST_F(WorkerAgentTest, StartGivesUpAfterTheRegisterTimeout) {
  link_.Point(nullptr);
  WorkerAgentOptions options = FastAgent();
  options.register_timeout = absl::Milliseconds(200);
  WorkerAgent agent(options, &link_, &worker_);
  const absl::Time start = absl::Now();
  absl::Status s = agent.Start();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
}

TEST_F(WorkerAgentTest, StopEndsRegistrationRetries) {
  link_.Point(nullptr);
  WorkerAgent agent(FastAgent(), &link_, &worker_);  // would retry for 5 s
  absl::Status s;
  absl::Time returned;
  std::thread starter([&] {
    s = agent.Start();
    returned = absl::Now();
  });
  absl::SleepFor(absl::Milliseconds(100));
  const absl::Time stop = absl::Now();
  agent.Stop();
  starter.join();
  EXPECT_FALSE(s.ok());
  EXPECT_LT(returned - stop, absl::Milliseconds(500));
}

}  // namespace
}  // namespace meshrt
