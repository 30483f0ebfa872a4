// Stable, portable hashes and mixers: the same value on every platform, build and run (unlike
// std::hash), so they can name random streams and check files.
//   Fnv1a64      64-bit FNV-1a (Fowler, Noll, Vo), byte at a time: hashes op and tensor names into
//                random-stream keys, and checksums checkpoint manifests (and the shards of
//                checkpoints saved before XXH3, runtime/checkpoint.h). Slow for bulk data (~1 GB/s).
//   SplitMix64   the SplitMix64 finaliser (Steele, Lea, Flood 2014): a bijective 64-bit mixer, so
//                distinct inputs give distinct outputs; with kSplitMix64Gamma steps it is the
//                SplitMix64 sequence. The counter-based generators (core/ops/ops_random.h,
//                client/random_feeds.h) are built from it.
// Changing any of these changes checkpoints' checksums and every seeded random value: they are
// pinned by tests (core/ops/random_ops_test.cc, runtime/checkpoint_test.cc).
#ifndef MESHRT_UTIL_HASH_H_
#define MESHRT_UTIL_HASH_H_

#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"

namespace meshrt {

inline constexpr uint64_t kFnv1a64Offset = 0xcbf29ce484222325ULL;
inline constexpr uint64_t kSplitMix64Gamma = 0x9e3779b97f4a7c15ULL;

// 64-bit FNV-1a of `n` bytes, continuing from `hash`.
inline uint64_t Fnv1a64(const void* data, size_t n, uint64_t hash = kFnv1a64Offset) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    hash ^= p[i];
    hash *= 0x100000001b3ULL;
  }
  return hash;
}
inline uint64_t Fnv1a64(absl::string_view bytes) { return Fnv1a64(bytes.data(), bytes.size()); }

inline uint64_t SplitMix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace meshrt

#endif  // MESHRT_UTIL_HASH_H_
