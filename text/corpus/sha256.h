// SHA-256 (FIPS 180-4), so the corpus records checksums comparable with `sha256sum` and with the
// SHA256 lists of Debian's Release files without linking libcrypto. Streams: Update() any number of
// times, then Final(). Not thread-safe (one object per thread); the free function is.
#ifndef MESHRT_TEXT_CORPUS_SHA256_H_
#define MESHRT_TEXT_CORPUS_SHA256_H_

#include <array>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace meshrt {
namespace text {

class Sha256 {
 public:
  Sha256();
  void Update(absl::string_view bytes);
  // The digest as 64 lowercase hex digits. The object must not be used afterwards.
  std::string FinalHex();

 private:
  void Block(const unsigned char* p);

  std::array<uint32_t, 8> state_;
  unsigned char buffer_[64];
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

// The SHA-256 of `bytes` as 64 lowercase hex digits (what `sha256sum` prints).
std::string Sha256Hex(absl::string_view bytes);

}  // namespace text
}  // namespace meshrt

#endif  // MESHRT_TEXT_CORPUS_SHA256_H_
