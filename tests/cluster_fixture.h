// A test fixture base with one local cluster (coordinator + 4 worker daemons from this test's
// runfiles, short heartbeat and collective timeouts, checkpoints under a fresh temp directory) and
// a connected client, shared by every test of the suite. Daemon logs go to the test's undeclared
// outputs.
#ifndef MESHRT_TESTS_CLUSTER_FIXTURE_H_
#define MESHRT_TESTS_CLUSTER_FIXTURE_H_

#include <cstdlib>

#include "client/client.h"
#include "client/local_cluster.h"
#include "core/testing/test_util.h"
#include "gtest/gtest.h"

namespace meshrt {

class LocalClusterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    LocalClusterOptions o;
    o.workers = 4;
    o.coordinator_command = {"coordinator/meshrt-coordinator"};
    o.worker_command = {"worker/meshrt-worker"};
    o.coordinator_flags = {"--heartbeat_interval_ms=200", "--heartbeat_timeout_ms=2000",
                           "--collective_timeout_ms=5000"};
    if (const char* dir = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR")) o.log_dir = dir;
    checkpoint_root_ = MakeTestTempDir("checkpoints");
    o.checkpoint_root = checkpoint_root_;
    auto cluster = LocalCluster::Start(o);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = cluster->release();
    ClientOptions co = cluster_->client_options();
    auto client = Client::Connect(co);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = client->release();
  }
  static void TearDownTestSuite() {
    delete client_;
    client_ = nullptr;
    delete cluster_;
    cluster_ = nullptr;
  }

  static inline LocalCluster* cluster_ = nullptr;
  // The coordinator's and the workers' --checkpoint_root: checkpoint names are relative to it.
  static inline std::string checkpoint_root_;
  static inline Client* client_ = nullptr;
};

}  // namespace meshrt

#endif  // MESHRT_TESTS_CLUSTER_FIXTURE_H_
