// Test helpers of text/corpus: StatusIs and temporary files. (The same as core/testing/
// test_util.h, which is not visible to //text; swap when it is.)
#ifndef MESHRT_TEXT_CORPUS_CORPUS_TEST_UTIL_H_
#define MESHRT_TEXT_CORPUS_CORPUS_TEST_UTIL_H_

#include <stdlib.h>

#include <cstdio>
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

// A new empty directory under TEST_TMPDIR (or /tmp).
inline std::string MakeTempDir(const std::string& prefix = "corpus") {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string tmpl = std::string(base != nullptr ? base : "/tmp") + "/" + prefix + "XXXXXX";
  EXPECT_NE(mkdtemp(tmpl.data()), nullptr) << tmpl;
  return tmpl;
}

// Writes `bytes` to `path`.
inline void WriteTestFile(const std::string& path, const std::string& bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr) << path;
  ASSERT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size()) << path;
  std::fclose(f);
}

}  // namespace text
}  // namespace meshrt

#endif  // MESHRT_TEXT_CORPUS_CORPUS_TEST_UTIL_H_
