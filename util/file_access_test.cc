// FileAccessPolicy: paths inside a root pass; "..", symlinks and absolute paths out of it, a
// policy without roots and non-regular files are refused with the code and a message naming the
// path and the flag.
#include "util/file_access.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>

#include "core/testing/test_util.h"
#include "gtest/gtest.h"

namespace meshrt {
namespace {

class FileAccessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char* real = realpath(MakeTestTempDir("file_access").c_str(), nullptr);
    ASSERT_NE(real, nullptr);
    base_ = real;  // resolved, as the policy reports roots
    free(real);
    root_ = base_ + "/data";
    outside_ = base_ + "/secret";
    ASSERT_EQ(mkdir(root_.c_str(), 0755), 0);
    ASSERT_EQ(mkdir(outside_.c_str(), 0755), 0);
    ASSERT_EQ(mkdir((root_ + "/sub").c_str(), 0755), 0);
    Write(root_ + "/sub/text.txt", "inside");
    Write(outside_ + "/key", "outside");
    auto policy = FileAccessPolicy::Under({root_}, "--data_dir");
    ASSERT_TRUE(policy.ok()) << policy.status();
    policy_ = std::make_unique<FileAccessPolicy>(*std::move(policy));
  }

  static void Write(const std::string& path, const std::string& text) {
    std::ofstream(path) << text;
  }

  std::string base_, root_, outside_;
  std::unique_ptr<FileAccessPolicy> policy_;
};

TEST_F(FileAccessTest, APathInsideARootPasses) {
  ASSERT_OK_AND_ASSIGN(const std::string resolved,
                       policy_->Resolve(root_ + "/sub/./text.txt", "data file"));
  char* real = realpath((root_ + "/sub/text.txt").c_str(), nullptr);
  EXPECT_EQ(resolved, real);
  free(real);
  // ".." that stays inside is fine; so is a symlink to another file inside.
  ASSERT_TRUE(policy_->Resolve(root_ + "/sub/../sub/text.txt", "data file").ok());
  ASSERT_EQ(symlink((root_ + "/sub/text.txt").c_str(), (root_ + "/alias").c_str()), 0);
  ASSERT_OK_AND_ASSIGN(FileAccessPolicy::OpenedFile f,
                       policy_->OpenRegularFile(root_ + "/alias", "data file"));
  char buf[16] = {};
  EXPECT_EQ(pread(f.fd, buf, sizeof(buf), 0), 6);
  EXPECT_STREQ(buf, "inside");
  EXPECT_EQ(f.st.st_size, 6);
  close(f.fd);
}

TEST_F(FileAccessTest, DotDotOutOfTheRootIsRefused) {
  const std::string path = root_ + "/sub/../../secret/key";
  const absl::Status s = policy_->OpenRegularFile(path, "data file").status();
  EXPECT_TRUE(StatusIs(s, absl::StatusCode::kPermissionDenied,
                       {"data file '" + path + "'", "--data_dir", "outside", root_}));
}

TEST_F(FileAccessTest, ASymlinkOutOfTheRootIsRefused) {
  ASSERT_EQ(symlink(outside_.c_str(), (root_ + "/escape").c_str()), 0);
  const std::string path = root_ + "/escape/key";
  EXPECT_TRUE(StatusIs(policy_->OpenRegularFile(path, "data file").status(),
                       absl::StatusCode::kPermissionDenied,
                       {path, "resolves to '" + outside_ + "/key'", "--data_dir"}));
}

TEST_F(FileAccessTest, AnAbsolutePathOutsideIsRefusedWhetherOrNotItExists) {
  EXPECT_TRUE(StatusIs(policy_->OpenRegularFile("/etc/passwd", "data file").status(),
                       absl::StatusCode::kPermissionDenied, {"'/etc/passwd'", "--data_dir"}));
  // A missing file outside is refused the same way: the answer does not tell it is missing.
  EXPECT_TRUE(StatusIs(policy_->Resolve("/etc/no-such-file-here", "data file").status(),
                       absl::StatusCode::kPermissionDenied, {"/etc/no-such-file-here"}));
  // Inside a root, a missing file is NotFound.
  EXPECT_TRUE(StatusIs(policy_->Resolve(root_ + "/missing", "data file").status(),
                       absl::StatusCode::kNotFound, {root_ + "/missing"}));
}

TEST_F(FileAccessTest, NonRegularFilesAreRefused) {
  EXPECT_TRUE(StatusIs(policy_->OpenRegularFile(root_ + "/sub", "data file").status(),
                       absl::StatusCode::kInvalidArgument,
                       {"'" + root_ + "/sub'", "not a regular file"}));
  const std::string fifo = root_ + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0644), 0);
  // Opening does not block on the FIFO, and refuses it.
  EXPECT_TRUE(StatusIs(policy_->OpenRegularFile(fifo, "data file").status(),
                       absl::StatusCode::kInvalidArgument, {fifo, "not a regular file"}));
}

TEST_F(FileAccessTest, NoRootsRefusesEverythingNamingTheFlag) {
  ASSERT_OK_AND_ASSIGN(const FileAccessPolicy none, FileAccessPolicy::Under({}, "--data_dir"));
  const std::string path = root_ + "/sub/text.txt";
  EXPECT_TRUE(StatusIs(none.OpenRegularFile(path, "data file").status(),
                       absl::StatusCode::kPermissionDenied,
                       {path, "started without --data_dir", "--data_dir DIR"}));
  EXPECT_FALSE(none.Contains("/"));
}

TEST_F(FileAccessTest, AllowAllAndBadRoots) {
  EXPECT_TRUE(FileAccessPolicy::AllowAll().Resolve(outside_ + "/key", "data file").ok());
  EXPECT_TRUE(StatusIs(FileAccessPolicy::AllowAll().Resolve(base_ + "/nope", "data file").status(),
                       absl::StatusCode::kNotFound, {base_ + "/nope"}));
  EXPECT_TRUE(StatusIs(FileAccessPolicy::Under({base_ + "/nope"}, "--data_dir").status(),
                       absl::StatusCode::kInvalidArgument, {"--data_dir=" + base_ + "/nope"}));
  EXPECT_TRUE(StatusIs(FileAccessPolicy::Under({root_ + "/sub/text.txt"}, "--data_dir").status(),
                       absl::StatusCode::kInvalidArgument, {"not a directory"}));
  // A root's prefix is not a root: /x/data does not contain /x/database.
  ASSERT_EQ(mkdir((root_ + "base").c_str(), 0755), 0);
  Write(root_ + "base/f", "x");
  EXPECT_TRUE(StatusIs(policy_->Resolve(root_ + "base/f", "data file").status(),
                       absl::StatusCode::kPermissionDenied));
}

TEST(LexicallyNormalTest, DropsDotsAndEmptyComponents) {
  EXPECT_EQ(LexicallyNormal("/a/./b//c/../d"), "/a/b/d");
  EXPECT_EQ(LexicallyNormal("/../x"), "/x");
  EXPECT_EQ(LexicallyNormal("/"), "/");
}

}  // namespace
}  // namespace meshrt
