#include "util/file.h"

#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace meshrt {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

std::string Write(const std::string& name, const std::string& bytes) {
  const std::string path = TempPath(name);
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

TEST(ReadFileTest, ReadsEveryByteOfABinaryFile) {
  std::string bytes(200000, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 7);
  absl::StatusOr<std::string> read = ReadFile(Write("binary", bytes));
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, bytes);
}

TEST(ReadFileTest, ReadsAnEmptyFile) {
  absl::StatusOr<std::string> read = ReadFile(Write("empty", ""));
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, "");
}

TEST(ReadFileTest, ReadsProcFilesWhoseSizeIsUnknown) {
  absl::StatusOr<std::string> read = ReadFile("/proc/self/status");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TRUE(absl::StrContains(*read, "Name:"));
}

TEST(ReadFileTest, AMissingFileIsNotFoundNamingThePathAndTheReason) {
  const std::string path = TempPath("no-such-file");
  absl::StatusOr<std::string> read = ReadFile(path);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(read.status().message(), "cannot open " + path));
  EXPECT_TRUE(absl::StrContains(read.status().message(), "No such file")) << read.status();
}

TEST(ReadFileTest, ADirectoryCannotBeRead) {
  absl::StatusOr<std::string> read = ReadFile(TempPath(""));
  EXPECT_FALSE(read.ok());
  EXPECT_TRUE(absl::StrContains(read.status().message(), "cannot read")) << read.status();
}

TEST(ReadFileTest, AFileOverTheCapIsResourceExhausted) {
  const std::string path = Write("ten", "0123456789");
  EXPECT_TRUE(ReadFile(path, 10).ok());
  absl::StatusOr<std::string> read = ReadFile(path, 9);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StrContains(read.status().message(), path));
  EXPECT_TRUE(absl::StrContains(read.status().message(), "9 bytes"));
}

TEST(ReadFileTest, TheCapAppliesToFilesOfUnknownSizeToo) {
  absl::StatusOr<std::string> read = ReadFile("/proc/self/status", 4);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(MakeTempDirectoryTest, MakesAPrivateDirectoryUnderTmpdirEachTimeANewOne) {
  const char* tmpdir = std::getenv("TMPDIR");
  ASSERT_NE(tmpdir, nullptr);  // Bazel sets it to the test's own directory
  absl::StatusOr<std::string> a = MakeTempDirectory("meshrt-test");
  absl::StatusOr<std::string> b = MakeTempDirectory("meshrt-test");
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
  EXPECT_NE(*a, *b);
  EXPECT_TRUE(absl::StartsWith(*a, std::string(tmpdir) + "/meshrt-test-")) << *a;
  struct stat st;
  ASSERT_EQ(::stat(a->c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  absl::StatusOr<std::string> bad = MakeTempDirectory("no/such/dir/x");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kNotFound) << bad.status();
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "no/such/dir/x-XXXXXX")) << bad.status();
}

}  // namespace
}  // namespace meshrt
