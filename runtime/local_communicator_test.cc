#include "runtime/local_communicator.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "util/status_macros.h"

namespace meshrt {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;


// The group of `p` over `axes`, computed directly: processors whose coordinates agree with p's off
// `axes`. Row-major numbering makes ascending processor number the rank order.
std::vector<int> GroupOf(const Mesh& mesh, const std::vector<int>& axes, int p) {
  const std::vector<int64_t> mine = mesh.Coordinate(p);
  std::vector<int> group;
  for (int q = 0; q < mesh.num_processors(); ++q) {
    const std::vector<int64_t> c = mesh.Coordinate(q);
    bool same = true;
    for (int d = 0; d < mesh.ndims(); ++d) {
      const bool in_group = std::find(axes.begin(), axes.end(), d) != axes.end();
      if (!in_group && c[d] != mine[d]) same = false;
    }
    if (same) group.push_back(q);
  }
  return group;
}

int IndexOf(const std::vector<int>& v, int x) {
  return static_cast<int>(std::find(v.begin(), v.end(), x) - v.begin());
}

// Every collective over `axes`, checked against values computed from GroupOf. Returns the first
// error; EXPECTs on wrong values.
absl::Status CheckAllCollectives(const Mesh& mesh, const std::vector<int>& axes, int p,
                                 Communicator* comm) {
  const std::vector<int> group = GroupOf(mesh, axes, p);
  const int g = static_cast<int>(group.size());
  const int rank = IndexOf(group, p);
  const std::string where = absl::StrCat("processor ", p, " axes ", MeshAxesString(mesh, axes));

  // AllReduce SUM / MIN on floats, MAX / PROD on ints.
  std::vector<float> sum = {p * 10.0f + 1, p * 10.0f + 2, p * 10.0f + 3};
  std::vector<float> mn = {float(-p), float(p), 5.0f};
  std::vector<int32_t> mx = {p, -p, 7};
  std::vector<int32_t> prod = {p + 1, 2, -1};
  RETURN_IF_ERROR(comm->AllReduce(axes, v1::REDUCE_SUM, DType::kFloat32, sum.data(), 3));
  RETURN_IF_ERROR(comm->AllReduce(axes, v1::REDUCE_MIN, DType::kFloat32, mn.data(), 3));
  RETURN_IF_ERROR(comm->AllReduce(axes, v1::REDUCE_MAX, DType::kInt32, mx.data(), 3));
  RETURN_IF_ERROR(comm->AllReduce(axes, v1::REDUCE_PROD, DType::kInt32, prod.data(), 3));
  std::vector<float> want_sum(3, 0), want_mn = {1e9f, 1e9f, 1e9f};
  std::vector<int32_t> want_mx = {-1000, -1000, -1000}, want_prod = {1, 1, 1};
  for (int q : group) {
    for (int i = 0; i < 3; ++i) want_sum[i] += q * 10.0f + i + 1;
    want_mn[0] = std::min(want_mn[0], float(-q));
    want_mn[1] = std::min(want_mn[1], float(q));
    want_mn[2] = std::min(want_mn[2], 5.0f);
    want_mx[0] = std::max(want_mx[0], q);
    want_mx[1] = std::max(want_mx[1], -q);
    want_mx[2] = std::max(want_mx[2], 7);
    want_prod[0] *= q + 1;
    want_prod[1] *= 2;
    want_prod[2] *= -1;
  }
  EXPECT_THAT(sum, ElementsAreArray(want_sum)) << where;
  EXPECT_THAT(mn, ElementsAreArray(want_mn)) << where;
  EXPECT_THAT(mx, ElementsAreArray(want_mx)) << where;
  EXPECT_THAT(prod, ElementsAreArray(want_prod)) << where;

  // AllGather: two ints each, in rank order.
  const std::vector<int32_t> mine = {p, 100 + p};
  std::vector<int32_t> gathered(2 * g, -1), want_gathered;
  RETURN_IF_ERROR(comm->AllGather(axes, mine.data(), 8, gathered.data()));
  for (int q : group) want_gathered.insert(want_gathered.end(), {q, 100 + q});
  EXPECT_THAT(gathered, ElementsAreArray(want_gathered)) << where;

  // AllToAll: chunk k of p's input is {1000 p + 10 k, 1000 p + 10 k + 1}.
  std::vector<int32_t> send, recv(2 * g, -1), want_recv;
  for (int k = 0; k < g; ++k) send.insert(send.end(), {1000 * p + 10 * k, 1000 * p + 10 * k + 1});
  RETURN_IF_ERROR(comm->AllToAll(axes, send.data(), recv.data(), 8));
  for (int q : group)
    want_recv.insert(want_recv.end(), {1000 * q + 10 * rank, 1000 * q + 10 * rank + 1});
  EXPECT_THAT(recv, ElementsAreArray(want_recv)) << where;

  // ReduceScatter SUM: element i of chunk k of p's input is 100 p + 10 k + i.
  std::vector<float> rs_in, rs_out(2, -1), want_rs(2, 0);
  for (int k = 0; k < g; ++k) {
    for (int i = 0; i < 2; ++i) rs_in.push_back(100.0f * p + 10 * k + i);
  }
  RETURN_IF_ERROR(
      comm->ReduceScatter(axes, v1::REDUCE_SUM, DType::kFloat32, rs_in.data(), 2, rs_out.data()));
  for (int q : group) {
    for (int i = 0; i < 2; ++i) want_rs[i] += 100.0f * q + 10 * rank + i;
  }
  EXPECT_THAT(rs_out, ElementsAreArray(want_rs)) << where;

  // Broadcast from the last rank.
  int32_t value = p;
  RETURN_IF_ERROR(comm->Broadcast(axes, g - 1, &value, sizeof(value)));
  EXPECT_EQ(value, group[g - 1]) << where;

  return comm->Barrier(axes);
}

class CollectivesTest : public ::testing::TestWithParam<std::string> {};

TEST_P(CollectivesTest, EveryCollectiveOnEveryGroup) {
  const Mesh mesh = *Mesh::Parse(GetParam());
  LocalCollectiveHub hub(mesh, {absl::Seconds(10)});
  // Every subset of mesh axes, one after another on each processor: processors move on at their
  // own pace, so rounds of different groups overlap in time.
  std::vector<std::vector<int>> subsets;
  for (int bits = 0; bits < (1 << mesh.ndims()); ++bits) {
    std::vector<int> axes;
    for (int d = 0; d < mesh.ndims(); ++d) {
      if (bits & (1 << d)) axes.push_back(d);
    }
    subsets.push_back(axes);
  }
  std::vector<absl::Status> statuses = hub.RunOnAll([&](int p, Communicator* comm) {
    EXPECT_EQ(comm->coordinate(), mesh.Coordinate(p));
    for (const std::vector<int>& axes : subsets) {
      RETURN_IF_ERROR(CheckAllCollectives(mesh, axes, p, comm));
    }
    return absl::OkStatus();
  });
  for (int p = 0; p < mesh.num_processors(); ++p) EXPECT_TRUE(statuses[p].ok()) << statuses[p];
}

INSTANTIATE_TEST_SUITE_P(Meshes, CollectivesTest,
                         ::testing::Values("x:1", "x:2", "x:3", "x:4", "rows:2,cols:2",
                                           "rows:2,cols:3", "x:2,y:2,z:2"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name;
                           for (char c : info.param) {
                             name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           }
                           return name;
                         });

// Permute along each mesh axis with shifts from -g-1 to g+1, wrapping and zero-filling: processor
// p sends {p, 100 + p}; the expected source is computed from coordinates directly.
class PermuteTest : public ::testing::TestWithParam<std::string> {};

TEST_P(PermuteTest, EveryShiftAlongEveryAxis) {
  const Mesh mesh = *Mesh::Parse(GetParam());
  LocalCollectiveHub hub(mesh, {absl::Seconds(10)});
  std::vector<absl::Status> statuses = hub.RunOnAll([&](int p, Communicator* comm) {
    const std::vector<int64_t> coord = mesh.Coordinate(p);
    for (int axis = 0; axis < mesh.ndims(); ++axis) {
      const int g = static_cast<int>(mesh.size(axis));
      for (int shift = -g - 1; shift <= g + 1; ++shift) {
        for (bool wrap : {false, true}) {
          const int32_t mine[2] = {p, 100 + p};
          int32_t got[2] = {-7, -7};
          RETURN_IF_ERROR(comm->Permute(axis, shift, wrap, mine, got, sizeof(mine)));
          int64_t src = coord[axis] - shift;
          if (wrap) src = ((src % g) + g) % g;
          std::vector<int32_t> want = {0, 0};
          if (src >= 0 && src < g) {
            std::vector<int64_t> c = coord;
            c[axis] = src;
            const int q = mesh.ProcessorNumber(c);
            want = {q, 100 + q};
          }
          EXPECT_THAT(got, ElementsAreArray(want))
              << "processor " << p << " axis " << axis << " shift " << shift << " wrap " << wrap;
        }
      }
    }
    return absl::OkStatus();
  });
  for (int p = 0; p < mesh.num_processors(); ++p) EXPECT_TRUE(statuses[p].ok()) << statuses[p];
}

INSTANTIATE_TEST_SUITE_P(Meshes, PermuteTest,
                         ::testing::Values("x:1", "x:2", "x:3", "x:4", "rows:2,cols:3",
                                           "x:2,y:2,z:2"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name;
                           for (char c : info.param) {
                             name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           }
                           return name;
                         });

TEST(LocalCommunicatorTest, PermuteHelpers) {
  EXPECT_EQ(PermuteSource(0, 4, 1, false), -1);
  EXPECT_EQ(PermuteSource(0, 4, 1, true), 3);
  EXPECT_EQ(PermuteSource(3, 4, -1, false), -1);
  EXPECT_EQ(PermuteSource(3, 4, -5, true), 0);
  EXPECT_EQ(PermuteTarget(3, 4, 1, false), -1);
  EXPECT_EQ(PermuteTarget(3, 4, 1, true), 0);
  EXPECT_EQ(PermuteTarget(1, 4, 2, false), 3);
  EXPECT_EQ(PermuteSource(0, 1, 0, false), 0);
  EXPECT_EQ(PermuteSource(0, 1, 7, true), 0);
  EXPECT_EQ(PermuteSource(0, 1, 1, false), -1);
}

TEST(LocalCommunicatorTest, PermuteMembersThatDisagreeFail) {
  const Mesh mesh = *Mesh::Parse("x:2");
  LocalCollectiveHub hub(mesh, {absl::Seconds(10)});
  std::vector<absl::Status> statuses = hub.RunOnAll([](int p, Communicator* comm) {
    int32_t in = p, out = 0;
    return comm->Permute(0, p == 0 ? 1 : -1, false, &in, &out, 4);
  });
  for (const absl::Status& s : statuses) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("disagree"));
  }
}

TEST(LocalCommunicatorTest, PermuteMissingNeighbourTimesOut) {
  const Mesh mesh = *Mesh::Parse("x:2");
  LocalCollectiveHub hub(mesh, {absl::Milliseconds(100)});
  int32_t in = 1, out = 0;
  absl::Status s = hub.communicator(0)->Permute(0, 1, true, &in, &out, 4);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(s.message()), HasSubstr("Permute over mesh axes [x]"));
}

TEST(LocalCommunicatorTest, ConcurrentRowAndColumnCollectives) {
  // Each processor of a 2x2 mesh runs row allreduces and column allgathers from two threads at
  // once; sequence numbers per group keep the rounds apart.
  const Mesh mesh = *Mesh::Parse("rows:2,cols:2");
  LocalCollectiveHub hub(mesh, {absl::Seconds(10)});
  constexpr int kRounds = 100;
  std::vector<std::thread> threads;
  absl::Mutex mu;
  int wrong = 0;
  for (int p = 0; p < 4; ++p) {
    Communicator* comm = hub.communicator(p);
    const std::vector<int64_t> c = mesh.Coordinate(p);
    threads.emplace_back([&, comm, c, p] {
      for (int i = 0; i < kRounds; ++i) {
        int32_t v = 1000 * i + p;
        absl::Status s = comm->AllReduce({1}, v1::REDUCE_SUM, DType::kInt32, &v, 1);
        // Row r holds processors 2r and 2r+1.
        const int32_t want = 2000 * i + 4 * static_cast<int>(c[0]) + 1;
        if (!s.ok() || v != want) {
          absl::MutexLock l(&mu);
          ++wrong;
        }
      }
    });
    threads.emplace_back([&, comm, c, p] {
      for (int i = 0; i < kRounds; ++i) {
        const int32_t v = 1000 * i + p;
        int32_t out[2] = {-1, -1};
        absl::Status s = comm->AllGather({0}, &v, 4, out);
        // Column k holds processors k and k+2.
        const int k = static_cast<int>(c[1]);
        if (!s.ok() || out[0] != 1000 * i + k || out[1] != 1000 * i + k + 2) {
          absl::MutexLock l(&mu);
          ++wrong;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(wrong, 0);
}

TEST(LocalCommunicatorTest, MissingMemberTimesOut) {
  const Mesh mesh = *Mesh::Parse("rows:2,cols:2");
  LocalCollectiveHub hub(mesh, {absl::Milliseconds(200)});
  float v = 1;
  const absl::Time start = absl::Now();
  // Processor 1 = (0,1); its column partner (1,1) never arrives.
  absl::Status s = hub.communicator(1)->AllReduce({0}, v1::REDUCE_SUM, DType::kFloat32, &v, 1);
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(s.message()), HasSubstr("AllReduce over mesh axes [rows]"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("at processor (0,1)"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("missing processors (1,1)"));
  EXPECT_GE(took, absl::Milliseconds(190));
  EXPECT_LT(took, absl::Seconds(3));

  // The late member learns that the round failed instead of waiting for a partner that left.
  absl::Status late = hub.communicator(3)->AllReduce({0}, v1::REDUCE_SUM, DType::kFloat32, &v, 1);
  EXPECT_EQ(late.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(late.message()), HasSubstr("at processor (1,1)"));
}

TEST(LocalCommunicatorTest, AbortReleasesWaitersWithItsStatus) {
  const Mesh mesh = *Mesh::Parse("x:3");
  LocalCollectiveHub hub(mesh, {absl::Seconds(30)});
  std::vector<absl::Status> statuses(2);
  const absl::Time start = absl::Now();
  std::vector<std::thread> threads;
  for (int p = 0; p < 2; ++p) {
    threads.emplace_back([&, p] {
      int32_t out[3];
      const int32_t v = p;
      statuses[p] = hub.communicator(p)->AllGather({0}, &v, 4, out);
    });
  }
  absl::SleepFor(absl::Milliseconds(50));
  hub.Abort(absl::CancelledError("processor 2 failed"));
  for (std::thread& t : threads) t.join();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  for (const absl::Status& s : statuses) {
    EXPECT_EQ(s, absl::CancelledError("processor 2 failed"));
  }
  // Later calls fail at once; a second abort does not replace the first.
  hub.Abort(absl::InternalError("second"));
  EXPECT_EQ(hub.communicator(2)->Barrier({0}), absl::CancelledError("processor 2 failed"));
  EXPECT_EQ(hub.abort_status(), absl::CancelledError("processor 2 failed"));
}

TEST(LocalCommunicatorTest, MembersThatDisagreeFail) {
  const Mesh mesh = *Mesh::Parse("x:2");
  LocalCollectiveHub hub(mesh, {absl::Seconds(10)});
  std::vector<absl::Status> statuses = hub.RunOnAll([](int p, Communicator* comm) {
    std::vector<float> v(3 + p, 1.0f);
    return comm->AllReduce({0}, v1::REDUCE_SUM, DType::kFloat32, v.data(), 3 + p);
  });
  for (const absl::Status& s : statuses) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("disagree"));
  }
}

TEST(LocalCommunicatorTest, RejectsBadArguments) {
  const Mesh mesh = *Mesh::Parse("rows:2,cols:2");
  LocalCollectiveHub hub(mesh);
  Communicator* comm = hub.communicator(0);
  float v = 0;
  EXPECT_EQ(comm->AllReduce({2}, v1::REDUCE_SUM, DType::kFloat32, &v, 1).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(comm->AllReduce({0, 0}, v1::REDUCE_SUM, DType::kFloat32, &v, 1).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(comm->AllReduce({}, v1::REDUCE_INVALID, DType::kFloat32, &v, 1).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(comm->Broadcast({1}, 2, &v, 4).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(comm->AllGather({1}, &v, -4, &v).code(), absl::StatusCode::kInvalidArgument);
  float w = 0;
  EXPECT_EQ(comm->Permute(2, 1, true, &v, &w, 4).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(comm->Permute(-1, 1, true, &v, &w, 4).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(comm->Permute(0, 1, true, &v, &w, -4).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace meshrt
