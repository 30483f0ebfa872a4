// N processors as N threads of one process, each with its own GlooCommunicator (own TCP device on
// 127.0.0.1), rendezvousing through one shared InMemoryKeyValueStore. Expected values are computed
// here from the processors' coordinates, independently of Mesh's group helpers.
#include "worker/gloo_communicator.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gloo/transport/tcp/address.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/kv_store.h"
#include "util/status_macros.h"

namespace meshrt {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;

std::string FreshPrefix() {
  static std::atomic<int> next{0};
  return absl::StrCat("test", next++);
}

// A mesh of communicators sharing one store.
class Cluster {
 public:
  explicit Cluster(const std::string& mesh_text, absl::Duration timeout = absl::Seconds(10),
                   bool same_host_copy = true, std::string prefix = FreshPrefix()) {
    mesh_ = *Mesh::Parse(mesh_text);
    for (int p = 0; p < mesh_.num_processors(); ++p) {
      GlooCommunicator::Options o;
      o.mesh = mesh_;
      o.coordinate = mesh_.Coordinate(p);
      o.hostname = "127.0.0.1";
      o.prefix = prefix;
      o.timeout = timeout;
      o.store = &store_;
      o.same_host_copy = same_host_copy;
      absl::StatusOr<std::unique_ptr<GlooCommunicator>> comm = GlooCommunicator::Create(o);
      EXPECT_TRUE(comm.ok()) << comm.status();
      comms_.push_back(std::move(comm).value());
    }
  }

  const Mesh& mesh() const { return mesh_; }
  InMemoryKeyValueStore& store() { return store_; }
  std::unique_ptr<GlooCommunicator>& comm(int p) { return comms_[p]; }

  // Runs fn(p, communicator) on one thread per processor; statuses by processor.
  std::vector<absl::Status> Run(const std::function<absl::Status(int, GlooCommunicator*)>& fn) {
    std::vector<absl::Status> statuses(comms_.size());
    std::vector<std::thread> threads;
    for (size_t p = 0; p < comms_.size(); ++p) {
      threads.emplace_back([&, p] { statuses[p] = fn(static_cast<int>(p), comms_[p].get()); });
    }
    for (std::thread& t : threads) t.join();
    return statuses;
  }

 private:
  Mesh mesh_;
  InMemoryKeyValueStore store_;
  std::vector<std::unique_ptr<GlooCommunicator>> comms_;
};

void ExpectAllOk(const std::vector<absl::Status>& statuses) {
  for (size_t p = 0; p < statuses.size(); ++p) {
    EXPECT_TRUE(statuses[p].ok()) << "processor " << p << ": " << statuses[p];
  }
}

// Processors whose coordinates equal p's outside `axes`, ascending (= rank order, row-major).
std::vector<int> GroupOf(const Mesh& mesh, const std::vector<int>& axes, int p) {
  const std::vector<int64_t> mine = mesh.Coordinate(p);
  std::vector<int> group;
  for (int q = 0; q < mesh.num_processors(); ++q) {
    const std::vector<int64_t> c = mesh.Coordinate(q);
    bool same = true;
    for (int d = 0; d < mesh.ndims(); ++d) {
      if (std::find(axes.begin(), axes.end(), d) == axes.end() && c[d] != mine[d]) same = false;
    }
    if (same) group.push_back(q);
  }
  return group;
}

int32_t WrapMul(int32_t a, int32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) * static_cast<uint32_t>(b));
}

// Test data: small integers, so float sums are exact in any order.
float F(int p, int64_t i) { return static_cast<float>((p * 7 + i * 3) % 23 - 11); }
int32_t I(int p, int64_t i) { return 100003 + p * 977 + static_cast<int32_t>(i % 5); }

// Every collective over `axes` at processor p; EXPECTs on values, returns the first error.
absl::Status CheckCollectives(const Mesh& mesh, const std::vector<int>& axes, int p,
                              Communicator* comm, int64_t n) {
  const std::vector<int> group = GroupOf(mesh, axes, p);
  const int g = static_cast<int>(group.size());
  const int rank = static_cast<int>(std::find(group.begin(), group.end(), p) - group.begin());
  const std::string where = absl::StrCat("processor ", p, " axes ", MeshAxesString(mesh, axes));

  // AllReduce: sum/min/max on floats, prod (wrapping)/max on ints.
  std::vector<float> sum(n), mn(n), mx(n);
  std::vector<int32_t> prod(n), imx(n);
  for (int64_t i = 0; i < n; ++i) {
    sum[i] = mn[i] = mx[i] = F(p, i);
    prod[i] = imx[i] = I(p, i);
  }
  RETURN_IF_ERROR(comm->AllReduce(axes, v1::REDUCE_SUM, DType::kFloat32, sum.data(), n));
  RETURN_IF_ERROR(comm->AllReduce(axes, v1::REDUCE_MIN, DType::kFloat32, mn.data(), n));
  RETURN_IF_ERROR(comm->AllReduce(axes, v1::REDUCE_MAX, DType::kFloat32, mx.data(), n));
  RETURN_IF_ERROR(comm->AllReduce(axes, v1::REDUCE_PROD, DType::kInt32, prod.data(), n));
  RETURN_IF_ERROR(comm->AllReduce(axes, v1::REDUCE_MAX, DType::kInt32, imx.data(), n));
  int bad = 0;
  for (int64_t i = 0; i < n && bad < 5; ++i) {
    float s = 0, lo = 1e9f, hi = -1e9f;
    int32_t pr = 1, ihi = INT32_MIN;
    for (int q : group) {
      s += F(q, i);
      lo = std::min(lo, F(q, i));
      hi = std::max(hi, F(q, i));
      pr = WrapMul(pr, I(q, i));
      ihi = std::max(ihi, I(q, i));
    }
    if (sum[i] != s || mn[i] != lo || mx[i] != hi || prod[i] != pr || imx[i] != ihi) {
      ADD_FAILURE() << where << " AllReduce element " << i << ": sum " << sum[i] << " want " << s
                    << ", min " << mn[i] << " want " << lo << ", max " << mx[i] << " want " << hi
                    << ", prod " << prod[i] << " want " << pr << ", imax " << imx[i] << " want "
                    << ihi;
      ++bad;
    }
  }

  // AllGather: member r's n floats at r*n.
  std::vector<float> mine(n), gathered(g * n, -99.0f);
  for (int64_t i = 0; i < n; ++i) mine[i] = F(p, i);
  RETURN_IF_ERROR(comm->AllGather(axes, mine.data(), n * sizeof(float), gathered.data()));
  for (int r = 0; r < g; ++r) {
    for (int64_t i = 0; i < n; ++i) {
      if (gathered[r * n + i] != F(group[r], i)) {
        ADD_FAILURE() << where << " AllGather rank " << r << " element " << i;
        r = g;
        break;
      }
    }
  }

  // AllToAll: chunk k of processor q holds 1000*q + k (+ offset); we receive chunk <rank>.
  const int64_t m = std::max<int64_t>(1, n / 4);
  std::vector<int32_t> send(g * m), recv(g * m, -1);
  for (int k = 0; k < g; ++k) {
    for (int64_t i = 0; i < m; ++i) send[k * m + i] = 1000 * p + 10 * k + static_cast<int>(i % 10);
  }
  RETURN_IF_ERROR(comm->AllToAll(axes, send.data(), recv.data(), m * sizeof(int32_t)));
  for (int r = 0; r < g; ++r) {
    for (int64_t i = 0; i < m; ++i) {
      if (recv[r * m + i] != 1000 * group[r] + 10 * rank + static_cast<int>(i % 10)) {
        ADD_FAILURE() << where << " AllToAll from rank " << r << " element " << i << ": "
                      << recv[r * m + i];
        r = g;
        break;
      }
    }
  }

  // ReduceScatter (sum of floats, prod of ints): chunk <rank> reduced over the group.
  std::vector<float> rs_in(g * m), rs_out(m, -1);
  std::vector<int32_t> rp_in(g * m), rp_out(m, -1);
  for (int64_t i = 0; i < g * m; ++i) {
    rs_in[i] = F(p, i);
    rp_in[i] = I(p, i);
  }
  RETURN_IF_ERROR(
      comm->ReduceScatter(axes, v1::REDUCE_SUM, DType::kFloat32, rs_in.data(), m, rs_out.data()));
  RETURN_IF_ERROR(
      comm->ReduceScatter(axes, v1::REDUCE_PROD, DType::kInt32, rp_in.data(), m, rp_out.data()));
  for (int64_t i = 0; i < m; ++i) {
    float s = 0;
    int32_t pr = 1;
    for (int q : group) {
      s += F(q, rank * m + i);
      pr = WrapMul(pr, I(q, rank * m + i));
    }
    if (rs_out[i] != s || rp_out[i] != pr) {
      ADD_FAILURE() << where << " ReduceScatter element " << i << ": " << rs_out[i] << " want " << s
                    << ", " << rp_out[i] << " want " << pr;
      break;
    }
  }

  // Broadcast from the last rank, then from rank 0.
  for (int root : {g - 1, 0}) {
    std::vector<int32_t> b(m);
    for (int64_t i = 0; i < m; ++i) b[i] = 7 * p + static_cast<int>(i);
    RETURN_IF_ERROR(comm->Broadcast(axes, root, b.data(), m * sizeof(int32_t)));
    for (int64_t i = 0; i < m; ++i) {
      if (b[i] != 7 * group[root] + i) {
        ADD_FAILURE() << where << " Broadcast from rank " << root << " element " << i;
        break;
      }
    }
  }
  // Permute along each single axis: shifts within, beyond and below the group, wrapped or not.
  if (axes.size() == 1) {
    for (int shift : {1, -1, 2, g, -3}) {
      for (bool wrap : {true, false}) {
        std::vector<int32_t> in(m), got(m, -7);
        for (int64_t i = 0; i < m; ++i) in[i] = 1000 * p + static_cast<int>(i);
        RETURN_IF_ERROR(
            comm->Permute(axes[0], shift, wrap, in.data(), got.data(), m * sizeof(int32_t)));
        int src = rank - shift;
        if (wrap) src = ((src % g) + g) % g;
        for (int64_t i = 0; i < m; ++i) {
          const int32_t want = src >= 0 && src < g ? 1000 * group[src] + i : 0;
          if (got[i] != want) {
            ADD_FAILURE() << where << " Permute shift " << shift << " wrap " << wrap << " element "
                          << i << ": " << got[i] << " want " << want;
            break;
          }
        }
      }
    }
  }
  return comm->Barrier(axes);
}

struct MeshCase {
  std::string mesh;
  std::vector<std::vector<int>> axis_sets;
  int64_t n;                   // elements per collective
  bool same_host_copy = true;  // false: groups of two go over TCP too
};

class GlooMeshTest : public ::testing::TestWithParam<MeshCase> {};

TEST_P(GlooMeshTest, EveryCollectiveOnEveryGroupMatchesDirectComputation) {
  const MeshCase& c = GetParam();
  Cluster cluster(c.mesh, absl::Seconds(10), c.same_host_copy);
  ExpectAllOk(cluster.Run([&](int p, GlooCommunicator* comm) -> absl::Status {
    for (const std::vector<int>& axes : c.axis_sets) {
      RETURN_IF_ERROR(CheckCollectives(cluster.mesh(), axes, p, comm, c.n));
    }
    return comm->Shutdown();
  }));
}

INSTANTIATE_TEST_SUITE_P(
    Meshes, GlooMeshTest,
    ::testing::Values(
        MeshCase{"x:1", {{}, {0}}, 1000},
        // Groups of two use PairwiseAllreduce; larger ones Gloo's ring, whose 1001
        // and 4099 elements give fewer segments than ranks and uneven segments.
        MeshCase{"x:2", {{0}}, 1}, MeshCase{"x:2", {{0}}, 3}, MeshCase{"x:2", {{}, {0}}, 70001},
        MeshCase{"x:2", {{0}}, 700001},   // several 1 MiB pieces per half
        MeshCase{"x:2", {{0}}, 2200001},  // ReduceScatter chunks of several 1 MiB pieces
        MeshCase{"x:2", {{0}}, 1, false}, MeshCase{"x:2", {{0}}, 70001, false},
        MeshCase{"x:2", {{0}}, 700001, false}, MeshCase{"rows:2,cols:2", {{1}, {0}}, 2003, false},
        MeshCase{"x:3", {{0}}, 1001}, MeshCase{"x:4", {{0}}, 4099},
        MeshCase{"rows:2,cols:2", {{1}, {0}, {0, 1}, {}}, 2003},
        MeshCase{"rows:2,cols:1", {{0, 1}, {1}, {0}}, 100},  // size-1 axes are ignored
        MeshCase{"a:2,b:2,c:2", {{2}, {0, 1}, {0, 1, 2}}, 64}),
    [](const ::testing::TestParamInfo<MeshCase>& info) {
      std::string name = absl::StrCat(info.param.mesh, "_n", info.param.n,
                                      info.param.same_host_copy ? "" : "_tcp");
      for (char& ch : name) {
        if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
      }
      return name;
    });

TEST(GlooCommunicatorTest, ConnectEagerlyThenRun) {
  Cluster cluster("rows:2,cols:2");
  ExpectAllOk(cluster.Run([&](int p, GlooCommunicator* comm) -> absl::Status {
    RETURN_IF_ERROR(comm->Connect({{1}, {0}, {}, {0, 1}}));
    RETURN_IF_ERROR(comm->Connect({{1}}));  // already connected: no-op
    std::vector<float> v = {1.0f * p};
    RETURN_IF_ERROR(comm->AllReduce({0, 1}, v1::REDUCE_SUM, DType::kFloat32, v.data(), 1));
    EXPECT_EQ(v[0], 6.0f);
    return comm->Shutdown();
  }));
  // Three groups per processor: rows (2 groups), cols (2 groups), whole mesh (1 group); each
  // member publishes an arrival key, a hostname key and an address key, plus its socket list in the 4-group and
  // its same-host token and verdict in the groups of two, whose mailbox name and mapping verdict
  // take two more keys per group.
  EXPECT_EQ(cluster.store().size(), 3u * 4 * 3 + 4 + 2 * 4 * 2 + 2 * 4);
}

TEST(GlooCommunicatorTest, ConcurrentRowAndColumnCollectivesFromTwoThreads) {
  Cluster cluster("rows:2,cols:2");
  constexpr int kIters = 40;
  ExpectAllOk(cluster.Run([&](int p, GlooCommunicator* comm) -> absl::Status {
    absl::Status row_status, col_status;
    auto loop = [&](int axis, absl::Status* status) {
      const std::vector<int> group = GroupOf(cluster.mesh(), {axis}, p);
      for (int it = 0; it < kIters && status->ok(); ++it) {
        std::vector<int32_t> v(5000, p + it * (axis + 1));
        *status = comm->AllReduce({axis}, v1::REDUCE_SUM, DType::kInt32, v.data(), v.size());
        const int32_t want = group[0] + group[1] + 2 * it * (axis + 1);
        if (status->ok() && (v.front() != want || v.back() != want)) {
          ADD_FAILURE() << "processor " << p << " axis " << axis << " iteration " << it;
          return;
        }
      }
    };
    std::thread rows([&] { loop(1, &row_status); });
    std::thread cols([&] { loop(0, &col_status); });
    rows.join();
    cols.join();
    RETURN_IF_ERROR(row_status);
    RETURN_IF_ERROR(col_status);
    return comm->Shutdown();
  }));
}

TEST(GlooCommunicatorTest, LocalOnlyCallsNeverTouchTheStore) {
  Cluster cluster("x:1,y:3");
  ExpectAllOk(cluster.Run([&](int p, GlooCommunicator* comm) -> absl::Status {
    float f[2] = {1, 2}, out[2] = {0, 0};
    RETURN_IF_ERROR(comm->AllReduce({0}, v1::REDUCE_PROD, DType::kFloat32, f, 2));
    RETURN_IF_ERROR(comm->AllGather({}, f, sizeof(f), out));
    EXPECT_EQ(out[1], 2.0f);
    // Zero-sized collectives on a real group are complete without communicating.
    RETURN_IF_ERROR(comm->AllReduce({1}, v1::REDUCE_SUM, DType::kFloat32, nullptr, 0));
    RETURN_IF_ERROR(comm->AllGather({1}, nullptr, 0, nullptr));
    RETURN_IF_ERROR(comm->AllToAll({0, 1}, nullptr, nullptr, 0));
    RETURN_IF_ERROR(comm->Broadcast({1}, 2, nullptr, 0));
    return absl::OkStatus();
  }));
  EXPECT_EQ(cluster.store().size(), 0u);
}

TEST(GlooCommunicatorTest, InvalidArgumentsFailAtOnce) {
  Cluster cluster("x:2");
  GlooCommunicator* comm = cluster.comm(0).get();
  float v = 1;
  EXPECT_EQ(comm->AllReduce({1}, v1::REDUCE_SUM, DType::kFloat32, &v, 1).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(comm->AllReduce({0, 0}, v1::REDUCE_SUM, DType::kFloat32, &v, 1).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(comm->AllReduce({0}, v1::REDUCE_INVALID, DType::kFloat32, &v, 1).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(comm->Broadcast({0}, 2, &v, 4).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(comm->AllGather({0}, &v, -4, &v).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(comm->AllToAll({0}, nullptr, nullptr, 8).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cluster.store().size(), 0u);
}

TEST(GlooCommunicatorTest, CreateValidatesOptions) {
  InMemoryKeyValueStore store;
  GlooCommunicator::Options o;
  o.mesh = *Mesh::Parse("x:2");
  o.coordinate = {1};
  o.prefix = "p";
  o.store = &store;
  EXPECT_TRUE(GlooCommunicator::Create(o).ok());
  auto with = [&](const std::function<void(GlooCommunicator::Options*)>& change) {
    GlooCommunicator::Options bad = o;
    change(&bad);
    return GlooCommunicator::Create(bad).status();
  };
  EXPECT_EQ(with([](auto* b) { b->store = nullptr; }).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](auto* b) { b->prefix.clear(); }).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](auto* b) { b->coordinate = {2}; }).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](auto* b) {
              b->coordinate = {0, 0};
            }).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](auto* b) { b->timeout = absl::ZeroDuration(); }).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](auto* b) { b->hostname.clear(); }).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](auto* b) { b->hostname = "no-such-host.invalid"; }).code(),
            absl::StatusCode::kUnavailable);
}

TEST(GlooCommunicatorTest, SilentPeerGivesDeadlineExceeded) {
  const absl::Duration timeout = absl::Milliseconds(500);
  for (bool same_host_copy : {true, false}) {
    SCOPED_TRACE(same_host_copy ? "same host" : "tcp");
    Cluster cluster("x:2", timeout, same_host_copy);
    ExpectAllOk(cluster.Run([](int, GlooCommunicator* comm) { return comm->Connect({{0}}); }));
    // Processor 1 never calls.
    std::vector<float> v(1000, 1.0f);
    const absl::Time start = absl::Now();
    absl::Status s =
        cluster.comm(0)->AllReduce({0}, v1::REDUCE_SUM, DType::kFloat32, v.data(), v.size());
    const absl::Duration took = absl::Now() - start;
    EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
    EXPECT_THAT(std::string(s.message()),
                HasSubstr("AllReduce over mesh axes [x] at processor (0)"));
    EXPECT_THAT(std::string(s.message()), HasSubstr("peer processor (1)"));
    EXPECT_GE(took, absl::Milliseconds(450));
    EXPECT_LT(took, timeout + absl::Seconds(2));  // bounded (slack for a loaded 2-core machine)
    // The group stays failed: the next call fails at once with the same code.
    const absl::Time again = absl::Now();
    s = cluster.comm(0)->Barrier({0});
    EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("failed earlier"));
    EXPECT_LT(absl::Now() - again, absl::Milliseconds(100));
  }
}

// A rank waiting in a collective for a late peer blocks (a condition variable over TCP, a futex on
// the same-host path): its thread accrues next to no CPU time, so the coordinator's watchdog
// (coordinator/stuck_step.h) does not mistake a wait for computing.
TEST(GlooCommunicatorTest, WaitingForALatePeerUsesNoCpu) {
  struct Case {
    const char* mesh;
    bool same_host_copy;
  };
  for (const Case& c : {Case{"x:2", true}, Case{"x:2", false}, Case{"x:3", true}}) {
    SCOPED_TRACE(absl::StrCat(c.mesh, c.same_host_copy ? "" : " tcp"));
    Cluster cluster(c.mesh, absl::Seconds(10), c.same_host_copy);
    ExpectAllOk(cluster.Run([](int, GlooCommunicator* comm) { return comm->Connect({{0}}); }));
    const int last = cluster.mesh().num_processors() - 1;
    std::vector<absl::Duration> wall(last + 1), cpu(last + 1);
    ExpectAllOk(cluster.Run([&](int p, GlooCommunicator* comm) {
      if (p == last) absl::SleepFor(absl::Milliseconds(600));  // the late one
      std::vector<float> v(1000, 1.0f);
      struct timespec before, after;
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &before);
      const absl::Time start = absl::Now();
      absl::Status s = comm->AllReduce({0}, v1::REDUCE_SUM, DType::kFloat32, v.data(), v.size());
      wall[p] = absl::Now() - start;
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &after);
      cpu[p] = absl::DurationFromTimespec(after) - absl::DurationFromTimespec(before);
      return s;
    }));
    for (int p = 0; p < last; ++p) {
      EXPECT_GE(wall[p], absl::Milliseconds(500)) << "processor " << p;
      EXPECT_LT(cpu[p], absl::Milliseconds(30)) << "processor " << p << " waited " << wall[p];
    }
  }
}

TEST(GlooCommunicatorTest, SilentMemberOfALargerGroupReleasesTheOthers) {
  const absl::Duration timeout = absl::Milliseconds(500);
  Cluster cluster("x:3", timeout);
  ExpectAllOk(cluster.Run([](int, GlooCommunicator* comm) { return comm->Connect({{0}}); }));
  std::vector<absl::Duration> took(3);
  std::vector<absl::Status> statuses = cluster.Run([&](int p, GlooCommunicator* comm) {
    if (p == 2) return absl::OkStatus();  // never calls
    std::vector<float> v(100000, 1.0f);
    const absl::Time start = absl::Now();
    absl::Status s = comm->AllReduce({0}, v1::REDUCE_SUM, DType::kFloat32, v.data(), v.size());
    took[p] = absl::Now() - start;
    return s;
  });
  for (int p : {0, 1}) {
    // Whoever times out first closes its connections, so a neighbour may see that instead.
    EXPECT_THAT(statuses[p].code(),
                AnyOf(absl::StatusCode::kDeadlineExceeded, absl::StatusCode::kUnavailable))
        << statuses[p];
    EXPECT_LT(took[p], timeout + absl::Seconds(2)) << "processor " << p;  // bounded, with slack
  }
}

// A peer that published its Gloo pair address (as a rank does inside Gloo's rendezvous) and then
// failed must not hold processor 0 in Gloo's connect, which on the listening side of a pair (the
// lower address: the fake peer's port 65535 makes processor 0 that side) waits 5x the timeout for
// the peer to connect. The members meet in the store first, so deleting the session's prefix
// (what the coordinator does when a rank's load fails) releases it at once.
TEST(GlooCommunicatorTest, PeerThatPublishedItsAddressButNeverArrivesIsReleasedByDeletion) {
  const std::string prefix = FreshPrefix();
  Cluster cluster("x:2", absl::Seconds(5), /*same_host_copy=*/true, prefix);
  ASSERT_TRUE(cluster.store().RegisterPrefix(prefix, KeyValueQuota{100, 1 << 20}).ok());
  sockaddr_storage fake{};
  auto* in = reinterpret_cast<sockaddr_in*>(&fake);
  in->sin_family = AF_INET;
  in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  in->sin_port = htons(65535);
  const std::vector<char> bytes = gloo::transport::tcp::Address(fake).bytes();
  ASSERT_TRUE(cluster.store()
                  .Set(absl::StrCat(prefix, "/x/0/1"), std::string(bytes.begin(), bytes.end()))
                  .ok());
  const absl::Time start = absl::Now();
  absl::Status s;
  std::thread t([&] { s = cluster.comm(0)->Barrier({0}); });
  absl::SleepFor(absl::Milliseconds(300));
  cluster.store().DeletePrefix(prefix);
  t.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
  EXPECT_THAT(
      std::string(s.message()),
      HasSubstr("waiting in the key-value store for the group (peer processor (1)) to arrive"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
}

TEST(GlooCommunicatorTest, MissingMemberAtRendezvousGivesDeadlineExceeded) {
  const absl::Duration timeout = absl::Milliseconds(300);
  Cluster cluster("x:2", timeout);
  const absl::Time start = absl::Now();
  absl::Status s = cluster.comm(1)->Barrier({0});
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("Barrier over mesh axes [x] at processor (1)"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("key-value store"));
  EXPECT_LT(absl::Now() - start, timeout + absl::Seconds(2));  // bounded, with slack
}

// Processor 1 dies between collectives; the others must fail fast, naming it. Groups of two use
// PairwiseAllreduce, of three Gloo's ring.
class DeadPeerTest : public ::testing::TestWithParam<std::pair<std::string, bool>> {};

TEST_P(DeadPeerTest, GivesUnavailableQuickly) {
  const absl::Duration timeout = absl::Seconds(5);
  Cluster cluster(GetParam().first, timeout, GetParam().second);
  ExpectAllOk(cluster.Run([](int p, GlooCommunicator* comm) {
    float v = 1.0f * p;
    return comm->AllReduce({0}, v1::REDUCE_SUM, DType::kFloat32, &v, 1);
  }));
  cluster.comm(1).reset();
  const int n = cluster.mesh().num_processors();
  std::vector<absl::Duration> took(n);
  std::vector<absl::Status> statuses = cluster.Run([&](int p, GlooCommunicator* comm) {
    if (comm == nullptr) return absl::OkStatus();
    std::vector<float> v(100000, 1.0f);
    const absl::Time start = absl::Now();
    absl::Status s = comm->AllReduce({0}, v1::REDUCE_SUM, DType::kFloat32, v.data(), v.size());
    took[p] = absl::Now() - start;
    return s;
  });
  for (int p = 0; p < n; ++p) {
    if (p == 1) continue;
    EXPECT_EQ(statuses[p].code(), absl::StatusCode::kUnavailable) << statuses[p];
    EXPECT_THAT(std::string(statuses[p].message()), HasSubstr("AllReduce over mesh axes [x]"));
    EXPECT_THAT(std::string(statuses[p].message()),
                AnyOf(HasSubstr("is processor (1)"), HasSubstr("peer processor (1)")));
    EXPECT_LT(took[p], timeout / 2) << "processor " << p << ": " << statuses[p];
  }
}

INSTANTIATE_TEST_SUITE_P(Meshes, DeadPeerTest,
                         ::testing::Values(std::make_pair("x:2", true),
                                           std::make_pair("x:2", false),
                                           std::make_pair("x:3", true)),
                         [](const auto& info) {
                           return info.param.first == "x:3" ? std::string("ring")
                                  : info.param.second       ? "same_host"
                                                            : "tcp_pair";
                         });

TEST(GlooCommunicatorTest, SameHostPathDetectsMembersThatDisagree) {
  Cluster cluster("x:2");
  std::vector<absl::Status> statuses = cluster.Run([](int p, GlooCommunicator* comm) {
    std::vector<char> in(8 * (p + 1), 'a'), out(2 * in.size());
    return comm->AllGather({0}, in.data(), in.size(), out.data());
  });
  for (const absl::Status& s : statuses) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("same calls"));
  }
}

TEST(GlooCommunicatorTest, ReusedPrefixIsAlreadyExists) {
  InMemoryKeyValueStore shared;
  auto make = [&](int p) {
    GlooCommunicator::Options o;
    o.mesh = *Mesh::Parse("x:2");
    o.coordinate = {p};
    o.prefix = "epoch0";
    o.timeout = absl::Seconds(30);  // session 0 must rendezvous even on a loaded machine
    o.store = &shared;
    return std::move(GlooCommunicator::Create(o)).value();
  };
  for (int session = 0; session < 2; ++session) {
    std::unique_ptr<GlooCommunicator> c0 = make(0), c1 = make(1);
    absl::Status s0, s1;
    std::thread t([&] { s1 = c1->Barrier({0}); });
    s0 = c0->Barrier({0});
    t.join();
    if (session == 0) {
      EXPECT_TRUE(s0.ok()) << s0;
      EXPECT_TRUE(s1.ok()) << s1;
    } else {
      // The second session's addresses cannot overwrite the first's.
      EXPECT_EQ(s0.code(), absl::StatusCode::kAlreadyExists) << s0;
      EXPECT_EQ(s1.code(), absl::StatusCode::kAlreadyExists) << s1;
      EXPECT_THAT(std::string(s0.message()), HasSubstr("epoch0/x/0/"));
    }
  }
}

TEST(GlooCommunicatorTest, AbortedStoreReleasesRendezvous) {
  Cluster cluster("x:2", absl::Seconds(20));
  std::thread aborter([&] {
    absl::SleepFor(absl::Milliseconds(100));
    cluster.store().Abort(absl::CancelledError("session cancelled by the coordinator"));
  });
  const absl::Time start = absl::Now();
  absl::Status s = cluster.comm(0)->Barrier({0});
  aborter.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("session cancelled by the coordinator"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST(GlooCommunicatorTest, ShutdownEndsEveryGroup) {
  Cluster cluster("rows:2,cols:2");
  ExpectAllOk(cluster.Run([](int p, GlooCommunicator* comm) -> absl::Status {
    int32_t v = p;
    RETURN_IF_ERROR(comm->AllReduce({1}, v1::REDUCE_MAX, DType::kInt32, &v, 1));
    RETURN_IF_ERROR(comm->Shutdown());
    absl::Status after = comm->AllReduce({1}, v1::REDUCE_MAX, DType::kInt32, &v, 1);
    EXPECT_EQ(after.code(), absl::StatusCode::kFailedPrecondition) << after;
    return absl::OkStatus();
  }));
}

}  // namespace
}  // namespace meshrt
