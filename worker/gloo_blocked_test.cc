// GlooCommunicator's blocked calls and AllReduceInto (runtime/communicator.h), on the same-host
// path, PairwiseAllreduceInto, Gloo's ring and BlockedAllToAll over TCP: N processors as N threads
// of one process. The reference is Communicator's own default on the same communicator (pack, the
// plain call, unpack), which blocked_chunks_test checks against core/slicing.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/ir/slicing.h"
#include "core/ir/tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/blocked_chunks.h"
#include "runtime/kv_store.h"
#include "util/status_macros.h"
#include "worker/gloo_communicator.h"

namespace meshrt {
namespace {

using ::testing::HasSubstr;

std::string FreshPrefix() {
  static std::atomic<int> next{0};
  return absl::StrCat("blocked", next++);
}

// Runs fn(p, communicator) on one thread per processor of `mesh_text`; statuses by processor.
std::vector<absl::Status> RunMesh(const std::string& mesh_text, bool same_host_copy,
                                  const std::function<absl::Status(int, GlooCommunicator*)>& fn) {
  const Mesh mesh = *Mesh::Parse(mesh_text);
  InMemoryKeyValueStore store;
  const std::string prefix = FreshPrefix();
  std::vector<std::unique_ptr<GlooCommunicator>> comms;
  for (int p = 0; p < mesh.num_processors(); ++p) {
    GlooCommunicator::Options o;
    o.mesh = mesh;
    o.coordinate = mesh.Coordinate(p);
    o.prefix = prefix;
    o.timeout = absl::Seconds(20);
    o.store = &store;
    o.same_host_copy = same_host_copy;
    absl::StatusOr<std::unique_ptr<GlooCommunicator>> comm = GlooCommunicator::Create(o);
    EXPECT_TRUE(comm.ok()) << comm.status();
    if (!comm.ok()) return {comm.status()};
    comms.push_back(std::move(comm).value());
  }
  std::vector<absl::Status> statuses(comms.size());
  std::vector<std::thread> threads;
  for (size_t p = 0; p < comms.size(); ++p) {
    threads.emplace_back([&, p] { statuses[p] = fn(static_cast<int>(p), comms[p].get()); });
  }
  for (std::thread& t : threads) t.join();
  return statuses;
}

// Small integers (exact float sums in any order), distinct per processor and position.
Tensor Values(DType dtype, const Shape& shape, int p) {
  Tensor t = Tensor::Uninitialized(dtype, shape);
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    if (dtype == DType::kFloat32) {
      t.f32()[i] = static_cast<float>((p * 7 + i * 3) % 23 - 11);
    } else {
      t.i32()[i] = 100003 + p * 977 + static_cast<int32_t>(i % 1009);
    }
  }
  return t;
}

bool SameBytes(const std::vector<char>& a, const std::vector<char>& b) { return a == b; }

// Every blocked call over `axes` on `shape` (both dtypes, the split axis and every concat axis),
// against Communicator's defaults on the same communicator. EXPECTs; returns the first error.
absl::Status CheckBlocked(GlooCommunicator* comm, const std::vector<int>& axes, const Shape& shape,
                          int p) {
  const int64_t g = comm->mesh().GroupSize(axes);
  Communicator* base = comm;
  for (DType dtype : {DType::kFloat32, DType::kInt32}) {
    const Tensor t = Values(dtype, shape, p);
    const int64_t bytes = TensorBytes(t), chunk = bytes / g;
    for (int split = 0; split < shape.rank(); ++split) {
      if (shape.dim(split).size % g != 0) continue;
      const std::string where = absl::StrCat("processor ", p, " ", DTypeName(dtype), " ",
                                             shape.ToString(), " split ", split);
      const Shape piece = WithDimSize(shape, split, shape.dim(split).size / g);
      const int64_t in_blocks = BlocksBefore(shape, split);
      for (int concat = 0; concat < shape.rank(); ++concat) {
        const int64_t out_blocks = BlocksBefore(piece, concat);
        std::vector<char> got(bytes, 0x5a), want(bytes, 0x33);
        RETURN_IF_ERROR(
            comm->AllToAllBlocked(axes, TensorData(t), in_blocks, got.data(), out_blocks, chunk));
        RETURN_IF_ERROR(base->Communicator::AllToAllBlocked(axes, TensorData(t), in_blocks,
                                                            want.data(), out_blocks, chunk));
        EXPECT_TRUE(SameBytes(got, want)) << "AllToAllBlocked " << where << " concat " << concat;
      }
      // AllGather of this processor's piece 0 into the concatenation along `split`.
      const Tensor mine = SliceAlongAxis(t, split, g, 0);
      std::vector<char> gathered(bytes, 0x5a), gathered_want(bytes, 0x33);
      RETURN_IF_ERROR(
          comm->AllGatherBlocked(axes, TensorData(mine), chunk, gathered.data(), in_blocks));
      RETURN_IF_ERROR(base->Communicator::AllGatherBlocked(axes, TensorData(mine), chunk,
                                                           gathered_want.data(), in_blocks));
      EXPECT_TRUE(SameBytes(gathered, gathered_want)) << "AllGatherBlocked " << where;
      // ReduceScatter: sums of floats, products of ints (wrapping).
      const v1::ReduceOp op = dtype == DType::kFloat32 ? v1::REDUCE_SUM : v1::REDUCE_PROD;
      std::vector<char> reduced(chunk, 0x5a), reduced_want(chunk, 0x33);
      RETURN_IF_ERROR(comm->ReduceScatterBlocked(axes, op, dtype, TensorData(t), in_blocks,
                                                 t.num_elements() / g, reduced.data()));
      RETURN_IF_ERROR(base->Communicator::ReduceScatterBlocked(
          axes, op, dtype, TensorData(t), in_blocks, t.num_elements() / g, reduced_want.data()));
      EXPECT_TRUE(SameBytes(reduced, reduced_want)) << "ReduceScatterBlocked " << where;
    }
    // AllReduceInto equals the in-place call and leaves its input alone.
    for (v1::ReduceOp op : {v1::REDUCE_SUM, v1::REDUCE_MAX}) {
      std::vector<char> into(bytes, 0x5a), in_place(bytes);
      std::memcpy(in_place.data(), TensorData(t), bytes);
      const Tensor before = t;
      RETURN_IF_ERROR(
          comm->AllReduceInto(axes, op, dtype, TensorData(t), into.data(), t.num_elements()));
      RETURN_IF_ERROR(comm->AllReduce(axes, op, dtype, in_place.data(), t.num_elements()));
      EXPECT_TRUE(SameBytes(into, in_place))
          << "AllReduceInto processor " << p << " " << DTypeName(dtype) << " op " << op;
      EXPECT_EQ(std::memcmp(TensorData(t), TensorData(before), bytes), 0) << "input written";
    }
  }
  return comm->Barrier(axes);
}

struct BlockedCase {
  std::string mesh;
  std::vector<std::vector<int>> axis_sets;
  bool same_host_copy = true;  // false: groups of two over TCP (PairwiseAllreduceInto)
};

class GlooBlockedTest : public ::testing::TestWithParam<BlockedCase> {};

TEST_P(GlooBlockedTest, BlockedCallsEqualPackingThePlainCallAndUnpacking) {
  const BlockedCase& c = GetParam();
  // Odd sizes; 12 divides by every group size here; runs of 4 bytes up.
  const std::vector<Shape> shapes = {Shape{{"a", 3}, {"b", 12}, {"c", 5}},
                                     Shape{{"a", 5}, {"b", 12}}};
  for (absl::Status s : RunMesh(c.mesh, c.same_host_copy, [&](int p, GlooCommunicator* comm) {
         for (const std::vector<int>& axes : c.axis_sets) {
           for (const Shape& shape : shapes) RETURN_IF_ERROR(CheckBlocked(comm, axes, shape, p));
         }
         return comm->Shutdown();
       })) {
    EXPECT_TRUE(s.ok()) << s;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Meshes, GlooBlockedTest,
    ::testing::Values(BlockedCase{"x:2", {{0}}}, BlockedCase{"x:2", {{0}}, false},
                      BlockedCase{"x:3", {{0}}}, BlockedCase{"x:4", {{0}}},
                      BlockedCase{"rows:2,cols:2", {{1}, {0}, {0, 1}}},  // 2-D: pairs and all
                      BlockedCase{"rows:2,cols:3", {{1}, {0}}, false}, BlockedCase{"x:1", {{0}}}),
    [](const ::testing::TestParamInfo<BlockedCase>& info) {
      std::string name = absl::StrCat(info.param.mesh, info.param.same_host_copy ? "" : "_tcp");
      for (char& ch : name) {
        if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
      }
      return name;
    });

TEST(GlooBlockedTest, ManyRunsAndSeveralPiecesOnEveryPath) {
  // 4096 blocks of runs of 384 (g = 2) or 256 bytes (g = 3): several process_vm_readv / writev
  // batches of 1024 iovecs, chunks of 1.5 MiB or 1 MiB, two or more TCP bands of 1 MiB per chunk.
  const Shape shape{{"a", 4096}, {"b", 12}, {"c", 16}};
  for (const auto& [mesh, same_host] :
       std::vector<std::pair<std::string, bool>>{{"x:2", true}, {"x:2", false}, {"x:3", false}}) {
    for (absl::Status s : RunMesh(mesh, same_host, [&](int p, GlooCommunicator* comm) {
           const int64_t g = comm->mesh().size(0);
           const Tensor t = Values(DType::kFloat32, shape, p);
           const int64_t bytes = TensorBytes(t), chunk = bytes / g;
           std::vector<char> got(bytes), want(bytes);
           RETURN_IF_ERROR(comm->AllToAllBlocked({0}, TensorData(t), 4096, got.data(), 1, chunk));
           RETURN_IF_ERROR(comm->Communicator::AllToAllBlocked({0}, TensorData(t), 4096,
                                                               want.data(), 1, chunk));
           EXPECT_TRUE(got == want) << "AllToAllBlocked " << mesh << " same_host " << same_host;
           std::vector<char> r(chunk), rw(chunk);
           RETURN_IF_ERROR(comm->ReduceScatterBlocked({0}, v1::REDUCE_SUM, DType::kFloat32,
                                                      TensorData(t), 4096,
                                                      t.num_elements() / g, r.data()));
           RETURN_IF_ERROR(comm->Communicator::ReduceScatterBlocked(
               {0}, v1::REDUCE_SUM, DType::kFloat32, TensorData(t), 4096, t.num_elements() / g,
               rw.data()));
           EXPECT_TRUE(r == rw) << "ReduceScatterBlocked " << mesh << " same_host " << same_host;
           const Tensor mine = SliceAlongAxis(t, 1, g, 1);
           std::vector<char> ga(bytes), gw(bytes);
           RETURN_IF_ERROR(comm->AllGatherBlocked({0}, TensorData(mine), chunk, ga.data(), 4096));
           RETURN_IF_ERROR(
               comm->Communicator::AllGatherBlocked({0}, TensorData(mine), chunk, gw.data(), 4096));
           EXPECT_TRUE(ga == gw) << "AllGatherBlocked " << mesh << " same_host " << same_host;
           return comm->Shutdown();
         })) {
      EXPECT_TRUE(s.ok()) << s;
    }
  }
}

TEST(GlooBlockedTest, AllReduceOfDivisibleCountsCombinesInRankOrderInPlaceAndInto) {
  // Groups of three or more reduce-scatter then allgather: every element is combined in rank
  // order, ((x0 + x1) + x2) + ..., bit for bit, whether in place or into another buffer. Values
  // with rounding, so another order shows; counts of one element per rank and of several 1 MiB
  // pieces per rank.
  for (const auto& [mesh, axes] : std::vector<std::pair<std::string, std::vector<int>>>{
           {"x:3", {0}}, {"x:4", {0}}, {"rows:2,cols:3", {0, 1}}}) {
    for (absl::Status s : RunMesh(mesh, true, [&](int p, GlooCommunicator* comm) {
           const int64_t g = comm->mesh().GroupSize(axes);
           auto value = [](int q, int64_t i) { return 0.1f * (q + 1) + 1e-3f * (i % 97); };
           for (int64_t n : {g, g * 300007}) {
             std::vector<float> in(n), in_place(n), into(n, -1.0f), want(n);
             for (int64_t i = 0; i < n; ++i) {
               in[i] = in_place[i] = value(p, i);
               float acc = value(0, i);
               for (int q = 1; q < g; ++q) acc += value(q, i);
               want[i] = acc;
             }
             RETURN_IF_ERROR(
                 comm->AllReduce(axes, v1::REDUCE_SUM, DType::kFloat32, in_place.data(), n));
             RETURN_IF_ERROR(comm->AllReduceInto(axes, v1::REDUCE_SUM, DType::kFloat32, in.data(),
                                                 into.data(), n));
             EXPECT_TRUE(in_place == want) << mesh << " in place, n " << n << " processor " << p;
             EXPECT_TRUE(into == want) << mesh << " into, n " << n << " processor " << p;
             EXPECT_EQ(in[n - 1], value(p, n - 1)) << "the input was written";
           }
           // int32 products wrap; MAX of a value only one rank holds.
           std::vector<int32_t> prod(g * 5), mx(g * 5);
           for (int64_t i = 0; i < g * 5; ++i) {
             prod[i] = 100003 + p * 977 + static_cast<int32_t>(i);
             mx[i] = p == 1 ? 1000 : -static_cast<int32_t>(i);
           }
           RETURN_IF_ERROR(comm->AllReduce(axes, v1::REDUCE_PROD, DType::kInt32, prod.data(),
                                           prod.size()));
           std::vector<int32_t> mx_out(mx.size());
           RETURN_IF_ERROR(comm->AllReduceInto(axes, v1::REDUCE_MAX, DType::kInt32, mx.data(),
                                               mx_out.data(), mx.size()));
           for (int64_t i = 0; i < g * 5; ++i) {
             uint32_t want = 1;
             for (int q = 0; q < g; ++q) want *= static_cast<uint32_t>(100003 + q * 977 + i);
             EXPECT_EQ(prod[i], static_cast<int32_t>(want)) << mesh << " element " << i;
             EXPECT_EQ(mx_out[i], 1000) << mesh << " element " << i;
           }
           return comm->Shutdown();
         })) {
      EXPECT_TRUE(s.ok()) << s;
    }
  }
}

TEST(GlooBlockedTest, MembersThatDisagreeOnTheBlockingFailOnTheSameHostPath) {
  std::vector<absl::Status> statuses = RunMesh("x:2", true, [](int p, GlooCommunicator* comm) {
    std::vector<char> in(48), out(48);
    return comm->AllToAllBlocked({0}, in.data(), p == 0 ? 2 : 4, out.data(), 1, 24);
  });
  for (const absl::Status& s : statuses) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(s.message(), HasSubstr("every member must make the same calls"));
  }
}

TEST(GlooBlockedTest, BadBlockingIsInvalidArgumentNamingTheCall) {
  for (absl::Status s : RunMesh("x:2", true, [](int, GlooCommunicator* comm) {
         std::vector<char> in(48), out(48);
         absl::Status bad = comm->AllToAllBlocked({0}, in.data(), 5, out.data(), 1, 24);
         EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
         EXPECT_THAT(bad.message(), HasSubstr("AllToAllBlocked over mesh axes [x]"));
         EXPECT_THAT(bad.message(), HasSubstr("the input is blocked in 5 blocks"));
         bad = comm->ReduceScatterBlocked({0}, v1::REDUCE_SUM, DType::kInt32, in.data(), 4, 6,
                                          out.data());
         EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
         EXPECT_THAT(bad.message(), HasSubstr("divide the chunk of 6 elements"));
         return absl::OkStatus();
       })) {
    EXPECT_TRUE(s.ok()) << s;
  }
}

}  // namespace
}  // namespace meshrt
