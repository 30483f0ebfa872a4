// `make demo`: builds the MLP forward graph with the C++ builder, lowers it for two layouts on a
// 2x2 mesh, prints each tensor's layout and slice shape and the program's collectives, runs it on
// the simulated mesh with the workers' CPU kernels, and compares every output with the
// single-process reference interpreter. Exit code 0 only when every comparison passes.
#include <cstdio>
#include <random>

#include "absl/strings/str_format.h"
#include "core/builder.h"
#include "core/explain.h"
#include "core/interpreter.h"
#include "core/lowering.h"
#include "kernels/blas.h"
#include "kernels/cpu_kernels.h"
#include "runtime/simulated_mesh.h"

namespace meshrt {
namespace {

constexpr double kTolerance = 1e-5;

Graph BuildMlp() {
  GraphBuilder b;
  TensorRef x = b.Placeholder("x", Shape({{"batch", 8}, {"d_in", 16}}));
  TensorRef w1 = b.Placeholder("w1", Shape({{"d_in", 16}, {"hidden", 32}}));
  TensorRef w2 = b.Placeholder("w2", Shape({{"hidden", 32}, {"d_out", 8}}));
  TensorRef h = b.Relu(b.Einsum({x, w1}, Shape({{"batch", 8}, {"hidden", 32}}), "h"), "r");
  TensorRef y = b.Einsum({h, w2}, Shape({{"batch", 8}, {"d_out", 8}}), "y");
  b.MarkOutput(y);
  b.MarkOutput(b.ReduceSum(y, {"d_out"}, "s"));
  return b.Build().value();
}

bool RunLayout(const Graph& graph, const TensorMap& feeds, const TensorMap& expected,
               const std::string& mesh_text, const std::string& layout_text) {
  std::printf("\n== mesh %s, layout %s ==\n", mesh_text.c_str(), layout_text.c_str());
  Mesh mesh = Mesh::Parse(mesh_text).value();
  absl::StatusOr<LayoutRules> rules = LayoutRules::Parse(layout_text, mesh);
  if (!rules.ok()) {
    std::printf("error: %s\n", std::string(rules.status().message()).c_str());
    return false;
  }
  absl::StatusOr<v1::Program> program = Lower(graph, mesh, *rules);
  if (!program.ok()) {
    std::printf("error: %s\n", std::string(program.status().message()).c_str());
    return false;
  }
  std::printf("%s", ExplainProgram(*program).c_str());
  SimulatedMeshOptions options;
  options.kernels = &CpuKernels();
  absl::StatusOr<TensorMap> got = RunOnSimulatedMesh(*program, feeds, options);
  if (!got.ok()) {
    std::printf("error: %s\n", std::string(got.status().message()).c_str());
    return false;
  }
  bool ok = true;
  std::printf("simulated mesh (%d workers) vs reference interpreter:\n", mesh.num_processors());
  for (const std::string& name : graph.Outputs()) {
    double err = MaxRelativeError(got->at(name), expected.at(name));
    ok = ok && err <= kTolerance;
    std::printf("  %-4s max relative error %.2e  %s\n", name.c_str(), err,
                err <= kTolerance ? "ok" : "MISMATCH");
  }
  return ok;
}

int Main() {
  std::printf("meshrt demo: MLP forward, y = relu(x[batch:8,d_in:16] . w1[d_in,hidden:32]) . "
              "w2[hidden,d_out:8], s = sum_d_out(y)\n");
  std::printf("kernels: OpenBLAS core %s (%s)\n", kernels::GetBlas().corename().c_str(),
              kernels::GetBlas().reason().c_str());
  const Graph graph = BuildMlp();
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  TensorMap feeds;
  for (const std::string& name : graph.Placeholders()) {
    Tensor t(DType::kFloat32, graph.type(name).shape);
    for (int64_t i = 0; i < t.num_elements(); ++i) t.f32()[i] = dist(rng);
    feeds[name] = std::move(t);
  }
  TensorMap expected = Interpret(graph, feeds).value();
  bool ok = RunLayout(graph, feeds, expected, "rows:2,cols:2", "batch:rows,hidden:cols");
  ok = RunLayout(graph, feeds, expected, "rows:2,cols:2", "d_in:rows,hidden:cols") && ok;
  std::printf("\ndemo: %s\n", ok ? "PASS — both layouts equal the reference interpreter"
                                 : "FAIL — see the mismatches above");
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace meshrt

int main() { return meshrt::Main(); }
