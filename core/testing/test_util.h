// Test helpers shared by meshrt's tests (the installed GoogleTest/Abseil lack StatusIs).
#ifndef MESHRT_CORE_TESTING_TEST_UTIL_H_
#define MESHRT_CORE_TESTING_TEST_UTIL_H_

#include <stdlib.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"

namespace meshrt {

// Succeeds when `status` has `code` and its message contains every string in `parts`.
inline ::testing::AssertionResult StatusIs(const absl::Status& status, absl::StatusCode code,
                                           const std::vector<std::string>& parts = {}) {
  if (status.code() != code) {
    return ::testing::AssertionFailure()
           << "expected code " << absl::StatusCodeToString(code) << ", got " << status.ToString();
  }
  for (const std::string& p : parts) {
    if (std::string(status.message()).find(p) == std::string::npos) {
      return ::testing::AssertionFailure()
             << "message lacks '" << p << "': " << status.ToString();
    }
  }
  return ::testing::AssertionSuccess();
}

// A new empty directory under the test's TEST_TMPDIR (or /tmp), named `prefix` + a random suffix.
inline std::string MakeTestTempDir(const std::string& prefix = "meshrt") {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string tmpl = std::string(base != nullptr ? base : "/tmp") + "/" + prefix + "XXXXXX";
  EXPECT_NE(mkdtemp(tmpl.data()), nullptr) << tmpl;
  return tmpl;
}

// Writes `bytes` to a fresh file `name` in the test's TEST_TMPDIR (or /tmp); returns its path.
inline std::string WriteTestFile(const std::string& name, const std::string& bytes) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
  FILE* f = std::fopen(path.c_str(), "wb");
  EXPECT_NE(f, nullptr) << path;
  if (f == nullptr) return path;
  EXPECT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size()) << path;
  std::fclose(f);
  return path;
}

}  // namespace meshrt

#define ASSERT_OK(expr)                                     \
  do {                                                      \
    const ::absl::Status _s = (expr);                       \
    ASSERT_TRUE(_s.ok()) << _s.ToString();                  \
  } while (0)

#define ASSERT_OK_AND_ASSIGN(lhs, expr)                                              \
  auto MESHRT_TEST_CONCAT_(_so_, __LINE__) = (expr);                                 \
  ASSERT_TRUE(MESHRT_TEST_CONCAT_(_so_, __LINE__).ok())                              \
      << MESHRT_TEST_CONCAT_(_so_, __LINE__).status().ToString();                    \
  lhs = std::move(MESHRT_TEST_CONCAT_(_so_, __LINE__)).value()
#define MESHRT_TEST_CONCAT_INNER_(a, b) a##b
#define MESHRT_TEST_CONCAT_(a, b) MESHRT_TEST_CONCAT_INNER_(a, b)

#endif  // MESHRT_CORE_TESTING_TEST_UTIL_H_
