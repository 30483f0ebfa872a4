// How long the planner (core/planner.h) takes to choose a layout, and what it chooses, for the
// Transformer LM's training graph at the size issue 15 names: 24 layers on a 64-processor mesh.
//
//   bazel run -c opt //bench:planner_bench [-- --layers 24 --mesh rows:8,cols:8 | --mesh auto:64
//       --profile FILE --memory_limit 16G]
//
// Prints the graph's size, the lowering time of one candidate, and the planner's report
// (ExplainPlan: the chosen rules, the next candidates, their predicted time and memory, how many
// candidates were searched in how long). The goal (issue 15 item 5): <= 2 s on this machine.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/cost_model.h"
#include "core/layout_search.h"
#include "core/lowering.h"
#include "core/memory_model.h"
#include "core/planner.h"
#include "models/train.h"
#include "models/transformer.h"
#include "util/flags.h"

namespace meshrt {
namespace {

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

int Main(int argc, char** argv) {
  int64_t layers = 24, d_model = 1024, heads = 16, d_ff = 4096, length = 256, batch = 64;
  int64_t vocab = 32768, threads = 0;
  std::string mesh_text = "rows:8,cols:8", profile_path, memory_limit = "0";
  std::string rules_text = "batch:rows,heads:cols,d_ff:cols,vocab:cols";
  FlagSet flags("planner_bench [--layers N] [--mesh M | auto:N] [--profile FILE]",
                "Times the planner's layout search on the Transformer LM training graph.");
  flags.Int("layers", &layers, "Transformer layers (default 24)");
  flags.Int("d_model", &d_model, "default 1024");
  flags.Int("heads", &heads, "default 16 (d_kv = d_model / heads)");
  flags.Int("d_ff", &d_ff, "default 4096");
  flags.Int("length", &length, "default 256");
  flags.Int("batch", &batch, "default 64");
  flags.Int("vocab", &vocab, "default 32768");
  flags.String("mesh", &mesh_text, "the mesh, or auto:N for every mesh of N processors");
  flags.String("profile", &profile_path,
               "a hardware profile (meshrt calibrate); default: built in");
  flags.String("memory_limit", &memory_limit, "per-worker bytes (e.g. 16G); 0: none");
  flags.Int("threads", &threads, "threads lowering candidates (default 0: one per core)");
  flags.String("rules", &rules_text,
               "the candidate timed alone on the first mesh (default: the paper's layout)");
  auto parsed = flags.Parse(argc, argv);
  if (!parsed.ok() || flags.help()) {
    if (!parsed.ok()) std::fprintf(stderr, "%s\n", parsed.status().ToString().c_str());
    std::printf("%s", flags.Help().c_str());
    return parsed.ok() ? 0 : 2;
  }
  models::TransformerOptions t;
  t.layers = layers;
  t.d_model = d_model;
  t.heads = heads;
  t.d_kv = d_model / heads;
  t.d_ff = d_ff;
  t.length = length;
  t.batch = batch;
  t.vocab = vocab;
  TrainOptions train;
  train.optimizer = "adam";
  auto start = std::chrono::steady_clock::now();
  absl::StatusOr<models::TrainGraph> tg = models::BuildTransformerTrainGraph(t, train);
  if (!tg.ok()) {
    std::fprintf(stderr, "%s\n", tg.status().ToString().c_str());
    return 1;
  }
  std::printf("graph: %d ops (%d layers, training, adam), built in %.2f s\n",
              tg->graph.proto().ops_size(), static_cast<int>(layers), Seconds(start));

  std::vector<Mesh> meshes;
  if (absl::StatusOr<int> n = ParseAutoMesh(mesh_text); n.ok()) {
    meshes = *MeshesFor(*n);
  } else if (absl::StatusOr<Mesh> m = Mesh::Parse(mesh_text); m.ok()) {
    meshes = {*m};
  } else {
    std::fprintf(stderr, "--mesh: %s\n", m.status().ToString().c_str());
    return 2;
  }
  PlanOptions o;
  o.profile.collectives = DefaultCollectiveLinks();
  if (!profile_path.empty()) {
    absl::StatusOr<HardwareProfile> p = LoadHardwareProfile(profile_path);
    if (!p.ok()) {
      std::fprintf(stderr, "%s\n", p.status().ToString().c_str());
      return 2;
    }
    o.profile = *p;
  }
  absl::StatusOr<int64_t> limit = ParseByteSize(memory_limit, "--memory_limit");
  if (!limit.ok()) {
    std::fprintf(stderr, "%s\n", limit.status().ToString().c_str());
    return 2;
  }
  o.memory_limit_bytes = *limit;
  o.search.threads = static_cast<int>(threads);
  o.fetches = {tg->loss};

  // One candidate's parts, for the report.
  absl::StatusOr<LayoutRules> one = LayoutRules::Parse(rules_text, meshes[0]);
  if (!one.ok()) {
    std::fprintf(stderr, "--rules: %s\n", one.status().ToString().c_str());
    return 2;
  }
  start = std::chrono::steady_clock::now();
  absl::StatusOr<v1::Program> program = Lower(tg->graph, meshes[0], *one);
  const double lower_s = Seconds(start);
  if (!program.ok()) {
    std::fprintf(stderr, "%s\n", program.status().ToString().c_str());
    return 1;
  }
  start = std::chrono::steady_clock::now();
  (void)CostProgram(*program, o.profile, &o.fetches);
  const double cost_s = Seconds(start);
  start = std::chrono::steady_clock::now();
  MemoryOptions mo;
  mo.fetches = &o.fetches;
  (void)ComputeMemory(*program, mo);
  const double memory_s = Seconds(start);
  std::printf(
      "one candidate (%s on %s): %d instructions; lower %.1f ms, cost %.1f ms, "
      "memory %.1f ms\n",
      rules_text.c_str(), meshes[0].ToString().c_str(), program->instructions_size(), lower_s * 1e3,
      cost_s * 1e3, memory_s * 1e3);

  absl::StatusOr<Plan> plan = PlanLayout(tg->graph, meshes, o);
  if (!plan.ok()) {
    std::fprintf(stderr, "%s\n", plan.status().ToString().c_str());
    return 1;
  }
  std::printf("%s", ExplainPlan(*plan).c_str());
  std::printf("goal: search <= 2 s: %s (%.2f s)\n", plan->search_seconds <= 2 ? "met" : "MISSED",
              plan->search_seconds);
  return 0;
}

}  // namespace
}  // namespace meshrt

int main(int argc, char** argv) { return meshrt::Main(argc, argv); }
