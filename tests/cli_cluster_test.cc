// `meshrt run --local 4` (real daemons started by the CLI) writes the same outputs as
// `meshrt run --reference`, for the example graph under several layouts; bad input through the
// CLI gives one error line and a non-zero exit.
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "client/npy.h"
#include "core/test_util.h"
#include "gtest/gtest.h"

namespace meshrt {
namespace {

struct Result {
  int exit_code;
  std::string output;
};

Result Meshrt(const std::string& args) {
  std::string cmd = absl::StrCat("client/meshrt ", args, " 2>&1");
  Result r{-1, ""};
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.output.append(buf, n);
  int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string TempDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string dir = absl::StrCat(base ? base : "/tmp", "/", name);
  std::string cmd = absl::StrCat("rm -rf ", dir, " && mkdir -p ", dir);
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  return dir;
}

Tensor ReadFloat(const std::string& path, const Shape& shape) {
  auto array = ReadNpy(path);
  EXPECT_TRUE(array.ok()) << array.status();
  auto t = NpyToTensor(*array, shape, path);
  EXPECT_TRUE(t.ok()) << t.status();
  return *t;
}

TEST(CliClusterTest, LocalClusterEqualsReference) {
  const std::string graph = "examples/graphs/mlp_forward.pbtxt";
  const std::string ref = TempDir("ref");
  Result r = Meshrt(absl::StrCat("run ", graph, " --reference --random_feeds 7 --fetch_all ", ref));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const Shape y_shape({{"batch", 8}, {"d_out", 8}}), s_shape({{"batch", 8}});
  const Tensor y_ref = ReadFloat(ref + "/y.npy", y_shape);
  const Tensor s_ref = ReadFloat(ref + "/s.npy", s_shape);
  int n = 0;
  for (const char* layout : {"batch:rows,hidden:cols", "d_in:rows,hidden:cols", "d_out:cols"}) {
    SCOPED_TRACE(layout);
    const std::string out = TempDir(absl::StrCat("local", n++));
    Result l = Meshrt(absl::StrCat("run ", graph, " --local 4 --mesh rows:2,cols:2 --layout ", layout,
                                " --random_feeds 7 --fetch_all ", out));
    ASSERT_EQ(l.exit_code, 0) << l.output;
    EXPECT_LE(MaxRelativeError(ReadFloat(out + "/y.npy", y_shape), y_ref), 1e-5);
    EXPECT_LE(MaxRelativeError(ReadFloat(out + "/s.npy", s_shape), s_ref), 1e-5);
  }
}

TEST(CliClusterTest, BadInputIsOneLineAndNonZeroExit) {
  Result r = Meshrt("run examples/graphs/mlp_forward.pbtxt --local 4 --mesh rows:2,cols:2 "
                 "--layout batch:rows,hidden:rows --random_feeds 1");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("meshrt: error: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("tensor 'h'"), std::string::npos) << r.output;
  Result c = Meshrt("run examples/graphs/mlp_forward.pbtxt --coordinator 127.0.0.1:1 "
                 "--random_feeds 1");
  EXPECT_EQ(c.exit_code, 1) << c.output;
  EXPECT_NE(c.output.find("cannot reach the coordinator at 127.0.0.1:1"), std::string::npos)
      << c.output;
}

}  // namespace
}  // namespace meshrt
