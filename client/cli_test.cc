// The `meshrt` CLI in process (RunCli with captured streams): reference-mode `run`, `explain`,
// `ops`, help, and the error contract (one line, exit 1 for bad input, 2 for usage). Cluster
// modes are covered by the end-to-end tests in tests/.
#include "client/cli.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/graph_io.h"
#include "client/npy.h"
#include "client/random_feeds.h"
#include "core/ops/graph.h"
#include "core/ops/ops.h"
#include "core/reference/interpreter.h"
#include "core/testing/test_util.h"
#include "gtest/gtest.h"

namespace meshrt {
namespace {

constexpr char kGraph[] = "examples/graphs/mlp_forward.pbtxt";

struct Result {
  int code;
  std::string out;
  std::string err;
};

Result Cli(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int code = RunCli(args, out, err);
  return {code, out.str(), err.str()};
}

// A fresh directory path per test (RunCli creates it).
std::string Dir(const std::string& name) {
  return absl::StrCat(testing::TempDir(), "/cli_test_",
                      testing::UnitTest::GetInstance()->current_test_info()->name(), "_", name);
}

std::string FileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// `meshrt run` of the example on a 2x2 mesh in reference mode, plus `extra`.
std::vector<std::string> RunArgs(std::vector<std::string> extra) {
  std::vector<std::string> args = {"run",           kGraph,     "--mesh",
                                   "rows:2,cols:2", "--layout", "batch:rows,hidden:cols",
                                   "--reference"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// Exactly one line, "meshrt: error: ...", containing every part.
void ExpectOneErrorLine(const Result& r, const std::vector<std::string>& parts) {
  EXPECT_TRUE(absl::StartsWith(r.err, "meshrt: error: ")) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_TRUE(absl::EndsWith(r.err, "\n")) << r.err;
  for (const std::string& p : parts) EXPECT_TRUE(absl::StrContains(r.err, p)) << r.err;
}

TEST(CliTest, RunReferenceWritesEveryOutput) {
  const std::string dir = Dir("out");
  const Result r = Cli(RunArgs({"--random_feeds", "1", "--fetch_all", dir}));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");

  ASSERT_OK_AND_ASSIGN(NpyArray y, ReadNpy(dir + "/y.npy"));
  EXPECT_EQ(y.dtype, DType::kFloat32);
  EXPECT_EQ(y.dims, (std::vector<int64_t>{8, 8}));
  EXPECT_TRUE(absl::StrContains(FileBytes(dir + "/y.npy"),
                                "{'descr': '<f4', 'fortran_order': False, 'shape': (8, 8), }"));
  ASSERT_OK_AND_ASSIGN(NpyArray s, ReadNpy(dir + "/s.npy"));
  EXPECT_EQ(s.dims, (std::vector<int64_t>{8}));
  EXPECT_TRUE(absl::StrContains(FileBytes(dir + "/s.npy"), "'shape': (8,)"));

  // The values are the interpreter's on the documented random feeds.
  ASSERT_OK_AND_ASSIGN(v1::Graph proto, LoadGraph(kGraph));
  ASSERT_OK_AND_ASSIGN(Graph graph, Graph::Build(proto));
  ASSERT_OK_AND_ASSIGN(TensorMap want, Interpret(graph, RandomFeeds(graph, 1), {"y", "s"}));
  ASSERT_OK_AND_ASSIGN(Tensor got_y, NpyToTensor(y, graph.type("y").shape, "y"));
  ASSERT_OK_AND_ASSIGN(Tensor got_s, NpyToTensor(s, graph.type("s").shape, "s"));
  EXPECT_EQ(MaxRelativeError(got_y, want.at("y")), 0.0);
  EXPECT_EQ(MaxRelativeError(got_s, want.at("s")), 0.0);
}

TEST(CliTest, SavedFeedsReproduceTheRun) {
  const std::string feeds = Dir("feeds"), first = Dir("first"), second = Dir("second");
  Result r = Cli(RunArgs({"--random_feeds", "1", "--save_feeds", feeds, "--fetch_all", first}));
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* name : {"x", "w1", "w2"}) {
    ASSERT_OK(ReadNpy(absl::StrCat(feeds, "/", name, ".npy")).status());
  }
  r = Cli(RunArgs({"--feed", "x=" + feeds + "/x.npy", "--feed=w1=" + feeds + "/w1.npy", "--feed",
                   "w2=" + feeds + "/w2.npy", "--fetch_all=" + second}));
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* name : {"/y.npy", "/s.npy"}) {
    const std::string a = FileBytes(first + name), b = FileBytes(second + name);
    EXPECT_FALSE(a.empty());
    EXPECT_EQ(a, b) << name;
  }
}

TEST(CliTest, ExplicitFeedsOverrideRandomOnes) {
  const std::string zeros = Dir("zeros.npy"), y = Dir("y.npy");
  ASSERT_OK(WriteNpy(zeros, Tensor(DType::kFloat32, Shape({{"batch", 8}, {"d_in", 16}}))));
  const Result r =
      Cli(RunArgs({"--random_feeds", "3", "--feed", "x=" + zeros, "--fetch", "y=" + y}));
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_OK_AND_ASSIGN(NpyArray a, ReadNpy(y));
  ASSERT_OK_AND_ASSIGN(Tensor t, NpyToTensor(a, Shape({{"batch", 8}, {"d_out", 8}}), "y"));
  for (float v : t.floats()) EXPECT_EQ(v, 0.0f);
}

TEST(CliTest, PrintShowsFetchedTensors) {
  Result r = Cli(RunArgs({"--random_feeds", "1", "--print"}));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "y [batch:8, d_out:8] float32: ")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "(64 values)")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "\ns [batch:8] float32: ")) << r.out;

  // An intermediate tensor, fetched by name, is the only one printed.
  const std::string h = Dir("h.npy");
  r = Cli(RunArgs({"--random_feeds", "1", "--fetch", "h=" + h, "--print"}));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(absl::StartsWith(r.out, "h [batch:8, hidden:32] float32: ")) << r.out;
  EXPECT_FALSE(absl::StrContains(r.out, "\ny ")) << r.out;
  ASSERT_OK_AND_ASSIGN(NpyArray a, ReadNpy(h));
  EXPECT_EQ(a.dims, (std::vector<int64_t>{8, 32}));
}

TEST(CliTest, ExplainShowsTheAllreduceOfASplitContractedDim) {
  Result r =
      Cli({"explain", kGraph, "--mesh", "rows:2,cols:2", "--layout", "d_in:rows,hidden:cols"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "allreduce")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "rows")) << r.out;
  // Pure data parallelism splits no contracted or reduced dim: nothing to allreduce.
  r = Cli({"explain", kGraph, "--mesh=rows:2,cols:2", "--layout=batch:rows"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(absl::StrContains(r.out, "allreduce")) << r.out;
}

TEST(CliTest, ExplainWithLayoutAutoPlansAndExplainsTheChoice) {
  const std::string profile = Dir("plan_profile.txt");
  {
    std::ofstream out(profile);
    out << "gemm_small_flops_per_s 1e9\ngemm_large_flops_per_s 1e9\nelementwise_flops_per_s 1e9\n"
           "memory_bytes_per_s 1e10\n";
  }
  Result r = Cli({"explain", kGraph, "--mesh", "auto:4", "--layout", "auto", "--profile", profile});
  ASSERT_EQ(r.code, 0) << r.err;
  // The whole batch over the four processors needs no communication in a forward step.
  EXPECT_TRUE(absl::StrContains(r.out, "planner: chose mesh x:4  layout batch:x  predicted"))
      << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "  next 1: mesh ")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "searched ")) << r.out;
  // ... and the report that follows is the chosen layout's.
  EXPECT_TRUE(absl::StrContains(r.out, "\nmesh x:4  layout batch:x\n")) << r.out;
  // A fixed mesh: only the rules are chosen.
  r = Cli({"explain", kGraph, "--mesh", "rows:2,cols:2", "--layout", "auto", "--profile", profile});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "planner: chose mesh rows:2,cols:2  layout ")) << r.out;
  // A mesh chosen by the planner needs rules chosen by it too; a bad count is named.
  r = Cli({"explain", kGraph, "--mesh", "auto:4", "--layout", "batch:x"});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(absl::StrContains(r.err, "give --layout auto")) << r.err;
  r = Cli({"explain", kGraph, "--mesh", "auto:0", "--layout", "auto"});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(absl::StrContains(r.err, "auto:N with a worker count")) << r.err;
  // Nothing fits in 1 KiB.
  r = Cli({"explain", kGraph, "--mesh", "auto:4", "--layout", "auto", "--memory_limit", "1K",
           "--profile", profile});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(absl::StrContains(r.err, "over the limit of 1.00 KiB")) << r.err;
}

TEST(CliTest, ExplainPrintsTheMemorySection) {
  // batch:rows,hidden:cols on rows:2,cols:2, float32: feeds x [4,16] 256 B, w1 [16,16] 1024 B,
  // w2 [16,8] 512 B = 1792 B. h [4,16] 256 B, then r [4,16] reads it: 512 B live, the peak (y's
  // partial sum [4,8] comes after h is freed). Peak = 1792 + 512 = 2304 B at op 'r'.
  Result r =
      Cli({"explain", kGraph, "--mesh", "rows:2,cols:2", "--layout", "batch:rows,hidden:cols"});
  ASSERT_EQ(r.code, 0) << r.err;
  const size_t memory = r.out.find("memory per worker");
  ASSERT_NE(memory, std::string::npos) << r.out;
  EXPECT_LT(r.out.find("communication:"), memory) << r.out;    // after ExplainProgram's report
  EXPECT_TRUE(absl::StrContains(r.out, "1.75 KiB")) << r.out;  // feeds
  EXPECT_TRUE(absl::StrContains(r.out, "(2304 bytes, at instruction 1 of op 'r')")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "live at the peak")) << r.out;
  // Replicated, the activations double: h and r [8,32] are 1 KiB each, w1 2 KiB, x 512 B, w2 1 KiB.
  r = Cli({"explain", kGraph, "--mesh", "rows:2,cols:2", "--layout", ""});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "(5632 bytes, at instruction 1 of op 'r')")) << r.out;
}

// --hosts: with rows spanning two hosts and a slow cross-host link, the allreduce over rows costs
// the cross-host figure; a list that does not match the mesh is a usage error.
TEST(CliTest, ExplainCostsGroupsSpanningHostsWithTheCrossHostLinks) {
  const std::string profile = Dir("hosts.profile");
  {
    std::ofstream out(profile);
    out << "allreduce.alpha_s 0.001\nallreduce.beta_bytes_per_s 1e9\n"
           "cross_host.allreduce.alpha_s 2\ncross_host.allreduce.beta_bytes_per_s 1e9\n";
  }
  auto total = [&](const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"explain", kGraph, "--mesh", "rows:2,cols:2", "--layout",
                                     "d_in:rows,hidden:cols", "--profile", profile, "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    Result r = Cli(args);
    EXPECT_EQ(r.code, 0) << r.err;
    google::protobuf::Struct json;
    EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(r.out, &json).ok()) << r.out;
    return json.fields().at("totals").struct_value().fields().at("predicted_s").number_value();
  };
  const double one_host = total({});
  EXPECT_LT(one_host, 1.0);
  EXPECT_DOUBLE_EQ(total({"--hosts", "a,a,a,a"}), one_host);
  // Ranks 0, 1 on a and 2, 3 on b: groups over rows span the hosts (the allreduce of h's partial
  // sums over d_in), groups over cols do not.
  EXPECT_GT(total({"--hosts", "a,a,b,b"}), 2.0);
  Result bad = Cli({"explain", kGraph, "--mesh", "rows:2,cols:2", "--hosts", "a,b"});
  EXPECT_EQ(bad.code, 2) << bad.err;
  EXPECT_TRUE(absl::StrContains(bad.err, "--hosts names 2 host(s) for the 4 processor(s)")) << bad.err;
}

TEST(CliTest, ExplainPredictsFlopsBytesAndTime) {
  const std::string profile = Dir("profile.txt");
  {
    std::ofstream out(profile);
    out << "# test profile\nelementwise_flops_per_s 1e9\ngemm_small_flops_per_s 1e9\n"
           "memory_bytes_per_s 1e10\nallreduce.alpha_s 0.001\nallreduce.beta_bytes_per_s 1e6\n";
  }
  Result r = Cli({"explain", kGraph, "--mesh", "rows:2,cols:2", "--layout", "d_in:rows,hidden:cols",
                  "--profile", profile});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* column : {"FLOPs", "bytes moved", "bytes sent", "compute ms", "comm ms"}) {
    EXPECT_TRUE(absl::StrContains(r.out, column)) << column << "\n" << r.out;
  }
  // h = x [batch:8, d_in:8] x w1 [d_in:8, hidden:16] per worker: 2*8*8*16 FLOPs; its allreduce
  // over rows sends 512 bytes: 1 ms + 0.512 ms.
  EXPECT_TRUE(absl::StrContains(r.out, "\n  h                          2048")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "predicted step time: ")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, absl::StrCat("profile: ", profile))) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "placeholders")) << r.out;
  // y's einsum splits nothing over rows: both rows compute it.
  EXPECT_TRUE(absl::StrContains(r.out, "warning: compute duplicated 2x over rows: einsum 'y'"))
      << r.out;
  r = Cli({"explain", kGraph, "--mesh", "rows:2,cols:2", "--layout", "d_in:rows,hidden:cols",
           "--profile", profile, "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  google::protobuf::Struct json;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(r.out, &json).ok()) << r.out;
  const auto& totals = json.fields().at("totals").struct_value().fields();
  EXPECT_DOUBLE_EQ(totals.at("sent_bytes").number_value(), 544);
  EXPECT_GT(totals.at("predicted_s").number_value(), 0.002);
  EXPECT_EQ(json.fields().at("ops").list_value().values(0).struct_value().fields().at("name")
                .string_value(),
            "h");
  // A bad profile file is one error line naming the flag, the file, the line and the key.
  {
    std::ofstream out(profile);
    out << "gemm_speed 1\n";
  }
  r = Cli({"explain", kGraph, "--profile", profile});
  EXPECT_EQ(r.code, 1);
  ExpectOneErrorLine(r, {"--profile", "line 1", "unknown key 'gemm_speed'"});
}

TEST(CliTest, BadLayoutIsOneLineNamingTheTensor) {
  const Result r = Cli({"run", kGraph, "--mesh", "rows:2,cols:2", "--layout",
                        "hidden:rows,batch:rows", "--reference", "--random_feeds", "1"});
  EXPECT_EQ(r.code, 1);
  ExpectOneErrorLine(r, {"tensor 'h'", "rows"});
  const Result e =
      Cli({"explain", kGraph, "--mesh", "rows:2,cols:2", "--layout", "hidden:rows,batch:rows"});
  EXPECT_EQ(e.code, 1);
  ExpectOneErrorLine(e, {"tensor 'h'"});
  // A rule naming a dim no tensor has (a typo): an error, not a silent replication.
  for (const Result& t :
       {Cli({"run", kGraph, "--mesh", "rows:2", "--layout", "batchh:rows", "--reference",
             "--random_feeds", "1"}),
        Cli({"explain", kGraph, "--mesh", "rows:2", "--layout", "batchh:rows"})}) {
    EXPECT_EQ(t.code, 1);
    ExpectOneErrorLine(t, {"layout rule 'batchh:rows'", "did you mean 'batch'?"});
  }
  // Not divisible: batch 8 over 3.
  const Result d = Cli({"run", kGraph, "--mesh", "rows:3", "--layout", "batch:rows", "--reference",
                        "--random_feeds", "1"});
  EXPECT_EQ(d.code, 1);
  ExpectOneErrorLine(d, {"batch", "divisible"});
}

TEST(CliTest, FeedErrorsNameTheFeed) {
  Result r = Cli(RunArgs({"--random_feeds", "1", "--feed", "nope=whatever.npy"}));
  EXPECT_EQ(r.code, 1);
  ExpectOneErrorLine(r, {"'nope'", "'x'"});

  r = Cli(RunArgs({}));
  EXPECT_EQ(r.code, 1);
  ExpectOneErrorLine(r, {"'x'", "'w1'", "'w2'", "not fed"});

  const std::string bad = Dir("x.npy");
  ASSERT_OK(WriteNpy(bad, Tensor(DType::kFloat32, Shape({{"a", 8}, {"b", 15}}))));
  r = Cli(RunArgs({"--random_feeds", "1", "--feed", "x=" + bad}));
  EXPECT_EQ(r.code, 1);
  ExpectOneErrorLine(r, {"feed 'x'", "[batch:8, d_in:16]", "(8, 15)"});

  const std::string ints = Dir("i.npy");
  ASSERT_OK(WriteNpy(ints, Tensor(DType::kInt32, Shape({{"a", 8}, {"b", 16}}))));
  r = Cli(RunArgs({"--random_feeds", "1", "--feed", "x=" + ints}));
  EXPECT_EQ(r.code, 1);
  ExpectOneErrorLine(r, {"feed 'x'", "int32", "float32"});

  r = Cli(RunArgs({"--random_feeds", "1", "--feed", "x=" + Dir("missing.npy")}));
  EXPECT_EQ(r.code, 1);
  ExpectOneErrorLine(r, {"missing.npy"});

  r = Cli(RunArgs({"--random_feeds", "1", "--fetch", "zz=" + Dir("zz.npy")}));
  EXPECT_EQ(r.code, 1);
  ExpectOneErrorLine(r, {"'zz'"});
}

TEST(CliTest, MalformedGraphGivesFileAndLine) {
  const std::string path = Dir("broken.pbtxt");
  std::ofstream(path) << "ops {\n  name: \"x\"\n  type: \"placeholder\"\n  shpe { }\n}\n";
  Result r = Cli({"run", path, "--reference"});
  EXPECT_EQ(r.code, 1);
  ExpectOneErrorLine(r, {path + ":4:"});

  r = Cli({"explain", Dir("absent.pbtxt")});
  EXPECT_EQ(r.code, 1);
  ExpectOneErrorLine(r, {"absent.pbtxt"});

  // Parses, but does not validate: the error names the file and the op.
  const std::string invalid = Dir("invalid.pbtxt");
  std::ofstream(invalid) << "ops { name: \"r\" type: \"relu\" inputs: \"ghost\" }\n";
  r = Cli({"run", invalid, "--reference"});
  EXPECT_EQ(r.code, 1);
  ExpectOneErrorLine(r, {invalid, "ghost"});
}

TEST(CliTest, UsageErrorsExitTwo) {
  Result r = Cli(RunArgs({"--random_feeds", "1", "--frobnicate"}));
  EXPECT_EQ(r.code, 2);
  ExpectOneErrorLine(r, {"--frobnicate"});

  r = Cli({"run", kGraph, "--random_feeds", "1"});  // no --reference / --local / --coordinator
  EXPECT_EQ(r.code, 2);
  ExpectOneErrorLine(r, {"--reference", "--local", "--coordinator"});

  r = Cli({"run", kGraph, "--reference", "--local", "4"});
  EXPECT_EQ(r.code, 2);

  r = Cli({"run", "--reference"});
  EXPECT_EQ(r.code, 2);
  ExpectOneErrorLine(r, {"GRAPH"});

  r = Cli(RunArgs({"--random_feeds", "one"}));
  EXPECT_EQ(r.code, 2);
  ExpectOneErrorLine(r, {"--random_feeds"});

  r = Cli(RunArgs({"--feed", "x"}));
  EXPECT_EQ(r.code, 2);
  ExpectOneErrorLine(r, {"NAME=FILE"});

  r = Cli(RunArgs({"--mesh"}));
  EXPECT_EQ(r.code, 2);

  r = Cli({"launch"});
  EXPECT_EQ(r.code, 2);
  ExpectOneErrorLine(r, {"'launch'"});

  r = Cli({});
  EXPECT_EQ(r.code, 2);
  ExpectOneErrorLine(r, {"--help"});

  r = Cli({"ops", "--verbose"});
  EXPECT_EQ(r.code, 2);
  ExpectOneErrorLine(r, {"--verbose"});
}

TEST(CliTest, OpsListsEveryOpWithItsCollectives) {
  const Result r = Cli({"ops"});
  ASSERT_EQ(r.code, 0) << r.err;
  std::istringstream lines(r.out);
  std::string line;
  std::map<std::string, std::string> rows;
  while (std::getline(lines, line)) rows[line.substr(0, line.find(' '))] = line;
  for (const OpInfo& op : AllOps()) EXPECT_TRUE(rows.count(op.type)) << op.type;
  EXPECT_TRUE(absl::StrContains(rows["einsum"], "allreduce(sum) + reshard"));
  EXPECT_TRUE(absl::StrContains(rows["reduce_max"], "allreduce(max)"));
  EXPECT_TRUE(absl::StrContains(rows["reduce_mean"], "allreduce(sum)"));
  EXPECT_TRUE(absl::StrContains(rows["reshape"], "allgather / alltoall / local slice"));
  EXPECT_TRUE(absl::StrContains(rows["add"], " none "));
  EXPECT_TRUE(absl::StrContains(rows["add"], " yes "));        // core/train/autodiff.cc has its rule
  EXPECT_TRUE(absl::StrContains(rows["layer_norm"], " yes "));
  // Every differentiable op has a gradient rule; the state ops are not differentiable.
  EXPECT_FALSE(absl::StrContains(r.out, "not yet")) << r.out;
  EXPECT_TRUE(absl::StrContains(rows["variable"], "initializer"));
  EXPECT_TRUE(absl::StrContains(rows["placeholder"], "local slice"));
}

// The GRADIENT, FAST and COST columns show each op's facets from its record and the fast-kernel
// table.
TEST(CliTest, OpsShowsEachOpsFacets) {
  const Result r = Cli({"ops"});
  ASSERT_EQ(r.code, 0) << r.err;
  std::istringstream lines(r.out);
  std::string line;
  std::map<std::string, std::vector<std::string>> columns;  // the first eight, split on spaces
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::vector<std::string> row;
    std::string w;
    while (row.size() < 8 && words >> w) row.push_back(w);
    columns[row[0]] = row;
  }
  // TYPE FAMILY INPUTS DIFFERENTIABLE GRADIENT FAST COST ...
  ASSERT_EQ(columns["TYPE"][4], "GRADIENT");
  ASSERT_EQ(columns["TYPE"][5], "FAST");
  ASSERT_EQ(columns["TYPE"][6], "COST");
  auto facets = [&](const std::string& type) {
    const std::vector<std::string>& row = columns[type];
    return row.size() < 7 ? std::string("?") : absl::StrCat(row[4], " ", row[5], " ", row[6]);
  };
  EXPECT_EQ(facets("einsum"), "yes yes default");
  EXPECT_EQ(facets("exp"), "yes yes override");
  EXPECT_EQ(facets("less"), "zero yes default");
  EXPECT_EQ(facets("slice"), "yes - default");
  EXPECT_EQ(facets("conv2d"), "yes - override");
  EXPECT_EQ(facets("argmax"), "zero - default");
  EXPECT_EQ(facets("while_loop"), "- - default");
  for (const OpInfo& op : AllOps()) {
    ASSERT_TRUE(columns.count(op.type)) << op.type;
    const std::string want = op.gradient != nullptr ? "yes" : op.zero_gradient ? "zero" : "-";
    EXPECT_EQ(columns[op.type][4], want) << op.type;
    EXPECT_EQ(columns[op.type][6], op.cost != nullptr ? "override" : "default") << op.type;
  }
}

TEST(CliTest, HelpDescribesCommandsAndFlags) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"--help"}, {"help"}, {"-h"}}) {
    const Result r = Cli(args);
    ASSERT_EQ(r.code, 0);
    for (const char* part :
         {"run ", "explain ", "local ", "ops ", "help ",
          "meshrt run examples/graphs/mlp_forward.pbtxt --mesh rows:2,cols:2 "
          "--layout batch:rows,hidden:cols --local 4 --random_feeds 1 --print"}) {
      EXPECT_TRUE(absl::StrContains(r.out, part)) << part;
    }
  }
  Result r = Cli({"run", "--help"});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* flag : {"usage: meshrt run GRAPH", "--mesh", "--layout", "--reference",
                           "--local", "--coordinator", "--feed", "--fetch", "--random_feeds",
                           "--save_feeds", "--fetch_all", "--print", "example", "default"}) {
    EXPECT_TRUE(absl::StrContains(r.out, flag)) << flag;
  }
  EXPECT_EQ(Cli({"help", "run"}).out, r.out);
  for (const char* command : {"explain", "local", "ops"}) {
    r = Cli({command, "--help"});
    ASSERT_EQ(r.code, 0) << command;
    EXPECT_TRUE(absl::StrContains(r.out, absl::StrCat("usage: meshrt ", command))) << r.out;
    EXPECT_TRUE(absl::StrContains(r.out, "example")) << r.out;
  }
}

}  // namespace
}  // namespace meshrt
