// `meshrt run --local 4` (real daemons started by the CLI) writes the same outputs as
// `meshrt run --reference`, for the example graph under several layouts; bad input through the
// CLI gives one error line and a non-zero exit.
#include <sys/wait.h>

#include <cstdio>
#include <cmath>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "client/npy.h"
#include "core/testing/test_util.h"
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

// A graph that reads a file: refused on workers without --data_dir (naming the path and the flag),
// equal to the reference with the file's directory given.
TEST(CliClusterTest, FilesAreReadOnlyUnderDataDir) {
  const std::string data = TempDir("data");
  std::string text;
  for (int i = 0; i < 200; ++i) text.push_back(static_cast<char>('a' + i % 26));
  FILE* f = std::fopen((data + "/text").c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs(text.c_str(), f);
  std::fclose(f);
  const std::string graph = data + "/../windows.pbtxt";
  f = std::fopen(graph.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fprintf(f,
               "ops { name: \"step\" type: \"zeros\" shape {} }\n"
               "ops { name: \"t\" type: \"text_windows\" inputs: \"step\" dtype: DT_INT32\n"
               "      shape { dims { name: \"batch\" size: 4 } dims { name: \"len\" size: 8 } }\n"
               "      attrs { key: \"path\" value { s: \"%s/text\" } } }\n"
               "outputs: \"t\"\n",
               data.c_str());
  std::fclose(f);
  const std::string ref = TempDir("windows_ref");
  Result r = Meshrt(absl::StrCat("run ", graph, " --reference --fetch_all ", ref));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string local = "run " + graph + " --local 2 --mesh p:2 --layout batch:p";
  Result denied = Meshrt(local);
  EXPECT_EQ(denied.exit_code, 1) << denied.output;
  EXPECT_NE(denied.output.find(data + "/text"), std::string::npos) << denied.output;
  EXPECT_NE(denied.output.find("--data_dir"), std::string::npos) << denied.output;
  const std::string out = TempDir("windows_local");
  Result allowed = Meshrt(absl::StrCat(local, " --data_dir ", data, " --fetch_all ", out));
  ASSERT_EQ(allowed.exit_code, 0) << allowed.output;
  auto want = ReadNpy(ref + "/t.npy");
  auto got = ReadNpy(out + "/t.npy");
  ASSERT_TRUE(want.ok() && got.ok());
  EXPECT_EQ(want->data.size(), 4u * 8 * 4);  // 4 x 8 int32
  EXPECT_EQ(got->data, want->data);
}

// Without --mesh, --local N runs on x:N (every worker, the graph replicated): the reference's
// outputs.
TEST(CliClusterTest, LocalWithoutAMeshRunsOnEveryWorker) {
  const std::string graph = "examples/graphs/mlp_forward.pbtxt";
  const std::string ref = TempDir("nomesh_ref"), out = TempDir("nomesh_local");
  Result r = Meshrt(absl::StrCat("run ", graph, " --reference --random_feeds 3 --fetch_all ", ref));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  Result l = Meshrt(absl::StrCat("run ", graph, " --local 2 --random_feeds 3 --fetch_all ", out));
  ASSERT_EQ(l.exit_code, 0) << l.output;
  const Shape y_shape({{"batch", 8}, {"d_out", 8}});
  const Tensor want = ReadFloat(ref + "/y.npy", y_shape), got = ReadFloat(out + "/y.npy", y_shape);
  for (int64_t i = 0; i < want.num_elements(); ++i) {
    EXPECT_NEAR(got.f32()[i], want.f32()[i], 1e-4 * (1 + std::abs(want.f32()[i]))) << i;
  }
}

}  // namespace
}  // namespace meshrt
