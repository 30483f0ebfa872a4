// Blocked chunks: where the g equal pieces of a tensor cut along one axis lie in its row-major
// storage, and the copies that move them without a general strided walk.
//
// A buffer holds `parts` equal chunks *blocked* in `blocks` blocks when it is a row-major
// [blocks, parts, run] array of bytes: chunk k is the `blocks` runs [o, k, :], o = 0 .. blocks-1,
// in that order (run = chunk bytes / blocks). Cutting a tensor of shape `s` into `parts` pieces
// along axis `a` lays the pieces out exactly so, with blocks = BlocksBefore(s, a), the product of
// the dims before `a`; blocks == 1 means the chunks lie one after another (core/ir/slicing.h
// ChunksAreContiguous). Read run after run, chunk k is piece k in row-major order of its own shape,
// so a chunk moves between buffers of different blockings as one byte stream: a collective can read
// its pieces out of a tensor, or write them into one, in place (communicator.h "Blocked").
//
// Copies go run by run with memcpy (small runs of 4..32 bytes with fixed-size copies the compiler
// inlines), and the whole-buffer forms walk the blocked side in storage order, reading or writing it
// sequentially while the contiguous side is written or read in `parts` streams.
//
// Preconditions (callers validate; these functions assume): blocks >= 1, parts >= 1, chunk_bytes a
// multiple of blocks, buffers large enough and not overlapping. Thread-compatible (pure functions).
#ifndef MESHRT_RUNTIME_BLOCKED_CHUNKS_H_
#define MESHRT_RUNTIME_BLOCKED_CHUNKS_H_

#include <cstdint>

#include "core/ir/shape.h"

namespace meshrt {

// The product of the sizes of the dims of `shape` before `axis` (1 for axis 0).
int64_t BlocksBefore(const Shape& shape, int axis);

// One chunk of a blocked buffer: chunk `index` of `parts`, each of `chunk_bytes`, in `blocks`
// blocks starting at `base`. A plain contiguous buffer of chunk_bytes is {base, 1, 1, 0}.
struct ChunkRef {
  const char* base = nullptr;
  int64_t blocks = 1;
  int64_t parts = 1;
  int64_t index = 0;
};
struct MutableChunkRef {
  char* base = nullptr;
  int64_t blocks = 1;
  int64_t parts = 1;
  int64_t index = 0;
};

// Copies one chunk of chunk_bytes from `src` to `dst`, whatever their blockings (the chunk's byte
// stream, run after run on both sides).
void CopyChunk(const ChunkRef& src, const MutableChunkRef& dst, int64_t chunk_bytes);

// Blocked -> contiguous: `dst` receives the `parts` chunks of `src` (blocked in `blocks`) one after
// another, chunk 0 first. Reads `src` sequentially.
void PackBlocked(const void* src, int64_t blocks, int64_t parts, int64_t chunk_bytes, void* dst);

// The same for blocks [first_block, first_block + num_blocks) only: each chunk's runs from those
// blocks land at their places in `dst` (chunk k's at k * chunk_bytes + first_block * run), the rest
// of `dst` untouched. Packs a band of the source in one sequential pass, e.g. to send its pieces
// while the next band is packed.
void PackBlockedRange(const void* src, int64_t blocks, int64_t parts, int64_t chunk_bytes,
                      int64_t first_block, int64_t num_blocks, void* dst);

// Contiguous -> blocked, the inverse: `src` holds `parts` chunks one after another; `dst` receives
// them blocked in `blocks`. Writes `dst` sequentially.
void UnpackBlocked(const void* src, int64_t blocks, int64_t parts, int64_t chunk_bytes, void* dst);

}  // namespace meshrt

#endif  // MESHRT_RUNTIME_BLOCKED_CHUNKS_H_
