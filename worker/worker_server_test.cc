#include "worker/worker_server.h"

#include <sys/stat.h>

#include <atomic>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/coordinator.grpc.pb.h"
#include "rpc/auth.h"
#include "rpc/daemon_exit.h"
#include "util/file.h"

namespace meshrt {
namespace {

// A coordinator that admits every worker as worker 7 and records what it was told.
class FakeCoordinator final : public v1::Coordinator::Service {
 public:
  grpc::Status RegisterWorker(grpc::ServerContext* context,
                              const v1::RegisterWorkerRequest* request,
                              v1::RegisterWorkerResponse* response) override {
    absl::MutexLock lock(&mu_);
    registration_ = *request;
    auto auth = context->client_metadata().find("authorization");
    if (auth != context->client_metadata().end()) {
      authorization_ = std::string(auth->second.data(), auth->second.size());
    }
    response->set_worker_id(7);
    response->set_heartbeat_interval_ms(100);
    response->set_coordinator_incarnation("fake");
    return grpc::Status::OK;
  }
  grpc::Status Heartbeat(grpc::ServerContext*, const v1::HeartbeatRequest*,
                         v1::HeartbeatResponse*) override {
    return grpc::Status::OK;
  }
  grpc::Status DeregisterWorker(grpc::ServerContext*, const v1::DeregisterWorkerRequest* request,
                                v1::DeregisterWorkerResponse*) override {
    absl::MutexLock lock(&mu_);
    deregistered_ = request->worker_id();
    return grpc::Status::OK;
  }

  v1::RegisterWorkerRequest registration() {
    absl::MutexLock lock(&mu_);
    return registration_;
  }
  std::string authorization() {
    absl::MutexLock lock(&mu_);
    return authorization_;
  }
  int deregistered() {
    absl::MutexLock lock(&mu_);
    return deregistered_;
  }

 private:
  absl::Mutex mu_;
  v1::RegisterWorkerRequest registration_ ABSL_GUARDED_BY(mu_);
  std::string authorization_ ABSL_GUARDED_BY(mu_);
  int deregistered_ ABSL_GUARDED_BY(mu_) = -1;
};

class WorkerServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&coordinator_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    absl::StatusOr<std::string> dir = MakeTempDirectory("worker_server_test");
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = *dir;
    absl::StatusOr<std::string> token = RandomToken();
    ASSERT_TRUE(token.ok());
    token_ = *token;
    token_file_ = dir_ + "/cluster.token";
    ASSERT_TRUE(WriteFileAtomically(token_file_, token_ + "\n").ok());
    ASSERT_EQ(chmod(token_file_.c_str(), 0600), 0);
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown(std::chrono::system_clock::now());
  }

  WorkerServerOptions Options() const {
    WorkerServerOptions options;
    options.coordinator = absl::StrCat("127.0.0.1:", port_);
    options.cluster_token_file = token_file_;
    options.credentials_dir = dir_;
    options.register_timeout = absl::Seconds(20);
    options.drain_timeout = absl::Seconds(2);
    options.rank = 3;
    return options;
  }

  FakeCoordinator coordinator_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::string dir_;
  std::string token_;
  std::string token_file_;
};

TEST_F(WorkerServerTest, StartsRegistersAndShutsDownOnLoopback) {
  std::atomic<bool> stop{false};
  absl::StatusOr<std::unique_ptr<WorkerServer>> worker = WorkerServer::Start(Options(), &stop);
  ASSERT_TRUE(worker.ok()) << worker.status();
  EXPECT_EQ((*worker)->worker_id(), 7);
  EXPECT_GT((*worker)->port(), 0);
  EXPECT_EQ((*worker)->address(), absl::StrCat("127.0.0.1:", (*worker)->port()));
  const v1::RegisterWorkerRequest reg = coordinator_.registration();
  EXPECT_EQ(reg.address(), (*worker)->address());
  EXPECT_EQ(reg.gloo_address(), "127.0.0.1");
  EXPECT_EQ(reg.rank(), 3);
  EXPECT_FALSE(reg.secret().empty());
  EXPECT_EQ(coordinator_.authorization(), "Bearer " + token_);

  EXPECT_FALSE((*worker)->Wait(absl::Milliseconds(50)));  // not told to stop yet
  stop.store(true);
  EXPECT_TRUE((*worker)->Wait(absl::Seconds(5)));
  EXPECT_TRUE((*worker)->Shutdown(absl::Seconds(10)));
  EXPECT_EQ(coordinator_.deregistered(), 7);
}

TEST_F(WorkerServerTest, BadOptionsAreUsageErrors) {
  WorkerServerOptions no_coordinator = Options();
  no_coordinator.coordinator.clear();
  absl::Status s = CheckWorkerServerOptions(no_coordinator);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "--coordinator HOST:PORT is required (see --help)");
  absl::StatusOr<std::unique_ptr<WorkerServer>> worker =
      WorkerServer::Start(no_coordinator, nullptr);
  ASSERT_FALSE(worker.ok());
  EXPECT_EQ(DaemonExitCode(worker.status()), 2);

  WorkerServerOptions spin = Options();
  spin.debug_spin_seconds = -1;
  EXPECT_EQ(CheckWorkerServerOptions(spin).code(), absl::StatusCode::kInvalidArgument);

  WorkerServerOptions missing_token = Options();
  missing_token.cluster_token_file = dir_ + "/absent.token";
  worker = WorkerServer::Start(missing_token, nullptr);
  ASSERT_FALSE(worker.ok());
  EXPECT_EQ(DaemonExitCode(worker.status()), 2) << worker.status();

  WorkerServerOptions open = Options();
  open.host = "0.0.0.0";
  open.cluster_token_file.clear();
  worker = WorkerServer::Start(open, nullptr);
  ASSERT_FALSE(worker.ok());
  EXPECT_EQ(worker.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StartsWith(worker.status().message(), "meshrt-worker: refusing to listen"))
      << worker.status();
  EXPECT_EQ(DaemonExitCode(worker.status()), 2);
}

TEST_F(WorkerServerTest, ACoordinatorThatNeverAnswersIsNotAUsageError) {
  WorkerServerOptions options = Options();
  server_->Shutdown(std::chrono::system_clock::now());
  server_.reset();
  options.register_timeout = absl::Seconds(1);
  const absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<WorkerServer>> worker = WorkerServer::Start(options, nullptr);
  ASSERT_FALSE(worker.ok());
  EXPECT_TRUE(absl::StartsWith(worker.status().message(), "cannot register with coordinator "))
      << worker.status();
  EXPECT_EQ(DaemonExitCode(worker.status()), 1);
  EXPECT_LT(absl::Now() - start, absl::Seconds(15));
}

}  // namespace
}  // namespace meshrt
