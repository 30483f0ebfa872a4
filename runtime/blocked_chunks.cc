#include "runtime/blocked_chunks.h"

#include <algorithm>
#include <cstring>

namespace meshrt {
namespace {

// `count` runs of `run` bytes from src (runs `src_stride` apart) to dst (`dst_stride` apart).
// A memcpy call per run of a few bytes costs more than the copy: fixed sizes inline to moves.
template <int64_t kRun>
void CopyFixedRuns(char* dst, int64_t dst_stride, const char* src, int64_t src_stride,
                   int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    std::memcpy(dst + i * dst_stride, src + i * src_stride, kRun);
  }
}

void CopyRuns(char* dst, int64_t dst_stride, const char* src, int64_t src_stride, int64_t run,
              int64_t count) {
  if (run == dst_stride && run == src_stride) {  // one contiguous span on both sides
    std::memcpy(dst, src, run * count);
    return;
  }
  switch (run) {
    case 4:
      return CopyFixedRuns<4>(dst, dst_stride, src, src_stride, count);
    case 8:
      return CopyFixedRuns<8>(dst, dst_stride, src, src_stride, count);
    case 12:
      return CopyFixedRuns<12>(dst, dst_stride, src, src_stride, count);
    case 16:
      return CopyFixedRuns<16>(dst, dst_stride, src, src_stride, count);
    case 32:
      return CopyFixedRuns<32>(dst, dst_stride, src, src_stride, count);
    default:
      for (int64_t i = 0; i < count; ++i) {
        std::memcpy(dst + i * dst_stride, src + i * src_stride, run);
      }
  }
}

}  // namespace

int64_t BlocksBefore(const Shape& shape, int axis) {
  int64_t blocks = 1;
  for (int i = 0; i < axis && i < shape.rank(); ++i) blocks *= shape.dim(i).size;
  return blocks;
}

void CopyChunk(const ChunkRef& src, const MutableChunkRef& dst, int64_t chunk_bytes) {
  if (chunk_bytes == 0) return;
  const int64_t src_run = chunk_bytes / src.blocks, dst_run = chunk_bytes / dst.blocks;
  const char* s = src.base + src.index * src_run;
  char* d = dst.base + dst.index * dst_run;
  const int64_t src_stride = src.parts * src_run, dst_stride = dst.parts * dst_run;
  if (src_run == dst_run) {
    CopyRuns(d, dst_stride, s, src_stride, src_run, src.blocks);
    return;
  }
  // One run divides the other (the usual case: one side contiguous): whole runs of the shorter.
  if (src_run % dst_run == 0 || dst_run % src_run == 0) {
    const int64_t run = std::min(src_run, dst_run);
    const int64_t per = std::max(src_run, dst_run) / run;  // short runs per long run
    const bool src_long = src_run > dst_run;
    const int64_t long_runs = src_long ? src.blocks : dst.blocks;
    for (int64_t o = 0; o < long_runs; ++o) {
      if (src_long) {
        CopyRuns(d + o * per * dst_stride, dst_stride, s + o * src_stride, run, run, per);
      } else {
        CopyRuns(d + o * dst_stride, run, s + o * per * src_stride, src_stride, run, per);
      }
    }
    return;
  }
  // General: merge the two run sequences of one byte stream.
  int64_t src_pos = 0, dst_pos = 0;  // offsets within the current runs
  for (int64_t done = 0; done < chunk_bytes;) {
    const int64_t n = std::min(src_run - src_pos, dst_run - dst_pos);
    std::memcpy(d + dst_pos, s + src_pos, n);
    done += n;
    src_pos += n;
    dst_pos += n;
    if (src_pos == src_run) {
      s += src_stride;
      src_pos = 0;
    }
    if (dst_pos == dst_run) {
      d += dst_stride;
      dst_pos = 0;
    }
  }
}

void PackBlocked(const void* src, int64_t blocks, int64_t parts, int64_t chunk_bytes, void* dst) {
  if (blocks == 1 || parts == 1) {
    std::memcpy(dst, src, parts * chunk_bytes);
    return;
  }
  PackBlockedRange(src, blocks, parts, chunk_bytes, 0, blocks, dst);
}

void PackBlockedRange(const void* src, int64_t blocks, int64_t parts, int64_t chunk_bytes,
                      int64_t first_block, int64_t num_blocks, void* dst) {
  if (chunk_bytes == 0 || num_blocks <= 0) return;
  const int64_t run = chunk_bytes / blocks;
  const char* s = static_cast<const char*>(src);
  char* d = static_cast<char*>(dst);
  const int64_t end = first_block + num_blocks;
  // Block o of the source is parts runs in a row; run k goes to chunk k's slot o.
  if (run >= 64) {
    for (int64_t o = first_block; o < end; ++o) {
      for (int64_t k = 0; k < parts; ++k) {
        std::memcpy(d + k * chunk_bytes + o * run, s + (o * parts + k) * run, run);
      }
    }
    return;
  }
  // Short runs: chunk by chunk (the fixed-size run loop), over a band of blocks that stays in
  // cache between the chunks.
  const int64_t band = std::max<int64_t>(1, (64 << 10) / (parts * run));
  for (int64_t o = first_block; o < end; o += band) {
    const int64_t count = std::min(band, end - o);
    for (int64_t k = 0; k < parts; ++k) {
      CopyRuns(d + k * chunk_bytes + o * run, run, s + (o * parts + k) * run, parts * run, run,
               count);
    }
  }
}

void UnpackBlocked(const void* src, int64_t blocks, int64_t parts, int64_t chunk_bytes, void* dst) {
  if (chunk_bytes == 0) return;
  const int64_t run = chunk_bytes / blocks;
  const char* s = static_cast<const char*>(src);
  char* d = static_cast<char*>(dst);
  if (blocks == 1 || parts == 1) {
    std::memcpy(d, s, parts * chunk_bytes);
    return;
  }
  if (run >= 64) {
    for (int64_t o = 0; o < blocks; ++o) {
      for (int64_t k = 0; k < parts; ++k) {
        std::memcpy(d + (o * parts + k) * run, s + k * chunk_bytes + o * run, run);
      }
    }
    return;
  }
  const int64_t band = std::max<int64_t>(1, (64 << 10) / (parts * run));
  for (int64_t o = 0; o < blocks; o += band) {
    const int64_t count = std::min(band, blocks - o);
    for (int64_t k = 0; k < parts; ++k) {
      CopyRuns(d + (o * parts + k) * run, parts * run, s + k * chunk_bytes + o * run, run, run,
               count);
    }
  }
}

}  // namespace meshrt
