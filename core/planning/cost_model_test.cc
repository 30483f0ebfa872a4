// The cost facet (core/ops/op_cost.h) and the time model (core/planning/cost_model.h): FLOPs and bytes of small
// hand-computed graphs, a predicted time under a fixed profile, the duplicated-compute warning, the
// profile file and explain's JSON.
#include "core/planning/cost_model.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include "core/lowering/lowering.h"
#include "core/ops/builder.h"
#include "core/ops/op_cost.h"
#include "core/planning/explain.h"
#include "core/testing/test_util.h"
#include "gtest/gtest.h"

namespace meshrt {
namespace {

// b:4, d:6 x d:6, f:8 -> b:4, f:8.
Graph EinsumGraph() {
  GraphBuilder b;
  auto x = b.Placeholder("x", Shape({{"b", 4}, {"d", 6}}));
  auto w = b.Placeholder("w", Shape({{"d", 6}, {"f", 8}}));
  b.MarkOutput(b.Einsum({x, w}, Shape({{"b", 4}, {"f", 8}}), "y"));
  return b.Build().value();
}

ProgramCost CostOfGraph(const Graph& graph, const std::string& mesh_text,
                        const std::string& rules_text, const std::vector<std::string>& fetches,
                        const HardwareProfile& profile = HardwareProfile()) {
  Mesh mesh = Mesh::Parse(mesh_text).value();
  v1::Program program = Lower(graph, mesh, LayoutRules::Parse(rules_text, mesh).value()).value();
  return CostProgram(program, profile, &fetches).value();
}

const OpCostTotal& OpTotal(const ProgramCost& cost, const std::string& op) {
  for (const OpCostTotal& t : cost.ops) {
    if (t.source_op == op) return t;
  }
  static const OpCostTotal* none = new OpCostTotal{"(absent)"};
  return *none;
}

TEST(CostModelTest, EinsumOnOneProcessor) {
  ProgramCost c = CostOfGraph(EinsumGraph(), "", "", {"y"});
  EXPECT_DOUBLE_EQ(c.total.flops, 2.0 * 4 * 6 * 8);
  EXPECT_EQ(c.total.bytes_moved, (24 + 48 + 32) * 4);
  EXPECT_EQ(c.total.sent_bytes, 0);
  EXPECT_EQ(c.processors, 1);
}

TEST(CostModelTest, EinsumSplitOverTwoProcessors) {
  // Batch split: each worker multiplies [b:2, d:6] by the whole [d:6, f:8].
  ProgramCost c = CostOfGraph(EinsumGraph(), "p:2", "b:p", {"y"});
  EXPECT_DOUBLE_EQ(c.total.flops, 2.0 * 2 * 6 * 8);
  EXPECT_DOUBLE_EQ(c.total.flops * c.processors, 2.0 * 4 * 6 * 8);
  EXPECT_EQ(c.total.bytes_moved, (12 + 48 + 16) * 4);
  EXPECT_EQ(c.total.sent_bytes, 0);
  // Contracted dim split: half the product each, then an allreduce of the [b:4, f:8] partials.
  c = CostOfGraph(EinsumGraph(), "p:2", "d:p", {"y"});
  EXPECT_DOUBLE_EQ(c.total.flops, 2.0 * 4 * 3 * 8);
  EXPECT_EQ(c.total.sent_bytes, 2 * (2 - 1) * 32 * 4 / 2);
}

TEST(CostModelTest, ElementwiseChainAndReduction) {
  GraphBuilder b;
  auto x = b.Placeholder("x", Shape({{"a", 3}, {"n", 10}}));
  auto e = b.Exp(x, "e");
  auto s = b.Add(x, e, "s");
  auto r = b.Relu(s, "r");
  b.MarkOutput(b.ReduceSum(r, {"n"}, "sum"));
  ProgramCost c = CostOfGraph(b.Build().value(), "", "", {"sum"});
  EXPECT_DOUBLE_EQ(OpTotal(c, "e").flops, kTranscendentalFlops * 30.0);
  EXPECT_DOUBLE_EQ(OpTotal(c, "s").flops, 30);
  EXPECT_DOUBLE_EQ(OpTotal(c, "r").flops, 30);
  EXPECT_DOUBLE_EQ(OpTotal(c, "sum").flops, 30);  // one per input element
  EXPECT_EQ(OpTotal(c, "e").bytes_moved, 2 * 120);
  EXPECT_EQ(OpTotal(c, "s").bytes_moved, 3 * 120);
  EXPECT_EQ(OpTotal(c, "sum").bytes_moved, 120 + 12);
  EXPECT_DOUBLE_EQ(c.total.flops, kTranscendentalFlops * 30.0 + 90);
}

TEST(CostModelTest, PredictedTimeIsTheHandSum) {
  HardwareProfile p;
  p.gemm_small_flops_per_s = 1e9;
  p.gemm_large_flops = 1e12;
  p.elementwise_flops_per_s = 1e9;
  p.memory_bytes_per_s = 1e8;
  p.collectives = DefaultCollectiveLinks();
  p.collectives["allreduce"] = CollectiveLink{1e-3, 1e6};
  ProgramCost c = CostOfGraph(EinsumGraph(), "p:2", "d:p", {"y"}, p);
  // Local einsum [b:4, d:3] x [d:3, f:8]: 192 FLOPs (1.92e-7 s) but 272 bytes (2.72e-6 s) at
  // 1e8 B/s, so memory bound; allreduce of 128 bytes over 2: 128 bytes sent.
  double hand = 0;
  int gemms = 0, allreduces = 0;
  for (const InstructionCost& i : c.instructions) {
    if (!i.runs) continue;
    if (i.gemm) {
      ++gemms;
      EXPECT_DOUBLE_EQ(i.compute_s, 272 / 1e8);
    }
    if (i.kind == "allreduce") {
      ++allreduces;
      EXPECT_DOUBLE_EQ(i.comm_s, 1e-3 + 128 / 1e6);
    }
    hand += i.compute_s + i.comm_s;
  }
  EXPECT_EQ(gemms, 1);
  EXPECT_EQ(allreduces, 1);
  EXPECT_DOUBLE_EQ(c.total.compute_s + c.total.comm_s, hand);
  EXPECT_DOUBLE_EQ(c.total.compute_s + c.total.comm_s, 272 / 1e8 + 1e-3 + 128 / 1e6);
}

// A hand-made program for StepCriticalPath: `kinds[i]` 'l' (local) or 'c' (collective), instruction
// i writes buffer i and reads `reads[i]`.
v1::Program ChainProgram(const std::string& kinds, const std::vector<std::vector<int>>& reads) {
  v1::Program p;
  p.set_num_buffers(static_cast<int>(kinds.size()));
  for (size_t i = 0; i < kinds.size(); ++i) {
    v1::Instruction* inst = p.add_instructions();
    inst->set_output(static_cast<int>(i));
    for (int b : reads[i]) inst->add_inputs(b);
    if (kinds[i] == 'c') {
      inst->mutable_collective()->set_kind(v1::Collective::ALLREDUCE);
    } else {
      inst->mutable_local()->set_type("neg");
    }
  }
  return p;
}

std::vector<InstructionCost> Times(const std::vector<double>& seconds, const std::string& kinds) {
  std::vector<InstructionCost> costs;
  for (size_t i = 0; i < seconds.size(); ++i) {
    InstructionCost c;
    c.index = static_cast<int>(i);
    (kinds[i] == 'c' ? c.comm_s : c.compute_s) = seconds[i];
    costs.push_back(c);
  }
  return costs;
}

TEST(CostModelTest, CriticalPathOverlapsCollectivesWithIndependentWork) {
  // #0 local 1 s; #1 allreduce of #0, 3 s; #2 local, independent, 2 s; #3 local reading #1,
  // 0.5 s; #4 allreduce of #2, 1 s. Calling thread: #0 0-1, #2 1-3, #3 waits for #1 (1-4) and
  // runs 4-4.5, then issues #4, which runs 4.5-5.5 (the communication thread is free at 4).
  const std::string kinds = "lcllc";
  const v1::Program p = ChainProgram(kinds, {{}, {0}, {}, {1}, {2}});
  std::vector<InstructionCost> costs = Times({1, 3, 2, 0.5, 1}, kinds);
  EXPECT_DOUBLE_EQ(StepCriticalPath(p, costs), 5.5);
  // Serially the same step takes 7.5 s; an instruction that does not run costs nothing.
  costs[2].runs = false;
  // Now #3 waits for #1 (1-4), runs 4-4.5, #4 (its input never written: ready at 0) 4.5-5.5.
  EXPECT_DOUBLE_EQ(StepCriticalPath(p, costs), 5.5);
  costs[2].runs = true;
  costs[3].compute_s = 0;
  // #4 is issued at 4 (after #3, which waited for #1): 4-5.
  EXPECT_DOUBLE_EQ(StepCriticalPath(p, costs), 5);
  // The step ends with the later thread: a long local op after the collective (#2, 10 s) hides
  // it entirely.
  costs = Times({1, 3, 10, 0, 0}, "lclll");
  EXPECT_DOUBLE_EQ(StepCriticalPath(ChainProgram("lclll", {{}, {0}, {}, {}, {}}), costs), 11);
}

TEST(CostModelTest, StepTimeAddsTheOverheadAndOverlapsWhenTheProfileSaysSo) {
  HardwareProfile p;
  p.gemm_small_flops_per_s = 1e9;
  p.gemm_large_flops = 1e12;
  p.elementwise_flops_per_s = 1e9;
  p.memory_bytes_per_s = 1e8;
  p.step_overhead_s = 2e-3;
  p.collectives = DefaultCollectiveLinks();
  p.collectives["allreduce"] = CollectiveLink{1e-3, 1e6};
  // The einsum then the allreduce of its result: nothing to overlap, so both ways give the sum.
  ProgramCost c = CostOfGraph(EinsumGraph(), "p:2", "d:p", {"y"}, p);
  const double work = 272 / 1e8 + 1e-3 + 128 / 1e6;
  EXPECT_DOUBLE_EQ(c.overhead_s, 2e-3);
  EXPECT_DOUBLE_EQ(c.serial_s, 2e-3 + work);
  EXPECT_DOUBLE_EQ(c.step_s, 2e-3 + work);
  p.overlap_comm = false;
  c = CostOfGraph(EinsumGraph(), "p:2", "d:p", {"y"}, p);
  EXPECT_DOUBLE_EQ(c.step_s, c.serial_s);
}

TEST(CostModelTest, GemmClassIsByProductNotByBatchedSlice) {
  // Attention-shaped: 4 x 2 products of [l:8, k:4] x [k:4, m:8], 512 FLOPs each, 4096 in all.
  GraphBuilder b;
  auto q = b.Placeholder("q", Shape({{"b", 4}, {"h", 2}, {"l", 8}, {"k", 4}}));
  auto k = b.Placeholder("kk", Shape({{"b", 4}, {"h", 2}, {"m", 8}, {"k", 4}}));
  b.MarkOutput(b.Einsum({q, k}, Shape({{"b", 4}, {"h", 2}, {"l", 8}, {"m", 8}}), "scores"));
  const Graph g = b.Build().value();
  HardwareProfile p;
  p.gemm_small_flops_per_s = 1e3;
  p.gemm_large_flops_per_s = 1e6;
  p.gemm_large_flops = 1000;  // above one product's FLOPs, below the slice's
  p.memory_bytes_per_s = 1e12;
  ProgramCost c = CostOfGraph(g, "", "", {"scores"}, p);
  const InstructionCost* scores = nullptr;
  for (const InstructionCost& i : c.instructions) {
    if (i.gemm) scores = &i;
  }
  ASSERT_NE(scores, nullptr);
  EXPECT_EQ(scores->gemm_batch, 8);
  EXPECT_DOUBLE_EQ(scores->flops, 4096);
  EXPECT_DOUBLE_EQ(scores->compute_s, 4096 / 1e3);  // the small class
  // Split over h: 4 products each; a threshold below one product's FLOPs makes them large.
  p.gemm_large_flops = 512;
  c = CostOfGraph(g, "p:2", "h:p", {"scores"}, p);
  for (const InstructionCost& i : c.instructions) {
    if (!i.gemm) continue;
    EXPECT_EQ(i.gemm_batch, 4);
    EXPECT_DOUBLE_EQ(i.compute_s, 2048 / 1e6);
  }
}

TEST(CostModelTest, GemmRateGoesByTheSmallestDimBetweenTheCalibratedProducts) {
  HardwareProfile p;
  p.gemm_small_flops_per_s = 20e9;
  p.gemm_large_flops_per_s = 120e9;
  p.gemm_large_flops = 1e9;
  p.memory_bytes_per_s = 1e15;  // compute bound
  // Two classes by FLOPs without the dims.
  EXPECT_DOUBLE_EQ(GemmFlopsPerSecond(p, 1e6, 64), 20e9);
  EXPECT_DOUBLE_EQ(GemmFlopsPerSecond(p, 1e9, 64), 120e9);
  p.gemm_small_dim = 32;
  p.gemm_large_dim = 512;
  EXPECT_DOUBLE_EQ(GemmFlopsPerSecond(p, 1e9, 8), 20e9);  // below: the small rate
  EXPECT_DOUBLE_EQ(GemmFlopsPerSecond(p, 1e9, 32), 20e9);
  EXPECT_DOUBLE_EQ(GemmFlopsPerSecond(p, 1e9, 128), 70e9);  // half way in log(dim)
  EXPECT_DOUBLE_EQ(GemmFlopsPerSecond(p, 1e6, 512), 120e9);
  EXPECT_DOUBLE_EQ(GemmFlopsPerSecond(p, 1e6, 4096), 120e9);  // above: the large rate
  EXPECT_DOUBLE_EQ(GemmFlopsPerSecond(p, 1e6, 0), 20e9);      // unknown dims: by FLOPs
  // An einsum's product: [b:4, k:128] x [k:128, f:1024] -> [b:4, f:1024] has M = 4.
  GraphBuilder b;
  auto x = b.Placeholder("x", Shape({{"b", 4}, {"k", 128}}));
  auto w = b.Placeholder("w", Shape({{"k", 128}, {"f", 1024}}));
  b.MarkOutput(b.Einsum({x, w}, Shape({{"b", 4}, {"f", 1024}}), "y"));
  const ProgramCost c = CostOfGraph(b.Build().value(), "", "", {"y"}, p);
  for (const InstructionCost& i : c.instructions) {
    if (!i.gemm) continue;
    EXPECT_EQ(i.gemm_min_dim, 4);
    EXPECT_DOUBLE_EQ(i.compute_s, i.flops / 20e9);
  }
}

// On a 2x2 mesh whose rows are hosts (ranks 0,1 on h0, 2,3 on h1): an allreduce over cols stays
// within a host, one over rows spans them and takes the cross-host link.
TEST(CostModelTest, GroupsSpanningHostsUseTheCrossHostLinks) {
  const Mesh mesh = *Mesh::Parse("rows:2,cols:2");
  const std::vector<std::string> hosts = {"h0", "h0", "h1", "h1"};
  EXPECT_FALSE(GroupsSpanHosts(mesh, {1}, hosts));
  EXPECT_TRUE(GroupsSpanHosts(mesh, {0}, hosts));
  EXPECT_TRUE(GroupsSpanHosts(mesh, {0, 1}, hosts));
  EXPECT_FALSE(GroupsSpanHosts(mesh, {0}, {"h", "h", "h", "h"}));
  EXPECT_FALSE(GroupsSpanHosts(mesh, {0}, {}));
  // y = sum over n of x [r, n]: with n split over one mesh dim, one allreduce over it.
  GraphBuilder b;
  auto x = b.Placeholder("x", Shape({{"r", 4}, {"n", 256}}));
  b.MarkOutput(b.ReduceSum(x, {"n"}, "sum"));
  const Graph g = b.Build().value();
  HardwareProfile p;
  p.collectives["allreduce"] = CollectiveLink{1e-3, 1e9};
  p.cross_host["allreduce"] = CollectiveLink{5e-3, 1e8};
  p.processor_hosts = hosts;
  for (const auto& [rules, cross] :
       std::vector<std::pair<std::string, bool>>{{"n:cols", false}, {"n:rows", true}}) {
    SCOPED_TRACE(rules);
    const ProgramCost c = CostOfGraph(g, "rows:2,cols:2", rules, {"sum"}, p);
    int found = 0;
    for (const InstructionCost& i : c.instructions) {
      if (i.kind != "allreduce") continue;
      ++found;
      EXPECT_EQ(i.cross_host, cross);
      const CollectiveLink& l = cross ? p.cross_host.at("allreduce") : p.collectives.at("allreduce");
      EXPECT_DOUBLE_EQ(i.comm_s, l.alpha_s + i.sent_bytes / l.beta_bytes_per_s);
    }
    EXPECT_EQ(found, 1);
  }
  // Without a cross-host link for the kind: the placeholder.
  p.cross_host.clear();
  const ProgramCost c = CostOfGraph(g, "rows:2,cols:2", "n:rows", {"sum"}, p);
  for (const InstructionCost& i : c.instructions) {
    if (i.kind != "allreduce") continue;
    EXPECT_DOUBLE_EQ(i.comm_s, DefaultCrossHostLink().alpha_s +
                                   i.sent_bytes / DefaultCrossHostLink().beta_bytes_per_s);
  }
}

TEST(CostModelTest, FusedInstructionsTakeNoTimeOfTheirOwn) {
  // SGD's w - lr * g: mul (by a scalar) then sub, 16 floats each.
  GraphBuilder b;
  auto w = b.Placeholder("w", Shape({{"n", 16}}));
  auto g = b.Placeholder("g", Shape({{"n", 16}}));
  auto lr = b.Placeholder("lr", Shape({}));
  auto step = b.Mul(g, lr, "step");
  b.MarkOutput(b.Sub(w, step, "new_w"));
  b.MarkOutput(step);  // fetched by one case below
  const Graph graph = b.Build().value();
  Mesh mesh = Mesh::Parse("").value();
  v1::Program program = Lower(graph, mesh, LayoutRules::Parse("", mesh).value()).value();
  int mul = -1, sub = -1;
  for (int i = 0; i < program.instructions_size(); ++i) {
    if (program.instructions(i).source_op() == "step") mul = i;
    if (program.instructions(i).source_op() == "new_w") sub = i;
  }
  ASSERT_GE(mul, 0);
  ASSERT_GE(sub, 0);
  HardwareProfile p;
  p.memory_bytes_per_s = 1e3;  // memory bound: mul moves 132 bytes, sub 192
  p.elementwise_flops_per_s = 1e9;
  const std::vector<std::string> fetches = {"new_w"};
  const std::map<int, FusedGroup> none;
  ProgramCost plain = CostProgram(program, p, &fetches, &none).value();
  EXPECT_DOUBLE_EQ(plain.instructions[mul].compute_s, 132 / 1e3);
  EXPECT_DOUBLE_EQ(plain.instructions[sub].compute_s, 192 / 1e3);
  std::map<int, FusedGroup> fusions = {{sub, FusedGroup{{mul}, false}}};
  ProgramCost fused = CostProgram(program, p, &fetches, &fusions).value();
  EXPECT_TRUE(fused.instructions[mul].fused);
  EXPECT_DOUBLE_EQ(fused.instructions[mul].compute_s, 0);
  EXPECT_DOUBLE_EQ(fused.instructions[mul].flops, 16);  // still counted
  EXPECT_FALSE(fused.instructions[sub].fused);
  EXPECT_DOUBLE_EQ(fused.total.compute_s, plain.total.compute_s - 132 / 1e3);
  // The executor's own choice (core/ir/step_fusion.h), which CostProgram takes by default, is this
  // group: a plain scaled update whose product is read once.
  const std::map<int, FusedGroup> derived = StepFusedGroups(program, &fetches);
  ASSERT_EQ(derived.size(), 1u);
  ASSERT_EQ(derived.count(sub), 1u);
  EXPECT_EQ(derived.at(sub).absorbed, std::vector<int>{mul});
  EXPECT_FALSE(derived.at(sub).into_gemm);
  EXPECT_DOUBLE_EQ(CostProgram(program, p, &fetches).value().total.compute_s,
                   fused.total.compute_s);
  // Fetching the product pins it: nothing fuses.
  const std::vector<std::string> both = {"new_w", "step"};
  EXPECT_TRUE(StepFusedGroups(program, &both).empty());
  // Into a GEMM: S's pass goes too.
  fusions[sub].into_gemm = true;
  fused = CostProgram(program, p, &fetches, &fusions).value();
  EXPECT_DOUBLE_EQ(fused.instructions[sub].compute_s, 0);
  EXPECT_DOUBLE_EQ(fused.total.compute_s, plain.total.compute_s - 324 / 1e3);
}

TEST(CostModelTest, WarnsWhenAMeshDimDuplicatesAnEinsum) {
  const Graph g = EinsumGraph();
  for (const auto& [rules, warned] :
       std::vector<std::pair<std::string, bool>>{{"", true}, {"b:p", false}, {"f:p", false}}) {
    Mesh mesh = Mesh::Parse("p:2").value();
    v1::Program program = Lower(g, mesh, LayoutRules::Parse(rules, mesh).value()).value();
    std::vector<std::string> fetches = {"y"};
    ProgramCost c = CostProgram(program, HardwareProfile(), &fetches).value();
    std::vector<std::string> w = CostWarnings(program, c);
    EXPECT_EQ(w.size(), warned ? 1u : 0u) << "rules '" << rules << "'";
    if (warned && !w.empty()) {
      EXPECT_NE(w[0].find("compute duplicated 2x over p: einsum 'y'"), std::string::npos) << w[0];
    }
  }
}

TEST(CostModelTest, EveryRegisteredOpHasACost) {
  for (const OpInfo& info : AllOps()) {
    v1::Op op;
    op.set_name("o");
    op.set_type(info.type);
    const TensorType t{Shape({{"n", 4}, {"m", 2}}), DType::kFloat32};
    // Einsum with two operands: one operand of the output's shape is a copy, with no FLOPs.
    std::vector<TensorType> inputs(info.type == "einsum" ? 2 : std::max(info.min_inputs, 0), t);
    absl::StatusOr<SliceCost> c = OpSliceCost(op, inputs, t);
    ASSERT_TRUE(c.ok()) << info.type << ": " << c.status();
    if (info.family == OpFamily::kEinsum || info.family == OpFamily::kElementwise ||
        info.family == OpFamily::kReduce || info.family == OpFamily::kIndex ||
        info.type == "conv1d" || info.type == "conv2d") {
      EXPECT_GT(c->flops, 0) << "op type " << info.type;
    }
    if (info.family != OpFamily::kControl && info.type != "placeholder" &&
        info.type != "variable") {
      EXPECT_EQ(c->bytes_written, 32) << info.type;
    }
  }
  v1::Op unknown;
  unknown.set_name("u");
  unknown.set_type("no_such_op");
  EXPECT_TRUE(StatusIs(OpSliceCost(unknown, {}, TensorType{}).status(),
                       absl::StatusCode::kInvalidArgument, {"no_such_op"}));
}

TEST(CostModelTest, ProfileRoundTripsAndRejectsBadLines) {
  HardwareProfile p;
  p.gemm_large_flops_per_s = 123e9;
  p.gemm_small_dim = 16;
  p.collectives = DefaultCollectiveLinks();
  p.collectives["permute"] = CollectiveLink{2e-5, 3e9};
  p.cross_host["alltoall"] = CollectiveLink{4e-4, 5e8};
  p.collectives_measured = true;
  p.step_overhead_s = 7e-4;
  p.overlap_comm = false;
  ASSERT_OK_AND_ASSIGN(HardwareProfile q,
                       ParseHardwareProfile(FormatHardwareProfile(p), "round trip"));
  EXPECT_DOUBLE_EQ(q.gemm_large_flops_per_s, 123e9);
  EXPECT_DOUBLE_EQ(q.gemm_small_dim, 16);
  EXPECT_DOUBLE_EQ(q.collectives["permute"].alpha_s, 2e-5);
  EXPECT_DOUBLE_EQ(q.collectives["permute"].beta_bytes_per_s, 3e9);
  ASSERT_EQ(q.cross_host.size(), 1u);
  EXPECT_DOUBLE_EQ(q.cross_host["alltoall"].alpha_s, 4e-4);
  EXPECT_DOUBLE_EQ(q.cross_host["alltoall"].beta_bytes_per_s, 5e8);
  // One half given: the other is the placeholder's.
  ASSERT_OK_AND_ASSIGN(HardwareProfile half,
                       ParseHardwareProfile("cross_host.allreduce.beta_bytes_per_s 2e9\n", "h"));
  EXPECT_DOUBLE_EQ(half.cross_host["allreduce"].beta_bytes_per_s, 2e9);
  EXPECT_DOUBLE_EQ(half.cross_host["allreduce"].alpha_s, DefaultCrossHostLink().alpha_s);
  EXPECT_TRUE(StatusIs(ParseHardwareProfile("cross_host.gossip.alpha_s 1\n", "g").status(),
                       absl::StatusCode::kInvalidArgument, {"unknown key 'cross_host.gossip.alpha_s'"}));
  EXPECT_TRUE(q.collectives_measured);
  EXPECT_DOUBLE_EQ(q.step_overhead_s, 7e-4);
  EXPECT_FALSE(q.overlap_comm);
  EXPECT_TRUE(StatusIs(ParseHardwareProfile("# c\ngemm_flops 1\n", "f.txt").status(),
                       absl::StatusCode::kInvalidArgument,
                       {"f.txt line 2: unknown key 'gemm_flops'"}));
  EXPECT_TRUE(StatusIs(ParseHardwareProfile("memory_bytes_per_s fast\n", "f.txt").status(),
                       absl::StatusCode::kInvalidArgument, {"memory_bytes_per_s"}));
  EXPECT_TRUE(StatusIs(ParseHardwareProfile("allreduce.beta_bytes_per_s 0\n", "f.txt").status(),
                       absl::StatusCode::kInvalidArgument, {"must be > 0"}));
  EXPECT_TRUE(StatusIs(LoadHardwareProfile("/nonexistent/p.txt").status(),
                       absl::StatusCode::kNotFound, {"/nonexistent/p.txt"}));
}

TEST(CostModelTest, ExplainJsonParsesWithTheTotals) {
  Mesh mesh = Mesh::Parse("p:2").value();
  v1::Program program = Lower(EinsumGraph(), mesh, LayoutRules::Parse("", mesh).value()).value();
  ASSERT_OK_AND_ASSIGN(std::string json, ExplainProgramJson(program, HardwareProfile()));
  google::protobuf::Struct s;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json, &s).ok()) << json;
  const auto& f = s.fields();
  EXPECT_EQ(f.at("mesh").string_value(), mesh.ToString());
  EXPECT_DOUBLE_EQ(f.at("totals").struct_value().fields().at("flops").number_value(), 384);
  EXPECT_EQ(f.at("tensors").list_value().values_size(), 3);
  EXPECT_EQ(f.at("warnings").list_value().values_size(), 1);
  EXPECT_FALSE(f.at("profile").struct_value().fields().at("collectives_measured").bool_value());
}

}  // namespace
}  // namespace meshrt
