#include "runtime/blocked_chunks.h"

#include <cstring>
#include <functional>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/ir/slicing.h"
#include "core/ir/tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/communicator.h"
#include "runtime/local_communicator.h"

namespace meshrt {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Distinct values in every element (and every byte of an int32), so a misplaced run shows.
Tensor Distinct(DType dtype, const Shape& shape, int salt = 0) {
  Tensor t = Tensor::Uninitialized(dtype, shape);
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    if (dtype == DType::kFloat32) {
      t.f32()[i] = static_cast<float>(i * 7 + salt) + 0.25f;
    } else {
      t.i32()[i] = static_cast<int32_t>(i * 0x01010101 + salt * 977);
    }
  }
  return t;
}

// Shapes with odd sizes; every axis of each is cut into every divisor of its size.
std::vector<Shape> OddShapes() {
  return {Shape{{"a", 6}},
          Shape{{"a", 3}, {"b", 4}},
          Shape{{"a", 5}, {"b", 6}, {"c", 3}},
          Shape{{"a", 2}, {"b", 3}, {"c", 4}, {"d", 2}},
          Shape{{"a", 7}, {"b", 2}, {"c", 16}},  // runs of 4..64 bytes
          Shape{{"a", 1}, {"b", 9}, {"c", 1}}};
}

TEST(BlockedChunksTest, BlocksBeforeIsTheProductOfTheLeadingDims) {
  const Shape s{{"a", 3}, {"b", 4}, {"c", 5}};
  EXPECT_EQ(BlocksBefore(s, 0), 1);
  EXPECT_EQ(BlocksBefore(s, 1), 3);
  EXPECT_EQ(BlocksBefore(s, 2), 12);
}

TEST(BlockedChunksTest, PackIsSplitIntoChunksAndUnpackItsInverseOnEveryAxisAndDtype) {
  for (DType dtype : {DType::kFloat32, DType::kInt32}) {
    for (const Shape& shape : OddShapes()) {
      const Tensor t = Distinct(dtype, shape);
      const int64_t bytes = TensorBytes(t);
      for (int axis = 0; axis < shape.rank(); ++axis) {
        for (int64_t parts = 1; parts <= shape.dim(axis).size; ++parts) {
          if (shape.dim(axis).size % parts != 0) continue;
          const std::string where = absl::StrCat(DTypeName(dtype), " ", shape.ToString(),
                                                 " axis ", axis, " parts ", parts);
          std::vector<char> want(bytes), packed(bytes, 0x5a), back(bytes, 0x5a);
          SplitIntoChunks(t, axis, parts, want.data());
          const int64_t blocks = BlocksBefore(shape, axis);
          PackBlocked(TensorData(t), blocks, parts, bytes / parts, packed.data());
          EXPECT_EQ(packed, want) << where;
          UnpackBlocked(want.data(), blocks, parts, bytes / parts, back.data());
          EXPECT_EQ(std::memcmp(back.data(), TensorData(t), bytes), 0) << where;
        }
      }
    }
  }
}

TEST(BlockedChunksTest, PackRangesInAnyOrderMakeTheWholePacking) {
  for (DType dtype : {DType::kFloat32, DType::kInt32}) {
    const Shape shape{{"a", 7}, {"b", 6}, {"c", 3}};  // runs of 12 bytes (parts 2) or 72 (parts 1)
    const Tensor t = Distinct(dtype, shape);
    const int64_t bytes = TensorBytes(t);
    for (int axis : {1, 2}) {
      for (int64_t parts : {int64_t{1}, int64_t{3}}) {
        const int64_t blocks = BlocksBefore(shape, axis);
        std::vector<char> want(bytes), got(bytes, 0x5a);
        SplitIntoChunks(t, axis, parts, want.data());
        // Bands of 3 blocks, last first; one band must leave the others' bytes alone.
        for (int64_t first = (blocks - 1) / 3 * 3; first >= 0; first -= 3) {
          PackBlockedRange(TensorData(t), blocks, parts, bytes / parts, first,
                           std::min<int64_t>(3, blocks - first), got.data());
          if (first > 0) {
            EXPECT_NE(got, want) << "band " << first << " wrote too much";
          }
        }
        EXPECT_EQ(got, want) << DTypeName(dtype) << " axis " << axis << " parts " << parts;
      }
    }
  }
}

TEST(BlockedChunksTest, PackHandlesManyShortRunsAcrossBands) {
  // Runs of one element over more blocks than one band of the short-run path holds.
  const Shape shape{{"rows", 40000}, {"cols", 4}};
  const Tensor t = Distinct(DType::kInt32, shape);
  const int64_t bytes = TensorBytes(t);
  std::vector<char> want(bytes), packed(bytes), back(bytes);
  SplitIntoChunks(t, 1, 4, want.data());
  PackBlocked(TensorData(t), 40000, 4, bytes / 4, packed.data());
  EXPECT_EQ(packed, want);
  UnpackBlocked(want.data(), 40000, 4, bytes / 4, back.data());
  EXPECT_EQ(std::memcmp(back.data(), TensorData(t), bytes), 0);
}

TEST(BlockedChunksTest, CopyChunkMovesAPieceBetweenSplitAndConcatLayouts) {
  // An alltoall's local step: piece k of t cut along `split` lands as piece k of u, the pieces'
  // concatenation along `concat`. Every pair of axes, both dtypes.
  for (DType dtype : {DType::kFloat32, DType::kInt32}) {
    const Shape shape{{"a", 3}, {"b", 4}, {"c", 6}};
    const Tensor t = Distinct(dtype, shape);
    const int64_t parts = 2;
    for (int split = 0; split < 3; ++split) {
      if (shape.dim(split).size % parts != 0) continue;
      const Shape piece = WithDimSize(shape, split, shape.dim(split).size / parts);
      const int64_t chunk = piece.num_elements() * DTypeSize(dtype);
      std::vector<char> pieces(parts * chunk);
      SplitIntoChunks(t, split, parts, pieces.data());
      for (int concat = 0; concat < 3; ++concat) {
        const Tensor want = ConcatChunks(pieces.data(), dtype, piece, parts, concat);
        std::vector<char> got(TensorBytes(want), 0x5a);
        for (int64_t k = 0; k < parts; ++k) {
          CopyChunk({static_cast<const char*>(TensorData(t)), BlocksBefore(shape, split), parts, k},
                    {got.data(), BlocksBefore(piece, concat), parts, k}, chunk);
        }
        EXPECT_EQ(std::memcmp(got.data(), TensorData(want), got.size()), 0)
            << DTypeName(dtype) << " split " << split << " concat " << concat;
      }
    }
  }
}

TEST(BlockedChunksTest, CopyChunkMergesRunsThatDoNotDivideEachOther) {
  // A chunk of 12 bytes as 2 runs of 6 (chunk 1 of 2) into 3 runs of 4 (chunk 0 of 3).
  std::vector<char> src(24);
  std::iota(src.begin(), src.end(), 0);
  std::vector<char> dst(36, -1);
  CopyChunk({src.data(), 2, 2, 1}, {dst.data(), 3, 3, 0}, 12);
  // Chunk 1 of src is bytes 6..11 and 18..23; dst's chunk 0 is runs at 0, 12 and 24.
  const std::vector<char> want = {6, 7, 8, 9, -1, -1, -1, -1, -1, -1, -1, -1,
                                  10, 11, 18, 19, -1, -1, -1, -1, -1, -1, -1, -1,
                                  20, 21, 22, 23, -1, -1, -1, -1, -1, -1, -1, -1};
  EXPECT_EQ(dst, want);
}


TEST(BlockedCollectivesTest, DefaultsEqualPackingThePlainCallAndUnpackingOnA2DMesh) {
  // Mesh 2x3; groups over the columns (g = 3) and the rows (g = 2). Each processor's tensor
  // [4, 6, 5] (distinct per processor) is cut along axis 1 and the received pieces concatenated
  // along axis 2: the blocked calls must equal the plain calls on packed buffers.
  const Mesh mesh = *Mesh::Parse("r:2,c:3");
  const Shape shape{{"a", 4}, {"b", 6}, {"c", 5}};
  for (DType dtype : {DType::kFloat32, DType::kInt32}) {
    for (const std::vector<int>& axes : {std::vector<int>{1}, std::vector<int>{0}}) {
      LocalCollectiveHub hub(mesh);
      const int64_t g = mesh.GroupSize(axes);
      const std::vector<absl::Status> statuses = hub.RunOnAll([&](int p, Communicator* comm) {
        const std::string where = absl::StrCat(DTypeName(dtype), " processor ", p, " axes ",
                                               MeshAxesString(mesh, axes));
        const Tensor t = Distinct(dtype, shape, p);
        const int64_t bytes = TensorBytes(t), chunk = bytes / g;
        const Shape piece = WithDimSize(shape, 1, 6 / g);
        const int64_t in_blocks = BlocksBefore(shape, 1), out_blocks = BlocksBefore(piece, 2);
        // AllToAll: the plain call on SplitIntoChunks' packing, then ConcatChunks.
        std::vector<char> packed(bytes), plain(bytes), blocked(bytes, 0x5a);
        SplitIntoChunks(t, 1, g, packed.data());
        absl::Status s = comm->AllToAll(axes, packed.data(), plain.data(), chunk);
        if (!s.ok()) return s;
        const Tensor want = ConcatChunks(plain.data(), dtype, piece, g, 2);
        s = comm->AllToAllBlocked(axes, TensorData(t), in_blocks, blocked.data(), out_blocks,
                                  chunk);
        if (!s.ok()) return s;
        EXPECT_EQ(std::memcmp(blocked.data(), TensorData(want), bytes), 0) << "alltoall " << where;
        // AllGather of piece 0 into the concatenation along axis 1 (blocked in 4).
        const Tensor mine = SliceAlongAxis(t, 1, g, 0);
        std::vector<char> gathered(bytes), gathered_blocked(bytes, 0x5a);
        s = comm->AllGather(axes, TensorData(mine), chunk, gathered.data());
        if (!s.ok()) return s;
        const Tensor want_gather = ConcatChunks(gathered.data(), dtype, mine.shape(), g, 1);
        s = comm->AllGatherBlocked(axes, TensorData(mine), chunk, gathered_blocked.data(),
                                   in_blocks);
        if (!s.ok()) return s;
        EXPECT_EQ(std::memcmp(gathered_blocked.data(), TensorData(want_gather), bytes), 0)
            << "allgather " << where;
        // ReduceScatter (sum) of the pieces along axis 1.
        const int64_t count = t.num_elements() / g;
        std::vector<char> reduced(chunk), reduced_blocked(chunk, 0x5a);
        s = comm->ReduceScatter(axes, v1::REDUCE_SUM, dtype, packed.data(), count, reduced.data());
        if (!s.ok()) return s;
        s = comm->ReduceScatterBlocked(axes, v1::REDUCE_SUM, dtype, TensorData(t), in_blocks,
                                       count, reduced_blocked.data());
        if (!s.ok()) return s;
        EXPECT_EQ(reduced_blocked, reduced) << "reduce-scatter " << where;
        // AllReduceInto equals the in-place call and leaves `in` alone.
        std::vector<char> in_place(bytes), into(bytes, 0x5a);
        std::memcpy(in_place.data(), TensorData(t), bytes);
        s = comm->AllReduce(axes, v1::REDUCE_MAX, dtype, in_place.data(), t.num_elements());
        if (!s.ok()) return s;
        const Tensor before = t;
        s = comm->AllReduceInto(axes, v1::REDUCE_MAX, dtype, TensorData(t), into.data(),
                                t.num_elements());
        if (!s.ok()) return s;
        EXPECT_EQ(into, in_place) << "allreduce " << where;
        EXPECT_EQ(std::memcmp(TensorData(t), TensorData(before), bytes), 0) << where;
        return absl::OkStatus();
      });
      for (const absl::Status& s : statuses) EXPECT_TRUE(s.ok()) << s;
    }
  }
}

TEST(BlockedCollectivesTest, ABlockingThatDoesNotDivideTheChunkIsInvalidArgument) {
  LocalCollectiveHub hub(*Mesh::Parse("x:2"));
  Communicator* comm = hub.communicator(0);
  std::vector<char> in(24), out(24);
  absl::Status s = comm->AllToAllBlocked({0}, in.data(), 5, out.data(), 1, 12);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("AllToAllBlocked: the input is blocked in 5 blocks"));
  s = comm->AllGatherBlocked({0}, in.data(), 12, out.data(), 0);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("the output is blocked in 0 blocks"));
  s = comm->ReduceScatterBlocked({0}, v1::REDUCE_SUM, DType::kFloat32, in.data(), 5, 3,
                                 out.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("divide the chunk of 3 elements"));
  s = comm->AllToAllBlocked({3}, in.data(), 1, out.data(), 1, 12);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("mesh axis 3 is out of range"));
}

}  // namespace
}  // namespace meshrt
