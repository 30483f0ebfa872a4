#include "coordinator/coordinator_server.h"

#include <atomic>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/coordinator.grpc.pb.h"
#include "rpc/auth.h"
#include "rpc/daemon_exit.h"
#include "util/file.h"

namespace meshrt {
namespace {

class CoordinatorServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::string> dir = MakeTempDirectory("coordinator_server_test");
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = *dir;
  }

  // Loopback, a free port, credentials generated in the test's directory.
  CoordinatorServerOptions Options() const {
    CoordinatorServerOptions options;
    options.port = 0;
    options.port_file = dir_ + "/port";
    options.credentials.credentials_dir = dir_;
    return options;
  }

  // ListWorkers on `port`, with `token` as the bearer token unless it is empty.
  static grpc::Status ListWorkers(int port, const std::string& token) {
    auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                       grpc::InsecureChannelCredentials());
    auto stub = v1::Coordinator::NewStub(channel);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
    v1::ListWorkersRequest request;
    v1::ListWorkersResponse response;
    return stub->ListWorkers(&context, request, &response);
  }

  std::string dir_;
};

TEST_F(CoordinatorServerTest, StartsWithGeneratedCredentialsAndShutsDown) {
  std::atomic<bool> stop{false};
  absl::StatusOr<std::unique_ptr<CoordinatorServer>> server =
      CoordinatorServer::Start(Options(), &stop);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  ASSERT_GT(port, 0);
  absl::StatusOr<std::string> port_file = ReadFile(dir_ + "/port");
  ASSERT_TRUE(port_file.ok()) << port_file.status();
  EXPECT_EQ(*port_file, absl::StrCat(port, "\n"));

  absl::StatusOr<std::string> token =
      ReadOwnToken(GeneratedTokenPath(dir_, port, kClientTokenFile), "credentials_dir");
  ASSERT_TRUE(token.ok()) << token.status();
  grpc::Status with_token = ListWorkers(port, *token);
  EXPECT_TRUE(with_token.ok()) << with_token.error_message();
  EXPECT_EQ(ListWorkers(port, "").error_code(), grpc::StatusCode::UNAUTHENTICATED);

  EXPECT_FALSE((*server)->Wait(absl::Milliseconds(60)));  // not told to stop yet
  stop.store(true);
  EXPECT_TRUE((*server)->Wait(absl::Seconds(5)));
  const absl::Time start = absl::Now();
  (*server)->Shutdown();
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  EXPECT_FALSE(ListWorkers(port, *token).ok());
}

TEST_F(CoordinatorServerTest, BadOptionsAreUsageErrors) {
  CoordinatorServerOptions factor = Options();
  factor.coordinator.stuck_step.factor = 0.5;
  absl::Status s = CheckCoordinatorServerOptions(factor);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "--stuck_step_min_ms must be >= 0 (0 = no watchdog) and --stuck_step_factor >= 1");

  CoordinatorServerOptions kv = Options();
  kv.coordinator.kv.max_keys = 0;
  EXPECT_EQ(CheckCoordinatorServerOptions(kv).message(), "--max_kv_keys is 0; it must be >= 1");
  absl::StatusOr<std::unique_ptr<CoordinatorServer>> server = CoordinatorServer::Start(kv, nullptr);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(DaemonExitCode(server.status()), 2);

  CoordinatorServerOptions root = Options();
  root.coordinator.checkpoint_root = dir_ + "/absent";
  server = CoordinatorServer::Start(root, nullptr);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(DaemonExitCode(server.status()), 2) << server.status();

  CoordinatorServerOptions open = Options();
  open.host = "0.0.0.0";
  server = CoordinatorServer::Start(open, nullptr);
  ASSERT_FALSE(server.ok());
  EXPECT_TRUE(absl::StartsWith(server.status().message(), "meshrt-coordinator: refusing to listen"))
      << server.status();
  EXPECT_EQ(DaemonExitCode(server.status()), 2);
}

TEST(ParseSessionLeaseTest, DurationsWithUnitsAtLeastOneSecond) {
  EXPECT_EQ(*ParseSessionLease("10s"), absl::Seconds(10));
  EXPECT_EQ(*ParseSessionLease("0"), absl::ZeroDuration());
  EXPECT_EQ(ParseSessionLease("10").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseSessionLease("500ms").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace meshrt
