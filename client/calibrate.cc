#include "client/calibrate.h"

#include <algorithm>
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "core/lowering/lowering.h"
#include "core/ops/builder.h"
#include "core/ops/op_cost.h"
#include "core/planning/explain.h"
#include "rpc/auth.h"
#include "util/status_macros.h"

namespace meshrt {
namespace {

constexpr int64_t kFloat = 4;
// The ops of a compute graph's long chain (MakeCalibrationGraph's size 1).
constexpr int kChain = 5;
// Pairs (one op, the chain) each compute rate is measured from; the median is kept.
constexpr int kRateRepeats = 3;
// One product of the "gemm" and of the "small_gemm" graph.
constexpr double kLargeProductFlops = 2.0 * 512 * 1024 * 1024;
constexpr double kSmallProductFlops = 2.0 * 128 * 128 * 32;

Initializer Normal() {
  Initializer init;
  init.kind = "normal";
  init.stddev = 1.0f;
  return init;
}

// The collective kinds each figure is measured with.
const char* const kCollectives[] = {"allreduce", "allgather", "alltoall"};

bool IsCollective(const std::string& kind) {
  return std::find(std::begin(kCollectives), std::end(kCollectives), kind) !=
         std::end(kCollectives);
}

std::string KindName(v1::Collective::Kind k) {
  switch (k) {
    case v1::Collective::ALLREDUCE:
      return "allreduce";
    case v1::Collective::ALLGATHER:
      return "allgather";
    case v1::Collective::ALLTOALL:
      return "alltoall";
    default:
      return v1::Collective::Kind_Name(k);
  }
}

// The graph's one output: a scalar, so a step fetches 4 bytes (the updates run regardless).
constexpr char kTick[] = "tick";

absl::StatusOr<CalibrationGraph> Finish(GraphBuilder& b, std::string layout, double flops,
                                        double bytes) {
  v1::Op ones;
  ones.set_type("ones");
  b.MarkOutput(b.Apply(std::move(ones), {}, kTick));
  ASSIGN_OR_RETURN(Graph g, b.Build());
  return CalibrationGraph{std::move(g), std::move(layout), flops, bytes};
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Median seconds per step of `g` on x:W (one untimed step first).
// x:workers, or r:replicas,x:workers (the graph replicated over r: `replicas` groups run it at
// once).
absl::StatusOr<Mesh> CalibrationMesh(int workers, int replicas, bool groups_outer) {
  if (replicas <= 1) return Mesh::Make({{"x", workers}});
  if (groups_outer) return Mesh::Make({{"x", workers}, {"r", replicas}});
  return Mesh::Make({{"r", replicas}, {"x", workers}});
}

// With `hosts`, the host of each processor's worker (rpc/auth.h HostOf of its address).
absl::StatusOr<double> TimeSteps(Client& client, const CalibrationGraph& g, int workers,
                                 int replicas, bool groups_outer, int steps,
                                 std::vector<std::string>* hosts = nullptr) {
  ASSIGN_OR_RETURN(const Mesh mesh, CalibrationMesh(workers, replicas, groups_outer));
  ASSIGN_OR_RETURN(const LayoutRules rules, LayoutRules::Parse(g.layout, mesh));
  ASSIGN_OR_RETURN(std::unique_ptr<Session> session,
                   client.CreateSession(g.graph.proto(), mesh, rules));
  if (hosts != nullptr) {
    hosts->clear();
    for (const std::string& address : session->worker_addresses()) hosts->push_back(HostOf(address));
  }
  std::vector<double> seconds;
  for (int i = 0; i <= steps; ++i) {
    const absl::Time start = absl::Now();
    ASSIGN_OR_RETURN(TensorMap unused, session->Run({}, {kTick}));
    if (i > 0) seconds.push_back(absl::ToDoubleSeconds(absl::Now() - start));
  }
  RETURN_IF_ERROR(session->Close());
  return Median(std::move(seconds));
}

}  // namespace

absl::StatusOr<CalibrationGraph> MakeCalibrationGraph(const std::string& kind, int size,
                                                      int workers) {
  if (workers < 1) return absl::InvalidArgumentError("calibration needs workers >= 1");
  const int64_t w = workers;
  GraphBuilder b;
  if (kind == "overhead") {
    TensorRef v = b.Variable("v", Shape({{"n", 4 * w}}), Normal());
    b.Assign(v, b.Neg(v, "neg"), "update");
    return Finish(b, "n:x", 0, 0);
  }
  // The compute graphs repeat their op `ops` times in a chain (each reads the last one's
  // result): size 0 runs it once, size 1 kChain times, and the rate comes from the difference, so
  // that the step overhead, the variable update and the fetch cancel out.
  const int ops = size == 0 ? 1 : kChain;
  if (kind == "gemm") {  // per worker [512 x 1024] x [1024 x 1024] products, chained
    const Dim batch{"batch", 512 * w}, k{"k", 1024}, n{"n", 1024};
    TensorRef y = b.Variable("a", Shape({batch, k}), Normal());
    TensorRef kn = b.Variable("m", Shape({k, n}), Normal());
    TensorRef nk = b.Variable("m2", Shape({n, k}), Normal());
    for (int i = 0; i < ops; ++i) {
      const bool odd = i % 2 == 1;  // [batch, n] x [n, k] -> [batch, k]
      y = b.Einsum({y, odd ? nk : kn}, Shape({batch, odd ? k : n}), absl::StrCat("product", i));
    }
    TensorRef c = b.Variable("c", Shape({batch, ops % 2 == 1 ? n : k}));
    b.Assign(c, y, "update");
    return Finish(b, "batch:x", ops * kLargeProductFlops, 0);
  }
  if (kind == "small_gemm") {  // per worker 16 x 16 products of [128 x 32] x [32 x 128], chained
    const Dim batch{"batch", 16 * w}, heads{"heads", 16}, l{"length", 128}, m{"memory", 128},
        d{"d_kv", 32};
    TensorRef y = b.Variable("q", Shape({batch, heads, l, d}), Normal());
    TensorRef kk = b.Variable("k", Shape({batch, heads, m, d}), Normal());
    for (int i = 0; i < ops; ++i) {
      const bool odd = i % 2 == 1;  // scores [.., l, m] x k [.., m, d] -> [.., l, d]
      y = b.Einsum({y, kk}, odd ? Shape({batch, heads, l, d}) : Shape({batch, heads, l, m}),
                   absl::StrCat("scores", i));
    }
    TensorRef s = b.Variable(
        "s", ops % 2 == 1 ? Shape({batch, heads, l, m}) : Shape({batch, heads, l, d}));
    b.Assign(s, y, "update");
    return Finish(b, "batch:x", ops * 16.0 * 16 * kSmallProductFlops, 0);
  }
  if (kind == "memory") {  // per worker 16 MiB read and written per negation, chained
    const int64_t per = 4 << 20;
    TensorRef v = b.Variable("v", Shape({{"n", per * w}}), Normal());
    TensorRef y = v;
    for (int i = 0; i < ops; ++i) y = b.Neg(y, absl::StrCat("neg", i));
    b.Assign(v, y, "update");
    return Finish(b, "n:x", 0, ops * 2.0 * per * kFloat);
  }
  if (kind == "elementwise") {  // per worker softmaxes over rows of 1024 floats, 8 MiB, chained
    const int64_t rows = 2048, cols = 1024;
    TensorRef x = b.Variable("x", Shape({{"r", rows * w}, {"c", cols}}), Normal());
    TensorRef y = x;
    for (int i = 0; i < ops; ++i) {
      v1::Op softmax;
      softmax.set_type("softmax");
      softmax.add_dims("c");
      y = b.Apply(std::move(softmax), {y}, absl::StrCat("softmax", i));
    }
    b.Assign(x, y, "update");
    return Finish(b, "r:x", static_cast<double>(kSoftmaxFlops) * ops * rows * cols, 0);
  }
  if (!IsCollective(kind)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown calibration kind '", kind,
        "' (overhead, gemm, small_gemm, memory, elementwise, allreduce, allgather, alltoall)"));
  }
  const int64_t floats = size == 0 ? (256 << 10) : (4 << 20);  // 1 MiB or 16 MiB
  if (kind == "allreduce") {  // sum over the split p: [p:W, n] -> [n], an allreduce of n floats
    TensorRef x = b.Variable("x", Shape({{"p", w}, {"n", floats}}), Normal());
    TensorRef y = b.Variable("y", Shape({{"n", floats}}));
    b.Assign(y, b.ReduceSum(x, {"p"}, "sum"), "update");
    return Finish(b, "p:x", 0, floats * kFloat);
  }
  const int64_t side = size == 0 ? 512 : 2048;  // side^2 floats: 1 MiB or 16 MiB
  if (kind == "allgather") {                    // a split dim renamed to a replicated one
    TensorRef x = b.Variable("x", Shape({{"a", side}, {"c", side}}), Normal());
    TensorRef y = b.Variable("y", Shape({{"b", side}, {"c", side}}));
    b.Assign(y, b.RenameDim(x, "a", "b", "gathered"), "update");
    return Finish(b, "a:x", 0, side * side * kFloat);
  }
  // alltoall: the split moves from the first dim to the second.
  TensorRef x = b.Variable("x", Shape({{"a", side}, {"c", side}}), Normal());
  TensorRef y = b.Variable("y", Shape({{"a2", side}, {"c2", side}}));
  b.Assign(y, b.Reshape(x, Shape({{"a2", side}, {"c2", side}}), "moved"), "update");
  return Finish(b, "a:x,c2:x", 0, side * side * kFloat);
}

absl::StatusOr<int64_t> CheckCalibrationProgram(const std::string& kind, const CalibrationGraph& g,
                                                int workers, int replicas, bool groups_outer) {
  ASSIGN_OR_RETURN(const Mesh mesh, CalibrationMesh(workers, replicas, groups_outer));
  ASSIGN_OR_RETURN(const LayoutRules rules, LayoutRules::Parse(g.layout, mesh));
  ASSIGN_OR_RETURN(const v1::Program program, Lower(g.graph, mesh, rules));
  const std::vector<std::string> fetches = {kTick};
  const std::vector<bool> runs = StepInstructions(program, &fetches);
  std::vector<std::string> found;
  int64_t sent = 0;
  for (int i = 0; i < program.instructions_size(); ++i) {
    const v1::Instruction& instr = program.instructions(i);
    if (!runs[i] || instr.kind_case() != v1::Instruction::kCollective) continue;
    found.push_back(KindName(instr.collective().kind()));
    sent += CostOf(program, i).sent_bytes;
  }
  const bool want_one = IsCollective(kind) && workers > 1;
  if ((want_one && (found.size() != 1 || found[0] != kind)) || (!want_one && !found.empty())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the '", kind, "' calibration graph lowers to ", found.size(), " collective(s) (",
        absl::StrJoin(found, ", "), ") instead of ", want_one ? "one " + kind : "none",
        ": the lowering changed; fix client/calibrate.cc"));
  }
  return sent;
}

namespace {

std::map<std::string, int> WorkersPerHost(const std::vector<std::string>& hosts) {
  std::map<std::string, int> per_host;
  for (const std::string& h : hosts) ++per_host[h];
  return per_host;
}

// CalibrateOptions::collective_group's default: the workers per host when every host has the
// same number (>= 2) of them, else all.
int DefaultGroup(const std::vector<std::string>& hosts) {
  const std::map<std::string, int> per_host = WorkersPerHost(hosts);
  const int first = per_host.empty() ? 0 : per_host.begin()->second;
  for (const auto& [host, n] : per_host) {
    if (n != first) return static_cast<int>(hosts.size());
  }
  return per_host.size() > 1 && first >= 2 ? first : static_cast<int>(hosts.size());
}

// t = alpha + bytes / beta through the two points; noise that inverts them leaves the larger
// point's average rate and no latency.
CommFit FitLink(double t0, double bytes0, double t1, double bytes1) {
  CommFit fit;
  const double per_byte = bytes1 > bytes0 ? (t1 - t0) / (bytes1 - bytes0) : 0;
  if (per_byte > 0) {
    fit.beta_bytes_per_second = 1 / per_byte;
    fit.alpha_seconds = std::max(0.0, t0 - bytes0 * per_byte);
  } else {
    fit.beta_bytes_per_second = bytes1 / std::max(t1, 1e-6);
  }
  return fit;
}

}  // namespace

absl::StatusOr<Calibration> Calibrate(Client& client, const CalibrateOptions& options) {
  const int w = options.workers;
  int group = options.collective_group > 0 ? options.collective_group : w;
  if (w < 1 || group < 1 || group > w || w % group != 0) {
    return absl::InvalidArgumentError(absl::StrCat("calibration: collective_group ",
                                                   options.collective_group,
                                                   " must divide the workers (", w, ")"));
  }
  Calibration c;
  c.workers = w;
  // A calibration graph built and checked once (its program does exactly what `kind` measures),
  // then timed as often as asked.
  struct Prepared {
    CalibrationGraph graph;
    int x = 0, replicas = 1;
    bool groups_outer = false;
    int64_t sent = 0;  // bytes each worker sends per step
  };
  auto prepare = [&](const std::string& kind, int size,
                     bool groups_outer = false) -> absl::StatusOr<Prepared> {
    const bool collective = IsCollective(kind);
    Prepared p;
    p.x = collective ? group : w;
    p.replicas = collective ? w / group : 1;
    p.groups_outer = groups_outer;
    ASSIGN_OR_RETURN(p.graph, MakeCalibrationGraph(kind, size, p.x));
    ASSIGN_OR_RETURN(p.sent,
                     CheckCalibrationProgram(kind, p.graph, p.x, p.replicas, groups_outer));
    return p;
  };
  auto time = [&](const Prepared& p, std::vector<std::string>* hosts = nullptr) {
    return TimeSteps(client, p.graph, p.x, p.replicas, p.groups_outer, options.steps, hosts);
  };
  ASSIGN_OR_RETURN(const Prepared overhead, prepare("overhead", 0));
  // The median of kRateRepeats sessions: the first steps of a cluster just started can be several
  // times slower, and an overhead set too high would leave every collective without latency.
  std::vector<double> overheads;
  for (int r = 0; r < kRateRepeats; ++r) {
    ASSIGN_OR_RETURN(const double t, time(overhead, r == 0 ? &c.hosts : nullptr));
    overheads.push_back(t);
  }
  c.step_overhead_seconds = Median(std::move(overheads));
  if (options.collective_group == 0 && static_cast<int>(c.hosts.size()) == w) {
    group = DefaultGroup(c.hosts);
  }
  c.collective_group = group;
  // The work of the long chain's extra ops over the time they add; noise that inverts the two
  // leaves the long chain's average rate over its step minus the overhead. The median of
  // kRateRepeats such pairs, measured in turn, so that one slow second of a shared machine does
  // not set the rate.
  auto rate = [&](const std::string& kind, bool flops) -> absl::StatusOr<double> {
    ASSIGN_OR_RETURN(const Prepared one, prepare(kind, 0));
    ASSIGN_OR_RETURN(const Prepared chain, prepare(kind, 1));
    const double work_one = flops ? one.graph.flops : one.graph.bytes;
    const double work_chain = flops ? chain.graph.flops : chain.graph.bytes;
    std::vector<double> rates;
    for (int r = 0; r < kRateRepeats; ++r) {
      ASSIGN_OR_RETURN(const double t_one, time(one));
      ASSIGN_OR_RETURN(const double t_chain, time(chain));
      rates.push_back(t_chain > t_one
                          ? (work_chain - work_one) / (t_chain - t_one)
                          : work_chain / std::max(t_chain - c.step_overhead_seconds, 1e-6));
    }
    return Median(std::move(rates));
  };
  ASSIGN_OR_RETURN(c.gemm_flops_per_second, rate("gemm", true));
  ASSIGN_OR_RETURN(c.small_gemm_flops_per_second, rate("small_gemm", true));
  ASSIGN_OR_RETURN(c.memory_bytes_per_second, rate("memory", false));
  ASSIGN_OR_RETURN(c.elementwise_flops_per_second, rate("elementwise", true));
  if (group < 2) return c;  // no collective runs in a group of one
  // Groups of consecutive workers, and on several hosts groups of every (W/G)-th worker too:
  // each arrangement's links go where its groups are (within a host or spanning hosts).
  std::vector<bool> arrangements = {false};
  if (OnSeveralHosts(c.hosts) && w / group > 1) arrangements.push_back(true);
  for (const bool outer : arrangements) {
    ASSIGN_OR_RETURN(const Mesh mesh, CalibrationMesh(group, w / group, outer));
    const int x_axis = mesh.AxisOf("x");
    std::map<std::string, CommFit>& links =
        GroupsSpanHosts(mesh, {x_axis}, c.hosts) ? c.cross_host_comm : c.comm;
    if (!links.empty()) continue;  // both arrangements are of one kind
    for (const char* kind : kCollectives) {
      ASSIGN_OR_RETURN(const Prepared small, prepare(kind, 0, outer));
      ASSIGN_OR_RETURN(const Prepared large, prepare(kind, 1, outer));
      ASSIGN_OR_RETURN(const double small_s, time(small));
      ASSIGN_OR_RETURN(const double large_s, time(large));
      links[kind] = FitLink(small_s - c.step_overhead_seconds, static_cast<double>(small.sent),
                            large_s - c.step_overhead_seconds, static_cast<double>(large.sent));
    }
  }
  return c;
}

HardwareProfile ToHardwareProfile(const Calibration& c, const std::string& source) {
  HardwareProfile p;
  p.source = source;
  if (c.gemm_flops_per_second > 0) p.gemm_large_flops_per_s = c.gemm_flops_per_second;
  if (c.small_gemm_flops_per_second > 0) p.gemm_small_flops_per_s = c.small_gemm_flops_per_second;
  if (c.gemm_flops_per_second > 0 && c.small_gemm_flops_per_second > 0) {
    // The products the two rates were measured on: between their smallest dims (K = 32 and
    // M = 512) the rate is interpolated; gemm_large_flops splits products of 3 or more operands.
    p.gemm_large_flops = kLargeProductFlops;
    p.gemm_small_dim = 32;
    p.gemm_large_dim = 512;
  }
  if (c.memory_bytes_per_second > 0) {
    p.memory_bytes_per_s = c.memory_bytes_per_second;
    // Without a measured rate, the memory graph's negation: one FLOP per 8 bytes read and
    // written (a floor: it counts the memory-bound case as the FLOP rate).
    p.elementwise_flops_per_s = c.memory_bytes_per_second / (2 * kFloat);
  }
  if (c.elementwise_flops_per_second > 0)
    p.elementwise_flops_per_s = c.elementwise_flops_per_second;
  if (c.step_overhead_seconds > 0) p.step_overhead_s = c.step_overhead_seconds;
  p.collectives = DefaultCollectiveLinks();
  for (const auto& [kind, fit] : c.comm) {
    p.collectives[kind] = CollectiveLink{fit.alpha_seconds, fit.beta_bytes_per_second};
  }
  for (const auto& [kind, fit] : c.cross_host_comm) {
    p.cross_host[kind] = CollectiveLink{fit.alpha_seconds, fit.beta_bytes_per_second};
  }
  p.collectives_measured = !c.comm.empty() || !c.cross_host_comm.empty();
  return p;
}

std::string FormatCalibration(const Calibration& c, const std::string& header) {
  std::string hosts;
  if (OnSeveralHosts(c.hosts)) {
    std::vector<std::string> parts;
    for (const auto& [host, n] : WorkersPerHost(c.hosts)) parts.push_back(absl::StrCat(host, " x", n));
    hosts = absl::StrCat("# hosts ", absl::StrJoin(parts, ", "), "; collectives measured ",
                         c.comm.empty() ? "" : "within a host",
                         !c.comm.empty() && !c.cross_host_comm.empty() ? " and " : "",
                         c.cross_host_comm.empty() ? "" : "across hosts (cross_host.*)", "\n");
  }
  return absl::StrCat(
      "# meshrt calibration: ", header, "\n",
      absl::StrFormat("# workers %d, collectives in groups of %d, step overhead %.6g s\n",
                      c.workers, c.collective_group, c.step_overhead_seconds),
      hosts, FormatHardwareProfile(ToHardwareProfile(c, header)));
}

}  // namespace meshrt
