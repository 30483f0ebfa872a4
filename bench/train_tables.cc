#include "bench/train_tables.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bench/train_flops.h"
#include "kernels/blas_probe.h"

namespace meshrt {
namespace bench {
namespace {

std::string Ms(double v) { return v < 0 ? "n/a" : absl::StrFormat("%.1f", v); }

std::string Ratio(double a, double b) {
  return a < 0 || b <= 0 ? "n/a" : absl::StrFormat("%.2f", a / b);
}

std::string Range(const std::vector<double>& v) {
  if (v.size() < 2) return "";
  auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  return absl::StrFormat(" (%.1f–%.1f)", *lo, *hi);
}

std::string PeerName(const TrainConfig& c, const Result& r) {
  return c.peer_name + (r.peer_failed ? " (failed)" : "") +
         (r.peer_killed > 0
              ? absl::StrCat(" (ranks killed at the timeout after reporting, ", r.peer_killed, "x)")
              : "");
}

// GFLOP/s per worker of a step of `ms`, and its fraction of `peak`: "41.2 (27%)".
double PerWorker(const TrainConfig& c, double ms) {
  return ms > 0 ? c.flops / (ms / 1e3) / c.workers / 1e9 : -1;
}
std::string OfPeak(double per_worker, double peak) {
  if (per_worker < 0) return "n/a";
  if (peak <= 0) return absl::StrFormat("%.1f (peak n/a)", per_worker);
  return absl::StrFormat("%.1f (%.0f%%)", per_worker, 100 * per_worker / peak);
}

double MlpFlops(const TablesInput& in, const std::string& mode) {
  for (const TrainConfig& c : in.configs) {
    if (c.model == "mlp" && c.name == mode) return c.flops;
  }
  return -1;
}

std::string Verdict(bool known, bool met) { return !known ? "n/a" : (met ? "met" : "MISSED"); }

std::string Seconds(const Result& r) {
  return absl::StrFormat("%.0f / %.0f", r.ours_seconds, r.peer_seconds);
}

// "5 + 30 (mlp, small), 2 + 10 (model)".
std::string StepCounts(const TablesInput& in) {
  std::vector<std::pair<std::string, std::vector<std::string>>> counts;
  for (const TrainConfig& c : in.configs) {
    const std::string count = absl::StrCat(c.warmup, " + ", c.steps);
    const std::string what = c.size.empty() ? c.model : c.size;
    auto it = std::find_if(counts.begin(), counts.end(), [&](const auto& e) { return e.first == count; });
    if (it == counts.end()) it = counts.insert(counts.end(), {count, {}});
    if (std::find(it->second.begin(), it->second.end(), what) == it->second.end()) {
      it->second.push_back(what);
    }
  }
  std::vector<std::string> parts;
  for (const auto& [count, whats] : counts) {
    parts.push_back(absl::StrCat(count, " (", absl::StrJoin(whats, ", "), ")"));
  }
  return absl::StrJoin(parts, ", ");
}

// The timed steps of the first configuration of `model` (and `size`), for the column titles.
int64_t StepsOf(const TablesInput& in, const std::string& model, const std::string& size) {
  for (const TrainConfig& c : in.configs) {
    if (c.model == model && c.size == size) return c.steps;
  }
  return 0;
}

void PrintHeader(const TablesInput& in) {
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  std::printf("## Training steps: meshrt (local cluster, worker processes) vs PyTorch peers\n\n");
  std::printf("CPU: %s, %ld cores; load average (1/5/15 min) at the start %s, at the end %s.\n",
              kernels::CpuModelName().c_str(), cores, in.load_start.c_str(),
              LoadAverage().c_str());
  std::printf("Environment: %s.\n", in.environment.c_str());
  std::printf(
      "ours: OpenBLAS core **%s** (%s), sgemm 1024^3 on 1 thread %s GFLOP/s = ours' peak below; "
      "candidates: %s. A worker's log: %s\n",
      in.our_core.empty() ? "?" : in.our_core.c_str(), in.our_core_how.c_str(),
      Ms(in.our_peak).c_str(), in.our_cores.c_str(), in.blas_line.c_str());
  const std::string worker_core = CoreOfBlasLine(in.blas_line);
  if (!in.our_core.empty() && worker_core != "?" && worker_core != in.our_core) {
    std::printf("WARNING: the workers ran %s, not %s: ours' peak below is not their kernel's.\n",
                worker_core.c_str(), in.our_core.c_str());
  }
  if (in.peers) {
    std::printf(
        "peer: OpenBLAS core **%s** (%s; the peer reported %s), torch.mm 1024^3 on 1 thread %s "
        "GFLOP/s = the peer's peak below; candidates: %s.\n",
        in.peer_core.empty() ? "default" : in.peer_core.c_str(), in.peer_core_how.c_str(),
        in.peer_reported_core.empty() ? "?" : in.peer_reported_core.c_str(),
        Ms(in.peer_peak).c_str(), in.peer_cores.c_str());
  }
  std::printf(
      "%lld reps x (warmup + timed steps: %s), ours then the peer per configuration; "
      "medians over reps of each run's median (range over reps in parentheses); %.1f min. "
      "GFLOP/s per worker = model FLOPs per step (bench/train_flops.h) / step time / workers; "
      "in parentheses its fraction of the side's own peak. Time: wall seconds of all reps, "
      "ours / peer.\n\n",
      static_cast<long long>(in.reps), StepCounts(in).c_str(), in.minutes);
}

void PrintMlp(const TablesInput& in) {
  std::printf(
      "### MLP (batch 256, d_model 1024, d_ff 4096, biases, SGD lr 1e-3, fp32), 2 workers; "
      "%.1f GFLOP/step dp, %.1f mp (with the input gradient)\n\n",
      MlpFlops(in, "dp") / 1e9, MlpFlops(in, "mp") / 1e9);
  std::printf(
      "| mode | layout | ours ms/step (1 step/request) | ours ms/step (%lld steps in 1 request) | "
      "peer | peer ms/step | peer comm ms | ours/peer | goal | ours GFLOP/s/worker | peer "
      "GFLOP/s/worker | time s |\n",
      static_cast<long long>(StepsOf(in, "mlp", "")));
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (size_t i = 0; i < in.configs.size(); ++i) {
    const TrainConfig& c = in.configs[i];
    const Result& r = in.results[i];
    if (c.model != "mlp") continue;
    const double o = Median(r.ours), p = Median(r.peer);
    std::printf("| %s | %s | %s%s | %s%s | %s | %s%s | %s | %s | <= %.2f (%s) | %s | %s | %s |\n",
                c.name.c_str(), c.layout.c_str(), Ms(o).c_str(), Range(r.ours).c_str(),
                Ms(Median(r.batched)).c_str(), Range(r.batched).c_str(), PeerName(c, r).c_str(),
                Ms(p).c_str(), Range(r.peer).c_str(), Ms(Median(r.comm)).c_str(),
                Ratio(o, p).c_str(), c.goal, Verdict(p > 0, o / p <= c.goal).c_str(),
                OfPeak(PerWorker(c, o), in.our_peak).c_str(),
                OfPeak(PerWorker(c, p), in.peer_peak).c_str(), Seconds(r).c_str());
  }
  std::printf("\n");
}

void PrintTransformer(const TablesInput& in, const std::string& size) {
  const models::TransformerOptions t = TransformerOf(size);
  const double tokens = static_cast<double>(t.batch * t.length);
  std::printf(
      "### Transformer LM, %s (%s: batch %lld x length %lld, d_model %lld, %lld heads x %lld, "
      "d_ff %lld, %lld layers, vocab %lld, SGD lr 0.1, synthetic ids; %.1f GFLOP/step)\n\n",
      size == "model" ? "model scale" : "small", size == "model" ? "ModelScaleBenchConfig" : "BenchConfig",
      (long long)t.batch, (long long)t.length, (long long)t.d_model, (long long)t.heads,
      (long long)t.d_kv, (long long)t.d_ff, (long long)t.layers, (long long)t.vocab,
      TransformerStepFlops(t) / 1e9);
  std::printf(
      "| mode | workers | layout | ours ms/step | ours tokens/s | ours tokens/s (%lld steps in 1 "
      "request) | peer | peer ms/step | peer tokens/s | peer comm ms | ours/peer tokens/s | goal | "
      "ours GFLOP/s/worker | peer GFLOP/s/worker | time s |\n",
      (long long)StepsOf(in, "transformer", size));
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (size_t i = 0; i < in.configs.size(); ++i) {
    const TrainConfig& c = in.configs[i];
    const Result& r = in.results[i];
    if (c.model != "transformer" || c.size != size) continue;
    const double o = Median(r.ours), p = Median(r.peer), ob = Median(r.batched);
    const double ot = o > 0 ? tokens / (o / 1e3) : -1, pt = p > 0 ? tokens / (p / 1e3) : -1;
    std::printf(
        "| %s | %d | %s | %s%s | %.0f | %s | %s | %s%s | %s | %s | %s | >= %.2f (%s) | %s | %s | "
        "%s |\n",
        c.name.c_str(), c.workers, c.layout.c_str(), Ms(o).c_str(), Range(r.ours).c_str(), ot,
        ob > 0 ? absl::StrFormat("%.0f", tokens / (ob / 1e3)).c_str() : "n/a",
        PeerName(c, r).c_str(), Ms(p).c_str(), Range(r.peer).c_str(),
        pt > 0 ? absl::StrFormat("%.0f", pt).c_str() : "n/a", Ms(Median(r.comm)).c_str(),
        Ratio(ot, pt).c_str(), c.goal, Verdict(pt > 0, ot / pt >= c.goal).c_str(),
        OfPeak(PerWorker(c, o), in.our_peak).c_str(), OfPeak(PerWorker(c, p), in.peer_peak).c_str(),
        Seconds(r).c_str());
  }
  std::printf("\n");
}

// What a goal needs of ours' step time, against the GEMM floor of the step: the products alone as
// raw OpenBLAS calls, one worker's, times workers per core when the workers outnumber the cores.
std::string FloorNote(const TablesInput& in, const TrainConfig& c, const Result& r, double peer) {
  if (r.gemm_floor_ms <= 0) return "";
  const double floor =
      r.gemm_floor_ms * std::max(1.0, static_cast<double>(c.workers) / std::max(1, in.cores));
  std::string note = absl::StrFormat("; GEMM floor %.1f ms/step", floor);
  if (peer <= 0) return note;
  const double needed = c.model == "mlp" ? c.goal * peer : peer / c.goal;
  absl::StrAppendFormat(&note, ", the goal needs <= %.1f: %s", needed,
                        floor < needed ? "reachable above the floor"
                                       : "UNREACHABLE with this OpenBLAS (the products alone take "
                                         "longer)");
  return note;
}

// Issue 14 item 6, one line per goal.
void PrintGoals(const TablesInput& in) {
  std::printf("### Goals (issue 14 item 6; printed, never asserted)\n\n");
  for (size_t i = 0; i < in.configs.size(); ++i) {
    const TrainConfig& c = in.configs[i];
    const Result& r = in.results[i];
    const double o = Median(r.ours), p = Median(r.peer);
    const std::string what = absl::StrCat(c.model, c.size.empty() ? "" : " ", c.size, " ", c.name);
    if (c.model == "mlp") {
      std::printf("- %s: ours / %s step time %s <= %.2f: %s", what.c_str(), c.peer_name.c_str(),
                  Ratio(o, p).c_str(), c.goal, Verdict(p > 0 && o > 0, o / p <= c.goal).c_str());
    } else {
      std::printf("- %s: ours / %s tokens/s %s >= %.2f: %s", what.c_str(), c.peer_name.c_str(),
                  Ratio(p, o).c_str(), c.goal, Verdict(p > 0 && o > 0, p / o >= c.goal).c_str());
    }
    std::printf("%s\n", FloorNote(in, c, r, p).c_str());
    if (c.model == "transformer" && c.name == "dp") {
      const double w = PerWorker(c, o);
      std::printf("- %s: ours at %s of the sgemm peak per worker (%s GFLOP/s of %s) >= 65%%: %s\n",
                  what.c_str(),
                  w > 0 && in.our_peak > 0 ? absl::StrFormat("%.0f%%", 100 * w / in.our_peak).c_str()
                                           : "n/a",
                  Ms(w).c_str(), Ms(in.our_peak).c_str(),
                  Verdict(w > 0 && in.our_peak > 0, w >= 0.65 * in.our_peak).c_str());
    }
  }
  std::printf("\n");
}

}  // namespace

std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return in ? absl::StrCat(a, " ", b, " ", c) : "?";
}

void PrintTables(const TablesInput& in) {
  PrintHeader(in);
  bool mlp = false;
  std::vector<std::string> sizes;
  for (const TrainConfig& c : in.configs) {
    if (c.model == "mlp") mlp = true;
    if (c.model == "transformer" && std::find(sizes.begin(), sizes.end(), c.size) == sizes.end()) {
      sizes.push_back(c.size);
    }
  }
  if (mlp) PrintMlp(in);
  for (const std::string& size : sizes) PrintTransformer(in, size);
  if (in.peers) PrintGoals(in);
  if (!in.floor_core.empty()) {
    std::printf("GEMM floor: each configuration's products (its lowered program, one worker's, "
                "pruned as a step runs) as raw cblas_sgemm calls on contiguous operands in their "
                "fastest transposition, medians, core %s (bench/gemm_floor.h); neither side can "
                "run its products faster on this library.\n\n",
                in.floor_core.c_str());
  }
  std::printf("final losses (ours, last run):");
  for (size_t i = 0; i < in.configs.size(); ++i) {
    const TrainConfig& c = in.configs[i];
    std::printf(" %s%s%s/%s %.4f", c.model.c_str(), c.size.empty() ? "" : "/", c.size.c_str(),
                c.name.c_str(), in.results[i].loss);
  }
  std::printf("\n");
  if (!in.peers) std::printf("\nNOTE: peers SKIPPED (%s)\n", in.peers_skipped.c_str());
}

}  // namespace bench
}  // namespace meshrt
