#include "runtime/communicator.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/ir/slicing.h"
#include "runtime/blocked_chunks.h"
#include "util/status_macros.h"

namespace meshrt {
namespace {

// Signed overflow is undefined behaviour: int32 sums and products wrap, as on the wire.
inline float Add(float a, float b) { return a + b; }
inline int32_t Add(int32_t a, int32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
}
inline float Mul(float a, float b) { return a * b; }
inline int32_t Mul(int32_t a, int32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) * static_cast<uint32_t>(b));
}

template <typename T>
absl::Status ReduceTyped(v1::ReduceOp op, const T* in, T* acc, int64_t count) {
  switch (op) {
    case v1::REDUCE_SUM:
      for (int64_t i = 0; i < count; ++i) acc[i] = Add(acc[i], in[i]);
      return absl::OkStatus();
    case v1::REDUCE_MAX:
      for (int64_t i = 0; i < count; ++i) acc[i] = std::max(acc[i], in[i]);
      return absl::OkStatus();
    case v1::REDUCE_MIN:
      for (int64_t i = 0; i < count; ++i) acc[i] = std::min(acc[i], in[i]);
      return absl::OkStatus();
    case v1::REDUCE_PROD:
      for (int64_t i = 0; i < count; ++i) acc[i] = Mul(acc[i], in[i]);
      return absl::OkStatus();
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("invalid reduce op ", static_cast<int>(op),
                       "; use REDUCE_SUM, REDUCE_MAX, REDUCE_MIN or REDUCE_PROD"));
  }
}

}  // namespace

std::string CoordinateString(const std::vector<int64_t>& coord) {
  return absl::StrCat("(", absl::StrJoin(coord, ","), ")");
}

std::string MeshAxesString(const Mesh& mesh, const std::vector<int>& axes) {
  return absl::StrCat("[",
                      absl::StrJoin(axes, ",",
                                    [&mesh](std::string* out, int a) {
                                      if (a >= 0 && a < mesh.ndims()) {
                                        absl::StrAppend(out, mesh.dims()[a].name);
                                      } else {
                                        absl::StrAppend(out, "#", a);
                                      }
                                    }),
                      "]");
}

absl::Status NormalizeMeshAxes(const Mesh& mesh, absl::string_view collective,
                               const std::vector<int>& axes, std::vector<int>* sorted) {
  *sorted = axes;
  std::sort(sorted->begin(), sorted->end());
  for (size_t i = 0; i < sorted->size(); ++i) {
    const int a = (*sorted)[i];
    if (a < 0 || a >= mesh.ndims()) {
      return absl::InvalidArgumentError(absl::StrCat(collective, ": mesh axis ", a,
                                                     " is out of range for mesh ", mesh.ToString(),
                                                     " (", mesh.ndims(), " dims)"));
    }
    if (i > 0 && (*sorted)[i - 1] == a) {
      return absl::InvalidArgumentError(
          absl::StrCat(collective, ": mesh axis ", a, " is repeated in the group"));
    }
  }
  return absl::OkStatus();
}

absl::Status ReduceInto(v1::ReduceOp op, DType dtype, const void* in, void* acc, int64_t count) {
  if (dtype == DType::kFloat32) {
    return ReduceTyped(op, static_cast<const float*>(in), static_cast<float*>(acc), count);
  }
  return ReduceTyped(op, static_cast<const int32_t*>(in), static_cast<int32_t*>(acc), count);
}

absl::Status CheckBlocks(absl::string_view collective, const char* buffer, int64_t blocks,
                         int64_t chunk_size, const char* unit) {
  if (blocks < 1 || chunk_size < 0 || chunk_size % blocks != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        collective, ": ", buffer, " is blocked in ", blocks, " blocks, which must be at least 1 "
        "and divide the chunk of ", chunk_size, " ", unit, " (pass the product of the dims "
        "before the split or concat axis)"));
  }
  return absl::OkStatus();
}

absl::Status Communicator::AllReduceInto(const std::vector<int>& mesh_axes, v1::ReduceOp op,
                                         DType dtype, const void* in, void* out, int64_t count) {
  if (count > 0 && in != out) std::memcpy(out, in, count * DTypeSize(dtype));
  return AllReduce(mesh_axes, op, dtype, out, count);
}

namespace {

// The group size of `mesh_axes`, or InvalidArgument naming `collective`.
absl::Status GroupSizeOf(const Communicator& comm, absl::string_view collective,
                         const std::vector<int>& mesh_axes, int64_t* g) {
  std::vector<int> sorted;
  absl::Status s = NormalizeMeshAxes(comm.mesh(), collective, mesh_axes, &sorted);
  if (s.ok()) *g = comm.mesh().GroupSize(sorted);
  return s;
}

absl::Status CheckSize(absl::string_view collective, int64_t size) {
  if (size >= 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(collective, ": negative size ", size));
}

}  // namespace

absl::Status Communicator::AllToAllBlocked(const std::vector<int>& mesh_axes, const void* in,
                                           int64_t in_blocks, void* out, int64_t out_blocks,
                                           int64_t bytes_per_rank) {
  int64_t g = 1;
  RETURN_IF_ERROR(GroupSizeOf(*this, "AllToAllBlocked", mesh_axes, &g));
  RETURN_IF_ERROR(CheckSize("AllToAllBlocked", bytes_per_rank));
  RETURN_IF_ERROR(CheckBlocks("AllToAllBlocked", "the input", in_blocks, bytes_per_rank));
  RETURN_IF_ERROR(CheckBlocks("AllToAllBlocked", "the output", out_blocks, bytes_per_rank));
  const size_t total = static_cast<size_t>(g * bytes_per_rank);
  std::vector<char> packed, received;
  const void* send = in;
  if (in_blocks > 1) {
    packed.resize(total);
    PackBlocked(in, in_blocks, g, bytes_per_rank, packed.data());
    send = packed.data();
  }
  if (out_blocks > 1) received.resize(total);
  RETURN_IF_ERROR(AllToAll(mesh_axes, send, out_blocks > 1 ? received.data() : out,
                           bytes_per_rank));
  if (out_blocks > 1) UnpackBlocked(received.data(), out_blocks, g, bytes_per_rank, out);
  return absl::OkStatus();
}

absl::Status Communicator::AllGatherBlocked(const std::vector<int>& mesh_axes, const void* in,
                                            int64_t bytes, void* out, int64_t out_blocks) {
  int64_t g = 1;
  RETURN_IF_ERROR(GroupSizeOf(*this, "AllGatherBlocked", mesh_axes, &g));
  RETURN_IF_ERROR(CheckSize("AllGatherBlocked", bytes));
  RETURN_IF_ERROR(CheckBlocks("AllGatherBlocked", "the output", out_blocks, bytes));
  if (out_blocks == 1) return AllGather(mesh_axes, in, bytes, out);
  std::vector<char> gathered(static_cast<size_t>(g * bytes));
  RETURN_IF_ERROR(AllGather(mesh_axes, in, bytes, gathered.data()));
  UnpackBlocked(gathered.data(), out_blocks, g, bytes, out);
  return absl::OkStatus();
}

absl::Status Communicator::ReduceScatterBlocked(const std::vector<int>& mesh_axes,
                                                v1::ReduceOp op, DType dtype, const void* in,
                                                int64_t in_blocks, int64_t count_per_rank,
                                                void* out) {
  int64_t g = 1;
  RETURN_IF_ERROR(GroupSizeOf(*this, "ReduceScatterBlocked", mesh_axes, &g));
  RETURN_IF_ERROR(CheckSize("ReduceScatterBlocked", count_per_rank));
  const int64_t chunk = count_per_rank * DTypeSize(dtype);
  RETURN_IF_ERROR(
      CheckBlocks("ReduceScatterBlocked", "the input", in_blocks, count_per_rank, "elements"));
  if (in_blocks == 1) return ReduceScatter(mesh_axes, op, dtype, in, count_per_rank, out);
  std::vector<char> packed(static_cast<size_t>(g * chunk));
  PackBlocked(in, in_blocks, g, chunk, packed.data());
  return ReduceScatter(mesh_axes, op, dtype, packed.data(), count_per_rank, out);
}

namespace {
// `x` mod `g` in [0, g).
int PositiveMod(int64_t x, int g) { return static_cast<int>(((x % g) + g) % g); }
}  // namespace

int PermuteSource(int rank, int g, int shift, bool wrap) {
  const int64_t src = static_cast<int64_t>(rank) - shift;
  if (wrap) return PositiveMod(src, g);
  return src >= 0 && src < g ? static_cast<int>(src) : -1;
}

int PermuteTarget(int rank, int g, int shift, bool wrap) {
  const int64_t dst = static_cast<int64_t>(rank) + shift;
  if (wrap) return PositiveMod(dst, g);
  return dst >= 0 && dst < g ? static_cast<int>(dst) : -1;
}

}  // namespace meshrt
