// Session leases with in-process workers and a short lease: a session whose client renews nothing
// expires (its workers are freed, a step in flight ends, later calls say why), renewal keeps it,
// only the owner renews, and --session_lease=0 never expires.
#include <thread>

#include "absl/strings/match.h"
#include "client/random_feeds.h"
#include "coordinator/coordinator.h"
#include "testing/cluster/in_process_workers.h"
#include "core/ops/builder.h"
#include "core/testing/test_util.h"
#include "gtest/gtest.h"

namespace meshrt {
namespace {

v1::Graph MlpGraph() {
  GraphBuilder b;
  TensorRef x = b.Placeholder("x", Shape({{"batch", 8}, {"d_in", 16}}));
  TensorRef w = b.Placeholder("w", Shape({{"d_in", 16}, {"d_out", 8}}));
  TensorRef y = b.Relu(b.Einsum({x, w}, Shape({{"batch", 8}, {"d_out", 8}}), "h"), "y");
  b.MarkOutput(b.ReduceSum(y, {"d_out"}, "s"));
  return b.proto();
}

// On p:2 with batch:p the step has no collective: only the worker's own check of a closed
// session can stop a long one.
v1::CreateSessionRequest Request() {
  v1::CreateSessionRequest r;
  *r.mutable_graph() = MlpGraph();
  Mesh m = Mesh::Parse("p:2").value();
  *r.mutable_mesh() = m.ToProto();
  *r.mutable_rules() = LayoutRules::Parse("batch:p", m).value().ToProto();
  r.set_timeout_ms(2000);
  return r;
}

const Caller kAlice{Role::kClient, "alice"};
const Caller kBob{Role::kClient, "bob"};

class SessionLeaseTest : public ::testing::Test {
 protected:
  explicit SessionLeaseTest(absl::Duration lease = absl::Milliseconds(500))
      : coordinator_(Options(lease), &workers_) {
    for (int i = 0; i < 2; ++i) {
      const std::string address = absl::StrCat("w", i);
      workers_.AddWorker(address);
      v1::RegisterWorkerRequest r;
      r.set_address(address);
      r.set_incarnation("1");
      r.set_secret("secret-0123456789abcdef");
      EXPECT_TRUE(coordinator_.RegisterWorker(r).ok());
    }
  }

  static CoordinatorOptions Options(absl::Duration lease) {
    CoordinatorOptions o;
    o.heartbeat_timeout = absl::Seconds(60);
    o.session_lease = lease;
    o.expired_session_retention = absl::Seconds(2);
    return o;
  }

  // The session's SessionInfo as its owner sees it; state "" when it is not listed.
  v1::SessionInfo Info(const std::string& id) {
    const v1::ListWorkersResponse list = coordinator_.ListWorkers(kAlice);
    for (const v1::SessionInfo& s : list.session_infos()) {
      if (s.session() == id) return s;
    }
    return v1::SessionInfo();
  }

  // Polls until the session's state is `state`, at most `timeout`.
  bool WaitForState(const std::string& id, const std::string& state, absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    while (Info(id).state() != state) {
      if (absl::Now() > deadline) return false;
      absl::SleepFor(absl::Milliseconds(20));
    }
    return true;
  }

  int FreeWorkers() {
    int free = 0;
    const v1::ListWorkersResponse list = coordinator_.ListWorkers();
    for (const v1::WorkerInfo& w : list.workers()) free += w.session().empty();
    return free;
  }

  TensorMap Feeds() { return RandomFeeds(Graph::Build(MlpGraph()).value(), 3); }

  InProcessWorkers workers_;
  Coordinator coordinator_;
};

TEST_F(SessionLeaseTest, SilentClientLosesItsSessionAndItsWorkersAreFree) {
  ASSERT_OK_AND_ASSIGN(v1::CreateSessionResponse s, coordinator_.CreateSession(Request(), kAlice));
  EXPECT_EQ(s.lease_ms(), 500);
  ASSERT_OK(coordinator_.RunStep(s.session(), Feeds(), {}).status());
  EXPECT_EQ(Info(s.session()).state(), "ready");
  EXPECT_GE(Info(s.session()).lease_renewed_ms_ago(), 0);
  EXPECT_EQ(FreeWorkers(), 0);

  const absl::Time start = absl::Now();
  ASSERT_TRUE(WaitForState(s.session(), "expired", absl::Seconds(5)));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(400));
  const v1::SessionInfo info = Info(s.session());
  for (const std::string& part :
       {absl::StrCat("session ", s.session(), " expired"), std::string("client 'alice'"),
        std::string("was silent for"), std::string("(> --session_lease 500ms)")}) {
    EXPECT_TRUE(absl::StrContains(info.last_error(), part)) << part << " in " << info.last_error();
  }
  EXPECT_EQ(info.lease_renewed_ms_ago(), -1);
  EXPECT_EQ(FreeWorkers(), 2);

  // Later calls say why; renewing it is refused with the same reason.
  EXPECT_TRUE(StatusIs(coordinator_.RunStep(s.session(), Feeds(), {}).status(),
                       absl::StatusCode::kFailedPrecondition,
                       {absl::StrCat("session ", s.session(), " expired"), "--session_lease"}));
  const v1::KeepAliveResponse renewed = coordinator_.KeepAlive({s.session()}, kAlice);
  ASSERT_EQ(renewed.lost_size(), 1);
  EXPECT_TRUE(absl::StrContains(renewed.lost(0).reason(), "expired")) << renewed.lost(0).reason();
  EXPECT_EQ(Info(s.session()).state(), "expired");

  // The workers take the next session at once.
  ASSERT_OK_AND_ASSIGN(v1::CreateSessionResponse next,
                       coordinator_.CreateSession(Request(), kAlice));
  ASSERT_OK(coordinator_.RunStep(next.session(), Feeds(), {}).status());
  ASSERT_OK(coordinator_.CloseSession(next.session()));

  // Closing the expired one forgets it.
  ASSERT_OK(coordinator_.CloseSession(s.session()));
  EXPECT_EQ(Info(s.session()).state(), "");
  EXPECT_TRUE(StatusIs(coordinator_.RunStep(s.session(), Feeds(), {}).status(),
                       absl::StatusCode::kNotFound, {"no session"}));
}

TEST_F(SessionLeaseTest, RenewalKeepsTheSessionAndOnlyTheOwnerRenews) {
  ASSERT_OK_AND_ASSIGN(v1::CreateSessionResponse s, coordinator_.CreateSession(Request(), kAlice));
  // Four lease periods of renewals by the owner (and refused ones by another client).
  for (int i = 0; i < 20; ++i) {
    const v1::KeepAliveResponse r = coordinator_.KeepAlive({s.session()}, kAlice);
    EXPECT_EQ(r.lease_ms(), 500);
    EXPECT_EQ(r.lost_size(), 0);
    const v1::KeepAliveResponse bob = coordinator_.KeepAlive({s.session(), "s-nonexistent"}, kBob);
    ASSERT_EQ(bob.lost_size(), 2);
    EXPECT_TRUE(absl::StrContains(bob.lost(0).reason(), "belongs to another client"));
    EXPECT_TRUE(absl::StrContains(bob.lost(1).reason(), "no session 's-nonexistent'"));
    absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_EQ(Info(s.session()).state(), "ready");
  EXPECT_LT(Info(s.session()).lease_renewed_ms_ago(), 400);
  ASSERT_OK(coordinator_.RunStep(s.session(), Feeds(), {}).status());
  EXPECT_EQ(FreeWorkers(), 0);

  // Bob's renewals never counted: once Alice stops, it expires.
  const absl::Time stop = absl::Now();
  for (int i = 0; i < 10; ++i) coordinator_.KeepAlive({s.session()}, kBob);
  ASSERT_TRUE(WaitForState(s.session(), "expired", absl::Seconds(5)));
  EXPECT_GE(absl::Now() - stop, absl::Milliseconds(400));
  EXPECT_EQ(FreeWorkers(), 2);
}

TEST_F(SessionLeaseTest, StepInFlightEndsWhenTheLeaseRunsOut) {
  ASSERT_OK_AND_ASSIGN(v1::CreateSessionResponse s, coordinator_.CreateSession(Request(), kAlice));
  // A million repetitions run for minutes; the expiry must end them within about a second.
  const absl::Time start = absl::Now();
  absl::Status step = coordinator_.RunStep(s.session(), Feeds(), {}, 1000000).status();
  const absl::Duration took = absl::Now() - start;
  EXPECT_TRUE(StatusIs(step, absl::StatusCode::kFailedPrecondition,
                       {absl::StrCat("session ", s.session(), " expired"), "was silent for"}));
  EXPECT_LT(took, absl::Seconds(4)) << "the step ran on after its session expired";
  EXPECT_EQ(Info(s.session()).state(), "expired");
  EXPECT_EQ(FreeWorkers(), 2);
  ASSERT_OK_AND_ASSIGN(v1::CreateSessionResponse next,
                       coordinator_.CreateSession(Request(), kAlice));
  ASSERT_OK(coordinator_.RunStep(next.session(), Feeds(), {}).status());
}

TEST_F(SessionLeaseTest, FailedSessionExpiresTooAndExpiredOnesAreForgotten) {
  ASSERT_OK_AND_ASSIGN(v1::CreateSessionResponse s, coordinator_.CreateSession(Request(), kAlice));
  workers_.Break("w1", absl::UnavailableError("gone"));
  EXPECT_FALSE(coordinator_.RunStep(s.session(), Feeds(), {}).ok());
  EXPECT_EQ(Info(s.session()).state(), "failed");
  ASSERT_TRUE(WaitForState(s.session(), "expired", absl::Seconds(5)));
  EXPECT_TRUE(absl::StrContains(Info(s.session()).last_error(), "it had failed before: step 1"))
      << Info(s.session()).last_error();
  // expired_session_retention (2 s) later it is gone.
  ASSERT_TRUE(WaitForState(s.session(), "", absl::Seconds(5)));
  EXPECT_TRUE(StatusIs(coordinator_.RunStep(s.session(), Feeds(), {}).status(),
                       absl::StatusCode::kNotFound, {"no session"}));
  const v1::KeepAliveResponse r = coordinator_.KeepAlive({s.session()}, kAlice);
  ASSERT_EQ(r.lost_size(), 1);
  EXPECT_TRUE(absl::StrContains(r.lost(0).reason(), "no session")) << r.lost(0).reason();
}

class NoLeaseTest : public SessionLeaseTest {
 protected:
  NoLeaseTest() : SessionLeaseTest(absl::ZeroDuration()) {}
};

TEST_F(NoLeaseTest, ZeroLeaseNeverExpires) {
  ASSERT_OK_AND_ASSIGN(v1::CreateSessionResponse s, coordinator_.CreateSession(Request(), kAlice));
  EXPECT_EQ(s.lease_ms(), 0);
  absl::SleepFor(absl::Milliseconds(1500));
  EXPECT_EQ(Info(s.session()).state(), "ready");
  EXPECT_EQ(Info(s.session()).lease_renewed_ms_ago(), -1);
  ASSERT_OK(coordinator_.RunStep(s.session(), Feeds(), {}).status());
  EXPECT_EQ(coordinator_.KeepAlive({s.session()}, kAlice).lease_ms(), 0);
}

}  // namespace
}  // namespace meshrt
