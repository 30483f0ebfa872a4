#include "rpc/chunk_frames.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/ir/slicing.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/wire_format_lite.h"
#include "grpc/slice.h"

namespace meshrt {
namespace {

using google::protobuf::internal::WireFormatLite;
namespace io = google::protobuf::io;

constexpr int kDataField = 5;  // TensorChunk.data

void PutVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

size_t VarintSize(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

uint32_t LengthDelimitedTag(int field) {
  return WireFormatLite::MakeTag(field, WireFormatLite::WIRETYPE_LENGTH_DELIMITED);
}

// Everything of a frame before its data bytes: the chunk field's tag and length, the chunk's
// other fields, the data field's tag and length.
std::string FramePrefix(int chunk_field, const v1::TensorChunk& meta, int64_t data_bytes) {
  const std::string body = meta.SerializeAsString();
  const uint32_t data_tag = LengthDelimitedTag(kDataField);
  const uint64_t chunk_length = body.size() + VarintSize(data_tag) +
                                VarintSize(static_cast<uint64_t>(data_bytes)) +
                                static_cast<uint64_t>(data_bytes);
  std::string prefix;
  prefix.reserve(body.size() + 24);
  PutVarint(LengthDelimitedTag(chunk_field), &prefix);
  PutVarint(chunk_length, &prefix);
  prefix += body;
  PutVarint(data_tag, &prefix);
  PutVarint(static_cast<uint64_t>(data_bytes), &prefix);
  return prefix;
}

void DropOwner(void* owner) { delete static_cast<std::shared_ptr<const void>*>(owner); }

// A slice referencing `n` bytes at `p` that holds a reference to `owner` until gRPC drops it.
grpc::Slice Referenced(const char* p, int64_t n, const std::shared_ptr<const void>& owner) {
  return grpc::Slice(const_cast<char*>(p), static_cast<size_t>(n), &DropOwner,
                     new std::shared_ptr<const void>(owner));
}

// A ZeroCopyInputStream over slices, so parsing sees the received bytes where they are.
class SliceStream : public io::ZeroCopyInputStream {
 public:
  explicit SliceStream(const std::vector<grpc::Slice>& slices) : slices_(slices) {}

  bool Next(const void** data, int* size) override {
    while (index_ < slices_.size() && offset_ == slices_[index_].size()) {
      ++index_;
      offset_ = 0;
    }
    if (index_ == slices_.size()) return false;
    const grpc::Slice& s = slices_[index_];
    // Slices are at most the message size (<= kMaxMessageBytes), far below INT_MAX.
    *data = s.begin() + offset_;
    *size = static_cast<int>(s.size() - offset_);
    offset_ = s.size();
    count_ += *size;
    return true;
  }
  void BackUp(int count) override {
    offset_ -= static_cast<size_t>(count);
    count_ -= count;
  }
  bool Skip(int count) override {
    while (count > 0) {
      const void* data;
      int size;
      if (!Next(&data, &size)) return false;
      if (size > count) {
        BackUp(size - count);
        return true;
      }
      count -= size;
    }
    return true;
  }
  int64_t ByteCount() const override { return count_; }

 private:
  const std::vector<grpc::Slice>& slices_;
  size_t index_ = 0;
  size_t offset_ = 0;
  int64_t count_ = 0;
};

// A frame split into the raw bytes of its fields other than the chunk (`top`), the raw bytes of
// the chunk's fields other than its data (`chunk`; the concatenation over repeated chunk fields,
// which protobuf parses as their merge) and the data's pieces.
struct SplitFrame {
  std::string top;
  std::string chunk;
  bool has_chunk = false;
};

bool SplitChunk(io::CodedInputStream* in, io::CodedOutputStream* chunk_out,
                std::vector<absl::string_view>* pieces) {
  uint32_t length;
  if (!in->ReadVarint32(&length)) return false;
  const io::CodedInputStream::Limit limit = in->PushLimit(static_cast<int>(length));
  while (true) {
    const uint32_t tag = in->ReadTag();
    if (tag == 0) break;
    if (tag == LengthDelimitedTag(kDataField)) {
      uint32_t n;
      if (!in->ReadVarint32(&n)) return false;
      pieces->clear();  // a repeated field: the last one wins
      while (n > 0) {
        const void* p;
        int size;
        if (!in->GetDirectBufferPointer(&p, &size)) return false;
        const uint32_t take = std::min(n, static_cast<uint32_t>(size));
        pieces->emplace_back(static_cast<const char*>(p), take);
        if (!in->Skip(static_cast<int>(take))) return false;
        n -= take;
      }
    } else if (!WireFormatLite::SkipField(in, tag, chunk_out)) {
      return false;
    }
  }
  // Ended at its limit, not on a zero tag or early at the end of the frame.
  if (!in->ConsumedEntireMessage() || in->BytesUntilLimit() != 0) return false;
  in->PopLimit(limit);
  return true;
}

bool Split(const std::vector<grpc::Slice>& slices, int chunk_field, SplitFrame* split,
           std::vector<absl::string_view>* pieces) {
  SliceStream stream(slices);
  io::CodedInputStream in(&stream);
  io::StringOutputStream top_stream(&split->top), chunk_stream(&split->chunk);
  io::CodedOutputStream top(&top_stream), chunk(&chunk_stream);
  while (true) {
    const uint32_t tag = in.ReadTag();
    if (tag == 0) break;
    if (tag == LengthDelimitedTag(chunk_field)) {
      split->has_chunk = true;
      if (!SplitChunk(&in, &chunk, pieces)) return false;
    } else if (!WireFormatLite::SkipField(&in, tag, &top)) {
      return false;
    }
  }
  return in.ConsumedEntireMessage();  // top and chunk flush into their strings on return
}

template <typename Message>
absl::Status Decode(const grpc::ByteBuffer& buffer, int chunk_field, const char* what,
                    Message* message, v1::TensorChunk* (Message::*chunk)(), FrameData* data) {
  data->slices.clear();
  data->pieces.clear();
  // An invalid (never filled) buffer is an empty message.
  const grpc::Status dumped = buffer.Valid() ? buffer.Dump(&data->slices) : grpc::Status::OK;
  if (!dumped.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the ", what, " could not be read: ", dumped.error_message()));
  }
  SplitFrame split;
  bool ok = Split(data->slices, chunk_field, &split, &data->pieces);
  ok = ok && message->ParseFromString(split.top);
  if (ok && split.has_chunk) ok = (message->*chunk)()->ParseFromString(split.chunk);
  if (!ok) {
    data->pieces.clear();
    return absl::InvalidArgumentError(absl::StrCat(
        "the ", what, " could not be decoded: it is not a valid protobuf ",
        message->GetTypeName()));
  }
  return absl::OkStatus();
}

}  // namespace

grpc::ByteBuffer EncodeMessage(const google::protobuf::MessageLite& message) {
  grpc::Slice slice(message.SerializeAsString());
  return grpc::ByteBuffer(&slice, 1);
}

bool ForEachFrame(const std::string& name, const FrameSource& source, int chunk_field,
                  int64_t chunk_bytes, const std::function<bool(const grpc::ByteBuffer&)>& write) {
  const TensorRegion& region = source.region;
  const int64_t total = region.bytes();
  const bool by_reference = source.owner != nullptr && region.run_bytes() >= kMinReferencedRun;
  int64_t offset = 0;
  std::vector<grpc::Slice> slices;
  do {
    const int64_t n = std::min(chunk_bytes, total - offset);
    v1::TensorChunk meta;
    meta.set_name(name);
    if (offset == 0) {
      meta.set_dtype(DTypeToProto(region.dtype()));
      *meta.mutable_shape() = region.slice_shape().ToProto();
    }
    meta.set_offset(offset);
    meta.set_last(offset + n == total);
    slices.clear();
    slices.emplace_back(FramePrefix(chunk_field, meta, n));
    if (n > 0 && by_reference) {
      region.ForEachRun(offset, n, [&](int64_t at, int64_t, int64_t length) {
        slices.push_back(Referenced(source.whole + at, length, source.owner));
      });
    } else if (n > 0) {
      grpc_slice copy = grpc_slice_malloc(static_cast<size_t>(n));
      region.Gather(source.whole, offset, n, reinterpret_cast<char*>(GRPC_SLICE_START_PTR(copy)));
      slices.emplace_back(copy, grpc::Slice::STEAL_REF);
    }
    const grpc::ByteBuffer frame(slices.data(), slices.size());
    if (!write(frame)) return false;
    offset += n;
  } while (offset < total);
  return true;
}

absl::Status DecodeRequest(const grpc::ByteBuffer& buffer, v1::RunStepRequest* request,
                           FrameData* data) {
  return Decode(buffer, kFeedField, "RunStep request", request,
                &v1::RunStepRequest::mutable_feed, data);
}

absl::Status DecodeResponse(const grpc::ByteBuffer& buffer, v1::RunStepResponse* response,
                            FrameData* data) {
  return Decode(buffer, kFetchField, "RunStep response", response,
                &v1::RunStepResponse::mutable_fetch, data);
}

}  // namespace meshrt
