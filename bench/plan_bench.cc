// The planner's time model checked against reality (issue 15 item 6): for (model, mesh, layout)
// cases — the MLP and the Transformer LM at two sizes under data parallel, model parallel, both
// on 2x2, fully replicated and odd layouts — the step time core/planning/cost_model.h predicts under a
// profile calibrated on this machine (client/calibrate.h, once per worker count) against the
// step time measured on a fresh local cluster of worker processes (bench/train_runs.h RunOurs:
// the median of --steps timed steps of one request each, after --warmup; in --passes passes over
// every case, the median over passes). Prints a Markdown table
// (predicted compute / communication / step overhead, measured, error, predicted peak memory per
// worker), then the goals (bench/plan_stats.h) as met / MISSED, never asserted. Last, per model,
// the planner's layout on x:2 (core/planning/planner.h under the same profile) is measured the same way,
// and for the goal it and the best hand layout of the passes are measured again in turn on one
// cluster (--rounds; bench/train_runs.h RunOursAlternating), the auto within 5% of the hand.
//
// Each worker count gets its own profile: 4 worker processes on this machine's 2 cores share
// them, and a calibration on 4 workers measures the rates a 4-worker case sees.
//
//   bazel run -c opt //bench:plan_bench [-- --quick --steps N --warmup N --passes N --rounds N
//       --only SUBSTRING --profiles DIR --calibrate_each --per_instruction]
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/instruction_times.h"
#include "bench/plan_stats.h"
#include "bench/train_runs.h"
#include "client/calibrate.h"
#include "client/client.h"
#include "client/local_cluster.h"
#include "core/ir/mesh.h"
#include "core/lowering/lowering.h"
#include "core/planning/cost_model.h"
#include "core/planning/explain.h"
#include "core/planning/memory_model.h"
#include "core/planning/planner.h"
#include "models/train.h"
#include "util/flags.h"

namespace meshrt {
namespace bench {
namespace {

[[noreturn]] void Fail(const std::string& what, const absl::Status& s) {
  std::fprintf(stderr, "plan_bench: %s: %s\n", what.c_str(), s.ToString().c_str());
  std::exit(1);
}

// The ranking group of a case: its model (and size).
std::string Group(const TrainConfig& c) {
  return c.size.empty() ? c.model : absl::StrCat(c.model, " ", c.size);
}

std::string Key(const TrainConfig& c) { return absl::StrCat(Group(c), " ", c.name); }

// Every case: name, mesh, layout, workers. `quick` keeps the 2-worker cases of the MLP and the
// small Transformer (a few minutes on 2 cores).
std::vector<TrainConfig> Cases(bool quick) {
  std::vector<TrainConfig> cases = {
      {"mlp", "", "dp", "x:2", "batch:x", 2},
      {"mlp", "", "mp", "x:2", "d_ff:x", 2},
      {"mlp", "", "replicated", "x:2", "", 2},
      {"mlp", "", "d_model", "x:2", "d_model:x", 2},
      {"mlp", "", "dpmp", "rows:2,cols:2", "batch:rows,d_ff:cols", 4},
  };
  for (const std::string size : {"small", "model"}) {
    std::vector<TrainConfig> t = {
        {"transformer", size, "dp", "x:2", "batch:x", 2},
        {"transformer", size, "mp", "x:2", "heads:x,d_ff:x,vocab:x", 2},
        {"transformer", size, "replicated", "x:2", "", 2},
        {"transformer", size, "vocab", "x:2", "vocab:x", 2},
        {"transformer", size, "d_model", "x:2", "d_model:x", 2},
        {"transformer", size, "dpmp", "rows:2,cols:2", "batch:rows,heads:cols,d_ff:cols,vocab:cols",
         4},
    };
    cases.insert(cases.end(), t.begin(), t.end());
  }
  if (!quick) return cases;
  std::vector<TrainConfig> kept;
  for (const TrainConfig& c : cases) {
    if (c.workers == 2 && c.size != "model" && c.name != "d_model") kept.push_back(c);
  }
  return kept;
}

// The same graph for every layout of a model (the MLP without the input gradient), so that the
// layouts rank the same work.
absl::StatusOr<models::TrainGraph> BuildGraph(const TrainConfig& c) {
  TrainOptions train;
  train.optimizer = "sgd";
  if (c.model == "mlp") {
    models::MlpOptions m;  // batch 256, d_model 1024, d_ff 4096
    m.biases = true;
    m.fixed_data = true;
    train.learning_rate.base = 1e-3f;
    return models::BuildMlpTrainGraph(m, train);
  }
  train.learning_rate.base = 0.1f;
  return models::BuildTransformerTrainGraph(TransformerOf(c.size), train);
}

LocalClusterOptions ClusterOptions(int workers) {
  LocalClusterOptions options;
  options.workers = workers;
  options.coordinator_command = {"client/meshrt", "coordinator"};
  options.worker_command = {"client/meshrt", "worker"};
  char pattern[] = "/tmp/plan_bench-XXXXXX";
  if (mkdtemp(pattern) == nullptr) Fail("mkdtemp", absl::InternalError("cannot make a log dir"));
  options.log_dir = pattern;
  return options;
}

// A profile measured on a fresh local cluster of `workers` workers.
HardwareProfile CalibrateOn(int workers, int steps) {
  auto cluster = LocalCluster::Start(ClusterOptions(workers));
  if (!cluster.ok()) Fail("starting the local cluster", cluster.status());
  auto client = Client::Connect((*cluster)->client_options());
  if (!client.ok()) Fail("connecting", client.status());
  CalibrateOptions options;
  options.workers = workers;
  options.steps = steps;
  // Every case of more than 2 workers is on rows:2,cols:2, whose collectives run in groups of 2
  // (two at once, on the same-host path), not in the TCP ring of all 4 that x:4 would measure.
  if (workers > 2) options.collective_group = 2;
  absl::StatusOr<Calibration> c = Calibrate(**client, options);
  if (!c.ok()) Fail(absl::StrCat("calibrating ", workers, " workers"), c.status());
  return ToHardwareProfile(
      *c, absl::StrCat("calibrated on a local cluster of ", workers, " workers by plan_bench"));
}

// The profile of `workers` workers: read from `dir`/workers_W.profile when it exists, else
// calibrated (and written there when `dir` is set).
HardwareProfile ProfileFor(int workers, int steps, const std::string& dir) {
  const std::string path = absl::StrCat(dir, "/workers_", workers, ".profile");
  if (!dir.empty() && access(path.c_str(), R_OK) == 0) {
    absl::StatusOr<HardwareProfile> p = LoadHardwareProfile(path);
    if (!p.ok()) Fail("reading " + path, p.status());
    std::fprintf(stderr, "profile of %d workers read from %s\n", workers, path.c_str());
    return *p;
  }
  std::fprintf(stderr, "calibrating %d workers ...\n", workers);
  HardwareProfile p = CalibrateOn(workers, steps);
  if (!dir.empty()) {
    std::ofstream(path) << FormatHardwareProfile(p);
    std::fprintf(stderr, "  written to %s\n", path.c_str());
  }
  return p;
}

struct Prediction {
  v1::Program program;
  ProgramCost cost;
  int64_t peak_bytes = 0;
};

// Borrows both.
MemoryOptions MemoryOptionsOf(const models::TrainGraph& tg,
                              const std::vector<std::string>& fetches) {
  MemoryOptions mo;
  mo.fetches = &fetches;
  mo.trainable = &tg.trainable;
  return mo;
}

// The local instructions of `p` by class (op type; einsums of two operands by the profile's GEMM
// class), predicted compute against each run alone in this process (bench/instruction_times.h).
void PrintPerInstruction(const std::string& key, const Prediction& p,
                         const HardwareProfile& profile, const std::vector<std::string>& fetches) {
  absl::StatusOr<std::vector<double>> seconds = LocalInstructionSeconds(p.program, fetches, 3);
  if (!seconds.ok()) Fail("timing the instructions of " + key, seconds.status());
  struct Row {
    int count = 0, failed = 0;
    double flops = 0, bytes = 0, predicted = 0, measured = 0;
  };
  std::map<std::string, Row> rows;
  Row all;
  for (const InstructionCost& c : p.cost.instructions) {
    if (!c.runs || c.fused || c.kind == "local_slice" || c.comm_s > 0 || c.sent_bytes > 0) {
      continue;
    }
    if (c.compute_s == 0 && (*seconds)[c.index] == 0) continue;  // collectives of one
    const std::string cls =
        c.gemm ? (c.flops / static_cast<double>(c.gemm_batch) >= profile.gemm_large_flops
                      ? "einsum (gemm large)"
                      : "einsum (gemm small)")
               : c.kind;
    for (Row* r : {&rows[cls], &all}) {
      ++r->count;
      if ((*seconds)[c.index] < 0) {
        ++r->failed;
        continue;
      }
      r->flops += c.flops;
      r->bytes += c.bytes_read + c.bytes_written;
      r->predicted += c.compute_s;
      r->measured += (*seconds)[c.index];
    }
  }
  std::printf(
      "\n%s: local instructions, predicted compute vs each run alone in process\n\n"
      "| class | count | GFLOP | MiB moved | predicted ms | alone ms | GFLOP/s alone | "
      "predicted/alone |\n|---|---|---|---|---|---|---|---|\n",
      key.c_str());
  rows["(all)"] = all;
  for (const auto& [cls, r] : rows) {
    std::printf("| %s | %d%s | %.3f | %.1f | %.2f | %.2f | %.1f | %.2f |\n", cls.c_str(), r.count,
                r.failed ? absl::StrCat(" (", r.failed, " failed)").c_str() : "", r.flops / 1e9,
                r.bytes / (1 << 20), 1e3 * r.predicted, 1e3 * r.measured,
                r.measured > 0 ? r.flops / r.measured / 1e9 : 0,
                r.measured > 0 ? r.predicted / r.measured : 0);
  }
}

Prediction Predict(const TrainConfig& c, const models::TrainGraph& tg,
                   const HardwareProfile& profile) {
  absl::StatusOr<Mesh> mesh = Mesh::Parse(c.mesh);
  if (!mesh.ok()) Fail("mesh " + c.mesh, mesh.status());
  absl::StatusOr<LayoutRules> rules = LayoutRules::Parse(c.layout, *mesh);
  if (!rules.ok()) Fail("layout " + c.layout, rules.status());
  absl::StatusOr<v1::Program> program = Lower(tg.graph, *mesh, *rules);
  if (!program.ok()) Fail("lowering " + Key(c), program.status());
  const std::vector<std::string> fetches = {tg.loss};
  Prediction p;
  // With the executor's fusions (StepFusedGroups), as every CostProgram.
  absl::StatusOr<ProgramCost> cost = CostProgram(*program, profile, &fetches);
  absl::StatusOr<MemoryReport> memory = ComputeMemory(*program, MemoryOptionsOf(tg, fetches));
  if (!cost.ok()) Fail("costing " + Key(c), cost.status());
  p.cost = *std::move(cost);
  p.program = *std::move(program);
  if (!memory.ok()) Fail("memory of " + Key(c), memory.status());
  p.peak_bytes = memory->peak_bytes;
  return p;
}

struct CaseResult {
  TrainConfig config;
  HardwareProfile profile;  // the prediction's
  Prediction prediction;
  double measured_ms = -1;             // the median over passes
  std::vector<double> passes_ms;       // each pass's median step
  // Auto cases: the best hand layout of the passes and both, measured again side by side on one
  // cluster (RunOursAlternating): the goal's comparison.
  std::string best_hand;
  double side_auto_ms = -1, side_hand_ms = -1;
};

// /proc/loadavg's first three fields.
std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string one, five, fifteen;
  in >> one >> five >> fifteen;
  return absl::StrCat(one, " ", five, " ", fifteen);
}

const char* Verdict(bool met) { return met ? "met" : "MISSED"; }

// The planner's choice for `group` on mesh x:2 (the hand cases' 2-worker mesh) under `profile`,
// as a case named "auto".
TrainConfig AutoCase(const TrainConfig& like, const models::TrainGraph& tg,
                     const HardwareProfile& profile) {
  PlanOptions o;
  o.profile = profile;
  o.fetches = {tg.loss};
  absl::StatusOr<Plan> plan = PlanLayout(tg.graph, {*Mesh::Parse("x:2")}, o);
  if (!plan.ok()) Fail("planning " + Group(like), plan.status());
  std::fprintf(stderr, "%s: %s", Group(like).c_str(), ExplainPlan(*plan).c_str());
  TrainConfig c = like;
  c.name = "auto";
  c.mesh = "x:2";
  c.layout = plan->best[0].rules.ToString();
  c.workers = 2;
  return c;
}

// The hand case of `a`'s model and mesh with the shortest measured step; null for none.
const CaseResult* BestHand(const std::vector<CaseResult>& results, const CaseResult& a) {
  const CaseResult* best = nullptr;
  for (const CaseResult& h : results) {
    if (Group(h.config) != Group(a.config) || h.config.mesh != a.config.mesh) continue;
    if (best == nullptr || h.measured_ms < best->measured_ms) best = &h;
  }
  return best;
}

void PrintTable(const std::vector<CaseResult>& results, const std::vector<CaseResult>& autos,
                const std::string& load_start, const std::string& load_end,
                const std::map<int, HardwareProfile>& profiles, bool calibrate_each,
                double minutes) {
  std::printf("# plan_bench: predicted vs measured step time (issue 15 item 6)\n\n");
  std::printf("load average (/proc/loadavg) at the start %s, at the end %s; %.1f min\n\n",
              load_start.c_str(), load_end.c_str(), minutes);
  if (calibrate_each) {
    std::printf(
        "calibrated before every case (--calibrate_each): GEMM large / small, elementwise "
        "GFLOP/s, memory GB/s, step overhead ms, allreduce alpha ms / beta GB/s\n\n");
    for (const CaseResult& r : results) {
      const HardwareProfile& p = r.profile;
      const CollectiveLink& ar = p.collectives.at("allreduce");
      std::printf("- %s: %.1f / %.1f, %.2f, %.2f, %.2f, %.3f / %.2f\n", Key(r.config).c_str(),
                  p.gemm_large_flops_per_s / 1e9, p.gemm_small_flops_per_s / 1e9,
                  p.elementwise_flops_per_s / 1e9, p.memory_bytes_per_s / 1e9,
                  1e3 * p.step_overhead_s, 1e3 * ar.alpha_s, ar.beta_bytes_per_s / 1e9);
    }
  } else {
    for (const auto& [workers, p] : profiles) {
      std::printf("profile of %d workers (%s):\n```\n%s```\n", workers, p.source.c_str(),
                  FormatHardwareProfile(p).c_str());
    }
  }
  std::printf(
      "\n| case | mesh | layout | predicted ms (compute / comm / overhead) | measured ms (range "
      "over passes) | error | "
      "peak memory |\n|---|---|---|---|---|---|---|\n");
  auto print_row = [](const CaseResult& r) {
    const OpCostTotal& t = r.prediction.cost.total;
    const double predicted = 1e3 * r.prediction.cost.step_s;
    std::string range;
    if (r.passes_ms.size() > 1) {
      const auto [lo, hi] = std::minmax_element(r.passes_ms.begin(), r.passes_ms.end());
      range = absl::StrFormat(" (%.1f–%.1f)", *lo, *hi);
    }
    std::printf("| %s | %s | %s | %.1f (%.1f / %.1f / %.1f) | %.1f%s | %+.1f%% | %s |\n",
                Key(r.config).c_str(), r.config.mesh.c_str(),
                r.config.layout.empty() ? "(replicated)" : r.config.layout.c_str(), predicted,
                1e3 * t.compute_s, 1e3 * t.comm_s, 1e3 * r.prediction.cost.overhead_s,
                r.measured_ms, range.c_str(), ErrorPercent(predicted, r.measured_ms),
                HumanBytes(r.prediction.peak_bytes).c_str());
  };
  std::vector<PlanRow> rows;
  for (const CaseResult& r : results) {
    rows.push_back({Group(r.config), r.config.name, 1e3 * r.prediction.cost.step_s, r.measured_ms});
    print_row(r);
  }
  // The planner's choices (not ranked: each may be one of the hand layouts).
  std::vector<std::string> auto_verdicts;
  bool autos_met = !autos.empty();
  for (const CaseResult& r : autos) {
    print_row(r);
    const CaseResult* h = BestHand(results, r);
    const double ratio = r.side_hand_ms > 0 ? r.side_auto_ms / r.side_hand_ms : 0;
    const bool met = h != nullptr && r.side_hand_ms > 0 && ratio <= 1.05;
    autos_met = autos_met && met;
    const std::string layout = r.config.layout.empty() ? "(replicated)" : r.config.layout;
    auto_verdicts.push_back(
        h == nullptr
            ? absl::StrFormat("%s: no hand layout on %s", Group(r.config), r.config.mesh)
            : absl::StrFormat(
                  "%s: auto (%s) %.1f ms vs the best hand layout of the passes on %s (%s, `%s`) "
                  "%.1f ms side by side on one cluster = %.3fx: %s (in the passes %.1f vs %.1f ms)",
                  Group(r.config), layout, r.side_auto_ms, r.config.mesh, h->config.name,
                  h->config.layout, r.side_hand_ms, ratio, Verdict(met), r.measured_ms,
                  h->measured_ms));
  }
  std::printf("\n");
  const PlanGoals g = CheckPlanGoals(rows);
  std::printf("Goals (issue 15 item 6):\n");
  std::printf("- median |error| %.1f%% (<= %.0f%%): %s\n", g.median_abs_error,
              kMedianErrorGoalPercent, Verdict(g.median_met));
  std::printf("- max |error| %.1f%% (%s; every case within +-%.0f%%): %s\n", g.max_abs_error,
              g.worst_case.c_str(), kMaxErrorGoalPercent, Verdict(g.max_met));
  for (const auto& [model, m] : g.rankings) {
    std::printf("- ranking of %s's %d layouts: Spearman %s (>= %.1f, >= %d cases): %s\n",
                model.c_str(), m.cases,
                m.spearman ? absl::StrFormat("%.3f", *m.spearman).c_str() : "n/a", kSpearmanGoal,
                kMinRankedCases, Verdict(m.met));
  }
  std::printf("- the auto layout's measured step within 5%% of the best hand layout's: %s\n",
              autos.empty() ? "NOT CHECKED (no model has a hand case on x:2)" : Verdict(autos_met));
  for (const std::string& v : auto_verdicts) std::printf("  - %s\n", v.c_str());
}

int Main(int argc, char** argv) {
  bool quick = false, per_instruction = false, calibrate_each = false;
  int64_t steps = 12, warmup = 3, model_steps = 6, calibrate_steps = 5, passes = 2, rounds = 3;
  std::string only, profiles_dir;
  RunOptions o;
  FlagSet flags(
      "plan_bench [--quick] [--steps N] [--warmup N] [--model_steps N] [--passes N] [--rounds N] "
      "[--only SUBSTRING] "
      "[--profiles DIR] [--overlap_comm=auto|true|false]",
      "The cost model's predicted step time against the measured one for the MLP and the "
      "Transformer LM (two sizes) under several meshes and layouts, on local clusters.");
  flags.Bool("quick", &quick,
             "2-worker MLP and small-Transformer cases only, 3 steps after 1 warmup (development)");
  flags.Int("steps", &steps, "timed steps per case (median), default 12");
  flags.Int("warmup", &warmup, "untimed steps first, default 3");
  flags.Int("model_steps", &model_steps,
            "timed steps per case of the model-scale Transformer, default 6");
  flags.Int("calibrate_steps", &calibrate_steps, "timed steps per calibration graph, default 5");
  flags.Int("passes", &passes,
            "passes over every case, each on a fresh cluster; a case's step is the median over "
            "passes of each pass's median, default 2");
  flags.Int("rounds", &rounds,
            "rounds of the auto-against-best-hand comparison, the two sessions in turn on one "
            "cluster, default 3");
  flags.String("only", &only,
               "only the cases whose name (e.g. 'transformer small dp') contains it");
  flags.String("profiles", &profiles_dir,
               "read DIR/workers_W.profile instead of calibrating when it exists; write it "
               "after calibrating otherwise");
  flags.Bool("calibrate_each", &calibrate_each,
             "calibrate afresh right before every case (not once per worker count; ignores "
             "--profiles): on a machine others load unevenly, the profile then sees the load the "
             "case sees");
  flags.Bool("per_instruction", &per_instruction,
             "also time every case's local instructions alone in this process against their "
             "predicted compute, by class (a diagnostic of the model; no cluster runs it)");
  flags.String("overlap_comm", &o.overlap_comm,
               "the workers' --overlap_comm: auto (their default), true or false");
  auto parsed = flags.Parse(argc, argv);
  if (!parsed.ok() || flags.help()) {
    if (!parsed.ok()) std::fprintf(stderr, "%s\n", parsed.status().ToString().c_str());
    std::printf("%s", flags.Help().c_str());
    return parsed.ok() ? 0 : 2;
  }
  if (steps < 1 || warmup < 0 || model_steps < 1 || calibrate_steps < 1 || passes < 1 ||
      rounds < 1) {
    std::fprintf(stderr,
                 "--steps, --model_steps, --calibrate_steps, --passes, --rounds need >= 1, "
                 "--warmup >= 0\n");
    return 2;
  }
  if (quick) {
    steps = std::min<int64_t>(steps, 3);
    model_steps = std::min<int64_t>(model_steps, 3);
    warmup = std::min<int64_t>(warmup, 1);
    passes = 1;
    rounds = 1;
  }
  o.batched = false;
  std::vector<TrainConfig> cases;
  for (TrainConfig c : Cases(quick)) {
    if (!only.empty() && !absl::StrContains(Key(c), only)) continue;
    c.steps = c.size == "model" ? model_steps : steps;
    c.warmup = warmup;
    cases.push_back(c);
  }
  if (cases.empty()) {
    std::fprintf(stderr, "no case matches --only '%s'\n", only.c_str());
    return 2;
  }
  const std::string load_start = LoadAverage();
  const absl::Time start = absl::Now();
  std::map<int, HardwareProfile> profiles;
  for (const TrainConfig& c : cases) {
    if (!calibrate_each && !profiles.count(c.workers)) {
      profiles[c.workers] = ProfileFor(c.workers, static_cast<int>(calibrate_steps), profiles_dir);
    }
  }
  std::map<std::string, models::TrainGraph> graphs;
  std::vector<CaseResult> results;
  for (const TrainConfig& c : cases) {
    const std::string group = Group(c);
    if (!graphs.count(group)) {
      auto tg = BuildGraph(c);
      if (!tg.ok()) Fail("building " + group, tg.status());
      graphs.emplace(group, *std::move(tg));
    }
    if (calibrate_each) {
      std::fprintf(stderr, "calibrating %d workers for %s ...\n", c.workers, Key(c).c_str());
      profiles[c.workers] = CalibrateOn(c.workers, static_cast<int>(calibrate_steps));
    }
    CaseResult r;
    r.config = c;
    r.profile = profiles.at(c.workers);
    r.prediction = Predict(c, graphs.at(group), r.profile);
    std::fprintf(stderr, "%s (mesh %s, layout '%s'): predicted %.1f ms\n", Key(c).c_str(),
                 c.mesh.c_str(), c.layout.c_str(), 1e3 * r.prediction.cost.step_s);
    if (per_instruction) {
      PrintPerInstruction(Key(c), r.prediction, profiles.at(c.workers), {graphs.at(group).loss});
    }
    results.push_back(std::move(r));
  }
  // The planner's layout per model, on the 2-worker mesh the hand layouts share.
  std::vector<CaseResult> autos;
  std::vector<std::string> planned;
  for (const TrainConfig& like : cases) {
    const std::string group = Group(like);
    if (like.workers != 2 || std::count(planned.begin(), planned.end(), group)) continue;
    planned.push_back(group);
    if (calibrate_each) profiles[2] = CalibrateOn(2, static_cast<int>(calibrate_steps));
    CaseResult r;
    r.config = AutoCase(like, graphs.at(group), profiles.at(2));
    r.profile = profiles.at(2);
    r.prediction = Predict(r.config, graphs.at(group), r.profile);
    std::fprintf(stderr, "%s (layout '%s'): predicted %.1f ms\n", Key(r.config).c_str(),
                 r.config.layout.c_str(), 1e3 * r.prediction.cost.step_s);
    autos.push_back(std::move(r));
  }
  // Measured in passes over every case (hand and auto), so that a slow minute of this shared
  // machine lands on one pass of every case rather than on all of one case.
  for (int64_t pass = 1; pass <= passes; ++pass) {
    for (std::vector<CaseResult>* list : {&results, &autos}) {
      for (CaseResult& r : *list) {
        const double ms = RunOurs(r.config, graphs.at(Group(r.config)), o).median_ms;
        std::fprintf(stderr, "pass %d: %s: measured %.1f ms\n", static_cast<int>(pass),
                     Key(r.config).c_str(), ms);
        r.passes_ms.push_back(ms);
      }
    }
  }
  for (std::vector<CaseResult>* list : {&results, &autos}) {
    for (CaseResult& r : *list) r.measured_ms = Median(r.passes_ms);
  }
  // The goal's comparison: each auto layout and the best hand layout of the passes, in turn on one
  // cluster (a fresh cluster per case moves a step by 10-30% on this machine).
  for (CaseResult& r : autos) {
    const CaseResult* h = BestHand(results, r);
    if (h == nullptr) continue;
    const std::vector<double> side = RunOursAlternating(
        {r.config, h->config}, graphs.at(Group(r.config)), o, static_cast<int>(rounds));
    r.side_auto_ms = side[0];
    r.side_hand_ms = side[1];
    std::fprintf(stderr, "%s: auto %.1f ms vs %s %.1f ms side by side\n", Group(r.config).c_str(),
                 side[0], h->config.name.c_str(), side[1]);
  }
  PrintTable(results, autos, load_start, LoadAverage(), profiles, calibrate_each,
             absl::ToDoubleMinutes(absl::Now() - start));
  return 0;
}

}  // namespace
}  // namespace bench
}  // namespace meshrt

int main(int argc, char** argv) { return meshrt::bench::Main(argc, argv); }
