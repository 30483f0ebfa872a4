#include "rpc/chunk_frames.h"

#include <cstring>
#include <string>
#include <vector>

#include "core/ir/slicing.h"
#include "core/testing/test_util.h"
#include "gtest/gtest.h"
#include "rpc/tensor_chunks.h"
#include "rpc/test_tensors.h"

namespace meshrt {
namespace {

std::string Flatten(const grpc::ByteBuffer& b) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(b.Dump(&slices).ok());
  std::string s;
  for (const grpc::Slice& x : slices) s.append(reinterpret_cast<const char*>(x.begin()), x.size());
  return s;
}

grpc::ByteBuffer Buffer(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

// The frames of `source` as fetch messages, each decoded and added to `assembler`.
void SendTo(const std::string& name, const FrameSource& source, int64_t chunk_bytes,
            TensorAssembler* assembler, int* frames = nullptr) {
  ASSERT_TRUE(ForEachFrame(name, source, kFetchField, chunk_bytes,
                           [&](const grpc::ByteBuffer& frame) {
                             v1::RunStepResponse response;
                             FrameData data;
                             EXPECT_TRUE(DecodeResponse(frame, &response, &data).ok());
                             EXPECT_TRUE(response.has_fetch());
                             EXPECT_TRUE(assembler->Add(response.fetch(), data.pieces).ok());
                             if (frames != nullptr) ++*frames;
                             return true;
                           }));
}

// Slices of a tensor on a 2-D mesh, sent by reference and by copy in chunks whose boundaries fall
// inside elements and rows, placed into a whole tensor: the whole comes out bit for bit.
TEST(ChunkFramesTest, SlicesOnA2DMeshArriveInPlaceForEveryDtype) {
  const Shape shape({{"a", 6}, {"b", 10}, {"c", 5}});
  ASSERT_OK_AND_ASSIGN(Mesh mesh, Mesh::Parse("r:2,c:5"));
  for (DType dtype : {DType::kFloat32, DType::kInt32}) {
    // Slices of one run, of a run per row, of one element per run (copied), replicated.
    for (const TensorLayout& layout : {TensorLayout{{0, -1, -1}}, TensorLayout{{0, 1, -1}},
                                       TensorLayout{{-1, 1, -1}}, TensorLayout{{0, -1, 1}},
                                       TensorLayout{{-1, -1, -1}}}) {
      for (int64_t chunk_bytes : {int64_t{1} << 20, int64_t{13}, int64_t{30}}) {
        auto whole = std::make_shared<const Tensor>(Iota(dtype, shape));
        Tensor out(dtype, shape);
        for (int p = 0; p < mesh.num_processors(); ++p) {
          const TensorRegion region =
              TensorRegion::OfProcessor(dtype, shape, layout, mesh, mesh.Coordinate(p));
          for (bool shared : {true, false}) {
            TensorAssembler assembler;
            assembler.PlaceInto("t", static_cast<char*>(TensorData(&out)), region);
            FrameSource source{static_cast<const char*>(TensorData(*whole)), region,
                               shared ? std::shared_ptr<const void>(whole) : nullptr};
            SendTo("t", source, chunk_bytes, &assembler);
            EXPECT_TRUE(assembler.Complete("t"));
            ASSERT_OK_AND_ASSIGN(TensorMap rest, assembler.Finish());
            EXPECT_TRUE(rest.empty());
          }
        }
        EXPECT_TRUE(SameBytes(out, *whole));
        EXPECT_EQ(whole.use_count(), 1);  // every reference the frames held is gone
      }
    }
  }
}

TEST(ChunkFramesTest, ContiguousSharedSourcesAreReferencedNotCopied) {
  const Shape shape({{"a", 64}, {"b", 1024}});  // 256 KiB: four 64 KiB chunks
  auto whole = std::make_shared<const Tensor>(Iota(DType::kFloat32, shape));
  const char* base = static_cast<const char*>(TensorData(*whole));
  auto source = std::make_unique<FrameSource>(
      FrameSource{base, TensorRegion::Whole(DType::kFloat32, shape), whole});
  int frames = 0;
  ASSERT_TRUE(ForEachFrame("x", *source, kFeedField, 64 << 10, [&](const grpc::ByteBuffer& f) {
    std::vector<grpc::Slice> slices;
    EXPECT_TRUE(f.Dump(&slices).ok());
    EXPECT_EQ(slices.size(), 2u);  // the prefix, and the data where it lies in the tensor
    EXPECT_EQ(reinterpret_cast<const char*>(slices.back().begin()), base + frames * (64 << 10));
    EXPECT_EQ(whole.use_count(), 3);  // whole, source, the frame's data slice
    ++frames;
    return true;
  }));
  EXPECT_EQ(frames, 4);
  source.reset();
  EXPECT_EQ(whole.use_count(), 1);
}

// The frames are RunStepRequest / RunStepResponse bytes; messages the generated classes wrote
// decode, with fields in another order and repeated.
TEST(ChunkFramesTest, FramesAreTheProtoMessages) {
  const Tensor t = Iota(DType::kInt32, Shape({{"n", 5}}));
  FrameSource source{static_cast<const char*>(TensorData(t)),
                     TensorRegion::Whole(t.dtype(), t.shape()), nullptr};
  std::vector<std::string> wire;
  ASSERT_TRUE(ForEachFrame("w", source, kFeedField, 8, [&](const grpc::ByteBuffer& f) {
    wire.push_back(Flatten(f));
    return true;
  }));
  ASSERT_EQ(wire.size(), 3u);
  v1::RunStepRequest first, last;
  ASSERT_TRUE(first.ParseFromString(wire[0]));
  EXPECT_EQ(first.feed().name(), "w");
  EXPECT_EQ(first.feed().dtype(), v1::DT_INT32);
  EXPECT_EQ(first.feed().shape().dims(0).size(), 5);
  EXPECT_EQ(first.feed().data(), std::string(static_cast<const char*>(TensorData(t)), 8));
  EXPECT_FALSE(first.feed().last());
  ASSERT_TRUE(last.ParseFromString(wire[2]));
  EXPECT_EQ(last.feed().offset(), 16);
  EXPECT_EQ(last.feed().data().size(), 4u);
  EXPECT_TRUE(last.feed().last());

  // A generated message with the data first, then the feed field repeated (protobuf merges them,
  // the last data wins), and header fields around them.
  v1::RunStepRequest a, b;
  a.set_session("s");
  a.mutable_feed()->set_data("stale");
  b.mutable_feed()->set_name("w");
  b.mutable_feed()->set_data("fresh!");
  b.mutable_feed()->set_last(true);
  b.add_fetches("y");
  const std::string bytes = a.SerializeAsString() + b.SerializeAsString();
  v1::RunStepRequest decoded;
  FrameData data;
  ASSERT_OK(DecodeRequest(Buffer(bytes), &decoded, &data));
  EXPECT_EQ(decoded.session(), "s");
  EXPECT_EQ(decoded.fetches_size(), 1);
  EXPECT_EQ(decoded.feed().name(), "w");
  EXPECT_TRUE(decoded.feed().last());
  EXPECT_TRUE(decoded.feed().data().empty());
  std::string joined;
  for (absl::string_view piece : data.pieces) joined.append(piece.data(), piece.size());
  EXPECT_EQ(joined, "fresh!");

  // A message without a chunk; the empty message.
  v1::RunStepResponse done;
  done.set_done(true);
  done.set_step(7);
  v1::RunStepResponse got;
  ASSERT_OK(DecodeResponse(EncodeMessage(done), &got, &data));
  EXPECT_TRUE(got.done());
  EXPECT_EQ(got.step(), 7);
  EXPECT_FALSE(got.has_fetch());
  EXPECT_TRUE(data.pieces.empty());
  ASSERT_OK(DecodeResponse(grpc::ByteBuffer(), &got, &data));
  EXPECT_FALSE(got.done());
}

TEST(ChunkFramesTest, MalformedFramesAreRefusedByName) {
  const Tensor t = Iota(DType::kFloat32, Shape({{"n", 8}}));
  FrameSource source{static_cast<const char*>(TensorData(t)),
                     TensorRegion::Whole(t.dtype(), t.shape()), nullptr};
  std::string frame;
  ASSERT_TRUE(ForEachFrame("x", source, kFeedField, 1 << 20, [&](const grpc::ByteBuffer& f) {
    frame = Flatten(f);
    return true;
  }));
  v1::RunStepRequest request;
  FrameData data;
  // Cut inside the data, inside the chunk's fields, and inside the first varint.
  for (size_t keep : {frame.size() - 1, size_t{6}, size_t{1}}) {
    EXPECT_TRUE(StatusIs(DecodeRequest(Buffer(frame.substr(0, keep)), &request, &data),
                         absl::StatusCode::kInvalidArgument,
                         {"RunStep request could not be decoded", "meshrt.v1.RunStepRequest"}))
        << keep;
    EXPECT_TRUE(data.pieces.empty());
  }
  // A zero tag, an end-group tag, a field with a wrong length.
  for (const std::string& bad : {std::string("\x00\x01", 2), std::string("\x0c", 1),
                                 std::string("\x0a\x05" "ab", 4)}) {
    EXPECT_TRUE(StatusIs(DecodeRequest(Buffer(bad), &request, &data),
                         absl::StatusCode::kInvalidArgument, {"could not be decoded"}));
  }
  v1::RunStepResponse response;
  EXPECT_TRUE(StatusIs(DecodeResponse(Buffer(std::string("\x0a\x7f", 2)), &response, &data),
                       absl::StatusCode::kInvalidArgument,
                       {"RunStep response could not be decoded", "meshrt.v1.RunStepResponse"}));
}

}  // namespace
}  // namespace meshrt
