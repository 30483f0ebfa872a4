#include "text/corpus/sha256.h"

#include <string>

#include "gtest/gtest.h"

namespace meshrt {
namespace text {
namespace {

// FIPS 180-4 / NIST example vectors (also what `sha256sum` prints).
TEST(Sha256Test, KnownVectors) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(Sha256Hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256Test, StreamingEqualsOneShotAcrossBlockBoundaries) {
  std::string data;
  for (int i = 0; i < 300; ++i) data.push_back(static_cast<char>(i * 7 + 3));
  // Every length around the 55/56/64-byte padding boundaries, and every split point.
  for (size_t n : {0, 1, 55, 56, 57, 63, 64, 65, 119, 120, 128, 300}) {
    const std::string msg = data.substr(0, n);
    const std::string want = Sha256Hex(msg);
    for (size_t cut = 0; cut <= n; cut += 13) {
      Sha256 sha;
      sha.Update(msg.substr(0, cut));
      sha.Update(msg.substr(cut));
      EXPECT_EQ(sha.FinalHex(), want) << "n=" << n << " cut=" << cut;
    }
  }
  EXPECT_NE(Sha256Hex(data.substr(0, 55)), Sha256Hex(data.substr(0, 56)));
}

}  // namespace
}  // namespace text
}  // namespace meshrt
