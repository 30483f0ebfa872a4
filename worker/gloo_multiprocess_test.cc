// Two real processes (fork) on loopback rendezvousing through a FileKeyValueStore: both data
// paths of a two-rank group (same-host copies and TCP) between processes, and a peer process that
// exits abruptly. The children report through their exit codes (and stderr).
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/ir/mesh.h"
#include "gtest/gtest.h"
#include "worker/gloo_communicator.h"
#include "worker/gloo_file_kv_store.h"

namespace meshrt {
namespace {

std::string MakeTempDir() {
  char tmpl[] = "/tmp/gloo_multiprocess_test_XXXXXX";
  const char* dir = mkdtemp(tmpl);
  EXPECT_NE(dir, nullptr);
  return dir == nullptr ? "/tmp" : dir;
}

// Forks one child per rank running body(rank, communicator) -> exit code; returns the codes.
std::vector<int> RunRanks(bool same_host_copy,
                          const std::function<int(int, GlooCommunicator*)>& body) {
  const std::string dir = MakeTempDir();
  std::vector<pid_t> children;
  for (int rank = 0; rank < 2; ++rank) {
    const pid_t pid = fork();
    if (pid == 0) {
      FileKeyValueStore store(dir);
      GlooCommunicator::Options o;
      o.mesh = *Mesh::Parse("x:2");
      o.coordinate = {rank};
      o.prefix = "multiprocess";
      o.timeout = absl::Seconds(10);
      o.store = &store;
      o.same_host_copy = same_host_copy;
      absl::StatusOr<std::unique_ptr<GlooCommunicator>> comm = GlooCommunicator::Create(o);
      if (!comm.ok()) {
        fprintf(stderr, "rank %d: %s\n", rank, comm.status().ToString().c_str());
        _exit(10);
      }
      _exit(body(rank, comm->get()));
    }
    children.push_back(pid);
  }
  std::vector<int> codes;
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    codes.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status));
  }
  const std::string cleanup = absl::StrCat("rm -rf ", dir);
  EXPECT_EQ(system(cleanup.c_str()), 0);
  return codes;
}

int Report(int rank, const char* what, const absl::Status& s) {
  fprintf(stderr, "rank %d: %s: %s\n", rank, what, s.ToString().c_str());
  return 1;
}

// Every collective once, with values checked; 0 when all is well.
int CheckAll(int rank, GlooCommunicator* comm) {
  const int64_t n = 1000003;  // several 1 MiB pieces, odd split
  std::vector<float> sum(n);
  for (int64_t i = 0; i < n; ++i) sum[i] = static_cast<float>(i % 1000) * (rank + 1);
  absl::Status s = comm->AllReduce({0}, v1::REDUCE_SUM, DType::kFloat32, sum.data(), n);
  if (!s.ok()) return Report(rank, "AllReduce", s);
  for (int64_t i = 0; i < n; ++i) {
    if (sum[i] != static_cast<float>(i % 1000) * 3) return Report(rank, "AllReduce value", s);
  }
  std::vector<int32_t> in(6), gathered(12, -1), exchanged(6, -1), scattered(3, -1);
  for (int i = 0; i < 6; ++i) in[i] = 100 * rank + i;
  if (!(s = comm->AllGather({0}, in.data(), 24, gathered.data())).ok()) {
    return Report(rank, "AllGather", s);
  }
  if (!(s = comm->AllToAll({0}, in.data(), exchanged.data(), 12)).ok()) {
    return Report(rank, "AllToAll", s);
  }
  if (!(s = comm->ReduceScatter({0}, v1::REDUCE_MAX, DType::kInt32, in.data(), 3, scattered.data()))
           .ok()) {
    return Report(rank, "ReduceScatter", s);
  }
  for (int i = 0; i < 12; ++i) {
    if (gathered[i] != 100 * (i / 6) + i % 6) return Report(rank, "AllGather value", s);
  }
  for (int i = 0; i < 6; ++i) {
    if (exchanged[i] != 100 * (i / 3) + 3 * rank + i % 3) return Report(rank, "AllToAll value", s);
  }
  for (int i = 0; i < 3; ++i) {
    if (scattered[i] != 100 + 3 * rank + i) return Report(rank, "ReduceScatter value", s);
  }
  int32_t b = rank == 1 ? 77 : 0;
  if (!(s = comm->Broadcast({0}, 1, &b, sizeof(b))).ok()) return Report(rank, "Broadcast", s);
  if (b != 77) return Report(rank, "Broadcast value", s);
  if (!(s = comm->Shutdown()).ok()) return Report(rank, "Shutdown", s);
  return 0;
}

class GlooMultiProcessTest : public ::testing::TestWithParam<bool> {};

TEST_P(GlooMultiProcessTest, EveryCollectiveAcrossTwoProcesses) {
  EXPECT_EQ(RunRanks(GetParam(), CheckAll), std::vector<int>({0, 0}));
}

TEST_P(GlooMultiProcessTest, PeerProcessThatExitsIsUnavailableQuickly) {
  const std::vector<int> codes = RunRanks(GetParam(), [](int rank, GlooCommunicator* comm) {
    float v = 1;
    absl::Status s = comm->AllReduce({0}, v1::REDUCE_SUM, DType::kFloat32, &v, 1);
    if (!s.ok()) return Report(rank, "first AllReduce", s);
    if (rank == 1) _exit(0);  // gone without Shutdown or destructors, like a crash
    absl::SleepFor(absl::Milliseconds(100));
    const absl::Time start = absl::Now();
    std::vector<float> data(1 << 20, 1.0f);
    s = comm->AllReduce({0}, v1::REDUCE_SUM, DType::kFloat32, data.data(), data.size());
    const absl::Duration took = absl::Now() - start;
    if (s.code() != absl::StatusCode::kUnavailable || took > absl::Seconds(3)) {
      fprintf(stderr, "took %s\n", absl::FormatDuration(took).c_str());
      return Report(rank, "AllReduce with a dead peer", s);
    }
    return 0;
  });
  EXPECT_EQ(codes, std::vector<int>({0, 0}));
}

INSTANTIATE_TEST_SUITE_P(Paths, GlooMultiProcessTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return std::string(info.param ? "SameHost" : "Tcp");
                         });

}  // namespace
}  // namespace meshrt
