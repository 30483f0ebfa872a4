// Every example graph in examples/graphs/ with a `.layouts` file beside it: each `MESH LAYOUT`
// line is run through `meshrt run --coordinator` on a local cluster of 8 workers with
// `--fetch_all`, and every marked output must equal `meshrt run --reference` (1e-5 relative for
// floats, exactly for int32).
#include <dirent.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "client/graph_io.h"
#include "client/local_cluster.h"
#include "client/npy.h"
#include "core/ops/graph.h"
#include "core/testing/test_util.h"
#include "gtest/gtest.h"

namespace meshrt {
namespace {

int Shell(const std::string& args, std::string* output) {
  FILE* p = popen(absl::StrCat("client/meshrt ", args, " 2>&1").c_str(), "r");
  if (p == nullptr) return -1;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) output->append(buf, n);
  int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string FreshDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string dir = absl::StrCat(base ? base : "/tmp", "/", name);
  std::system(absl::StrCat("rm -rf ", dir, " && mkdir -p ", dir).c_str());
  return dir;
}

TEST(ExamplesCliTest, EveryLayoutOfEveryExampleEqualsTheReference) {
  LocalClusterOptions o;
  o.workers = 8;
  o.coordinator_command = {"client/meshrt", "coordinator"};
  o.worker_command = {"client/meshrt", "worker"};
  if (const char* dir = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR")) o.log_dir = dir;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LocalCluster> cluster, LocalCluster::Start(o));

  std::vector<std::string> graphs;
  if (DIR* d = opendir("examples/graphs")) {
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (absl::EndsWith(n, ".layouts")) graphs.push_back(n.substr(0, n.size() - 8));
    }
    closedir(d);
  }
  ASSERT_FALSE(graphs.empty());
  int runs = 0;
  for (const std::string& base : graphs) {
    const std::string graph_file = absl::StrCat("examples/graphs/", base, ".pbtxt");
    ASSERT_OK_AND_ASSIGN(v1::Graph proto, LoadGraph(graph_file));
    ASSERT_OK_AND_ASSIGN(Graph graph, Graph::Build(proto));
    ASSERT_GT(proto.outputs_size(), 0) << graph_file << " marks no outputs";
    const std::string ref = FreshDir(base + "_ref");
    std::string out;
    ASSERT_EQ(Shell(absl::StrCat("run ", graph_file, " --reference --random_feeds 3 --fetch_all ",
                                 ref),
                    &out),
              0)
        << out;
    std::ifstream layouts(absl::StrCat("examples/graphs/", base, ".layouts"));
    std::string line;
    int lines = 0;
    while (std::getline(layouts, line)) {
      line = std::string(absl::StripAsciiWhitespace(line));
      if (line.empty() || line[0] == '#') continue;
      std::vector<std::string> parts = absl::StrSplit(line, ' ', absl::SkipEmpty());
      ASSERT_EQ(parts.size(), 2u) << base << ".layouts: '" << line << "'";
      const std::string layout = parts[1] == "-" ? "" : parts[1];
      SCOPED_TRACE(absl::StrCat(base, ": mesh ", parts[0], " layout '", layout, "'"));
      const std::string dir = FreshDir(absl::StrCat(base, "_", lines));
      std::string run_out;
      ASSERT_EQ(Shell(absl::StrCat("run ", graph_file, " --coordinator ", cluster->address(), " --auth_token_file ",
                                   cluster->client_security().auth_token_file,
                                   " --mesh ", parts[0], " --layout '", layout,
                                   "' --random_feeds 3 --fetch_all ", dir),
                      &run_out),
                0)
          << run_out;
      for (const std::string& name : proto.outputs()) {
        const Shape& shape = graph.type(name).shape;
        ASSERT_OK_AND_ASSIGN(NpyArray want_a, ReadNpy(absl::StrCat(ref, "/", name, ".npy")));
        ASSERT_OK_AND_ASSIGN(NpyArray got_a, ReadNpy(absl::StrCat(dir, "/", name, ".npy")));
        ASSERT_OK_AND_ASSIGN(Tensor want, NpyToTensor(want_a, shape, name));
        ASSERT_OK_AND_ASSIGN(Tensor got, NpyToTensor(got_a, shape, name));
        EXPECT_LE(MaxRelativeError(got, want), want.dtype() == DType::kInt32 ? 0 : 1e-5) << name;
      }
      ++lines;
      ++runs;
    }
    EXPECT_GE(lines, 3) << base << ".layouts needs at least three layouts";
  }
  std::cout << "examples: " << graphs.size() << " graphs, " << runs << " layouts run\n";
}

}  // namespace
}  // namespace meshrt
