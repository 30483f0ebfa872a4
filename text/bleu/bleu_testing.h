// Test helpers of this package (//core/testing's are not visible to //text, a lower layer).
#ifndef MESHRT_TEXT_BLEU_BLEU_TESTING_H_
#define MESHRT_TEXT_BLEU_BLEU_TESTING_H_

#include <stdlib.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace meshrt {
namespace text {

// Succeeds when `status` has `code` and its message contains every string in `parts`.
inline ::testing::AssertionResult StatusIs(const absl::Status& status, absl::StatusCode code,
                                           const std::vector<std::string>& parts = {}) {
  if (status.code() != code) {
    return ::testing::AssertionFailure()
           << "expected code " << absl::StatusCodeToString(code) << ", got " << status.ToString();
  }
  for (const std::string& p : parts) {
    if (std::string(status.message()).find(p) == std::string::npos) {
      return ::testing::AssertionFailure() << "message lacks '" << p << "': " << status.ToString();
    }
  }
  return ::testing::AssertionSuccess();
}

// A new empty directory under TEST_TMPDIR (or /tmp), named `prefix` and a random suffix.
inline std::string MakeTempDir(const std::string& prefix) {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string path = std::string(base != nullptr ? base : "/tmp") + "/" + prefix + "XXXXXX";
  EXPECT_NE(mkdtemp(path.data()), nullptr) << path;
  return path;
}

}  // namespace text
}  // namespace meshrt

#endif  // MESHRT_TEXT_BLEU_BLEU_TESTING_H_
