// Property test: thousands of random graphs x meshes x layouts on the simulated mesh. Every valid
// case equals the reference interpreter; every invalid layout is refused with InvalidArgument
// naming a tensor, before anything runs. A failure prints a reproducer: seed, mesh, layout and the
// smallest prefix of the graph that still fails, in text format.
#include <cstdlib>
#include <iostream>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/lowering/lowering.h"
#include "gtest/gtest.h"
#include "kernels/cpu_kernels.h"
#include "runtime/simulated_mesh.h"
#include "tests/graph_generator.h"

namespace meshrt {
namespace {

constexpr double kTolerance = 1e-4;

// Empty when the case passes; otherwise what went wrong.
std::string Check(const GeneratedCase& c, bool* valid_layout) {
  absl::StatusOr<Graph> graph = Graph::Build(c.graph);
  if (!graph.ok()) return absl::StrCat("generated graph invalid: ", graph.status().ToString());
  Mesh mesh = Mesh::Parse(c.mesh).value();
  LayoutRules rules = LayoutRules::Parse(c.layout, mesh).value();
  *valid_layout = LayoutIsValid(*graph, mesh, rules);
  absl::StatusOr<v1::Program> program = Lower(*graph, mesh, rules);
  if (!*valid_layout) {
    if (program.ok()) return "an invalid layout was accepted";
    if (program.status().code() != absl::StatusCode::kInvalidArgument ||
        std::string(program.status().message()).find("tensor '") == std::string::npos) {
      return absl::StrCat("an invalid layout was refused with the wrong error: ",
                          program.status().ToString());
    }
    return "";
  }
  if (!program.ok()) return absl::StrCat("lowering failed: ", program.status().ToString());
  const TensorMap feeds = GeneratedFeeds(*graph, c.seed);
  absl::StatusOr<TensorMap> want = Interpret(*graph, feeds);
  if (!want.ok()) return absl::StrCat("interpreter failed: ", want.status().ToString());
  SimulatedMeshOptions options;
  options.kernels = &CpuKernels();
  options.timeout = absl::Seconds(10);
  absl::StatusOr<TensorMap> got = RunOnSimulatedMesh(*program, feeds, options);
  if (!got.ok()) return absl::StrCat("simulated mesh failed: ", got.status().ToString());
  for (const auto& [name, value] : *want) {
    auto it = got->find(name);
    if (it == got->end()) return absl::StrCat("tensor ", name, " missing");
    double err = MaxRelativeError(it->second, value);
    if (!(err <= kTolerance)) return absl::StrCat("tensor ", name, " differs: error ", err);
  }
  return "";
}

// The shortest prefix of the graph's ops that still fails (ops are emitted in dependency order).
GeneratedCase Shrink(const GeneratedCase& c) {
  GeneratedCase best = c;
  for (int n = 1; n < c.graph.ops_size(); ++n) {
    GeneratedCase t = c;
    t.graph.mutable_ops()->DeleteSubrange(n, c.graph.ops_size() - n);
    t.graph.clear_outputs();
    bool valid = false;
    if (!Check(t, &valid).empty()) return t;
  }
  return best;
}

int CaseCount() {
  int n = 5000;
  if (const char* env = std::getenv("MESHRT_PROPERTY_CASES")) (void)absl::SimpleAtoi(env, &n);
  return n;
}

TEST(PropertyTest, RandomGraphsMeshesAndLayoutsMatchTheInterpreter) {
  int valid = 0, invalid = 0, failures = 0, ran = 0;
  std::map<std::string, int> op_counts;  // op types in the cases run, to show what was covered
  const int n = CaseCount();
  for (int i = 0; i < n && failures < 3; ++i, ++ran) {
    const GeneratedCase c = GenerateCase(1000 + i);
    bool valid_layout = false;
    const std::string problem = Check(c, &valid_layout);
    (valid_layout ? valid : invalid)++;
    if (valid_layout) {
      for (const v1::Op& op : c.graph.ops()) ++op_counts[op.type()];
    }
    if (!problem.empty()) {
      ++failures;
      ADD_FAILURE() << problem << "\nreproducer (shrunk): " << Describe(Shrink(c));
    }
  }
  std::cout << "property test: " << ran << " cases, " << valid << " valid layouts run and compared, "
            << invalid << " invalid layouts refused\n";
  std::cout << "op types run (count):";
  for (const auto& [type, count] : op_counts) std::cout << " " << type << "=" << count;
  std::cout << "\n";
  EXPECT_GT(valid, n / 3);
  EXPECT_GE(op_counts.size(), 30u) << "the generator should mix every op family";
  EXPECT_GT(invalid, n / 20);
}

}  // namespace
}  // namespace meshrt
