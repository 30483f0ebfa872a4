// The add + softmax fusion: which programs FindFusions fuses (and which it must not), and that the
// executor's one pass gives the bits of the two ops, with overlap on and off, for the values a
// causal mask meets (-1e9, -inf, NaN) and the dims orders the Transformer has.
#include "core/ir/step_fusion.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/ops/reference_kernels.h"
#include "core/testing/test_util.h"
#include "gtest/gtest.h"
#include "kernels/cpu_kernels.h"
#include "runtime/executor.h"
#include "runtime/local_communicator.h"
#include "runtime/test_kernels.h"

namespace meshrt {
namespace {

Shape S(const std::string& text) { return Shape::Parse(text).value(); }

// y = softmax(t) over `dims`, t = add(x, k) (add(k, x) when `mask_first`): logits x (buffer 0)
// and a mask k (buffer 1), or, with `allreduce`, the mask summed over a mesh of two first
// (buffer 4, a small allreduce the executor defers to its reader). Outputs y (3) and t (2).
struct Case {
  std::string type = "softmax";
  std::string k = "m:5,l:3";
  bool mask_first = false;
  std::vector<std::string> dims = {"m"};
  bool allreduce = false;
  std::string Name() const {
    return absl::StrCat(type, " over ", absl::StrJoin(dims, ","), " of ",
                        mask_first ? "[k] + [x]" : "[x] + [k]", ", k [", k, "]",
                        allreduce ? ", k allreduced" : "");
  }
};
const Shape kX = S("b:2,h:2,l:3,m:5");

void AddTensor(const std::string& name, int buffer, const Shape& shape,
               google::protobuf::RepeatedPtrField<v1::ProgramTensor>* to) {
  v1::ProgramTensor* t = to->Add();
  t->set_name(name);
  t->set_buffer(buffer);
  t->set_dtype(v1::DT_FLOAT32);
  *t->mutable_shape() = shape.ToProto();
  for (int i = 0; i < shape.rank(); ++i) t->mutable_layout()->add_mesh_axis(-1);
}

v1::Instruction* AddLocal(v1::Program* p, const std::string& type, std::vector<int> inputs,
                          int output, const Shape& shape) {
  v1::Instruction* instr = p->add_instructions();
  instr->set_output(output);
  for (int b : inputs) instr->add_inputs(b);
  instr->set_dtype(v1::DT_FLOAT32);
  *instr->mutable_slice_shape() = shape.ToProto();
  instr->set_source_op(absl::StrCat(type, "_", p->instructions_size() - 1));
  instr->mutable_local()->set_type(type);
  return instr;
}

v1::Program AddSoftmaxProgram(const Case& c) {
  v1::Program p;
  v1::Dim* x = p.mutable_mesh()->add_dims();
  x->set_name("x");
  x->set_size(c.allreduce ? 2 : 1);
  p.set_num_buffers(5);
  AddTensor("x", 0, kX, p.mutable_inputs());
  AddTensor("k", 1, S(c.k), p.mutable_inputs());
  int mask = 1;
  if (c.allreduce) {
    v1::Instruction* ar = p.add_instructions();
    ar->set_output(4);
    ar->add_inputs(1);
    ar->set_dtype(v1::DT_FLOAT32);
    *ar->mutable_slice_shape() = S(c.k).ToProto();
    ar->set_source_op("mask_sum");
    ar->mutable_collective()->set_kind(v1::Collective::ALLREDUCE);
    ar->mutable_collective()->add_mesh_axes(0);
    ar->mutable_collective()->set_reduce_op(v1::REDUCE_SUM);
    mask = 4;
  }
  AddLocal(&p, "add", c.mask_first ? std::vector<int>{mask, 0} : std::vector<int>{0, mask}, 2, kX)
      ->set_source_op("masked");
  v1::Instruction* sm = AddLocal(&p, c.type, {2}, 3, kX);
  for (const std::string& d : c.dims) sm->mutable_local()->add_dims(d);
  AddTensor("y", 3, kX, p.mutable_outputs());
  AddTensor("t", 2, kX, p.mutable_outputs());
  return p;
}

// Logits with a NaN, an +inf (NaN where the mask is -inf) and large values; a causal mask: -1e9
// where m > l, -inf at a few places, else 0.
Tensor Logits() {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-3, 3);
  Tensor t(DType::kFloat32, kX);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.f32()[i] = dist(rng) * (i % 13 == 4 ? 1e4f : 1);
  t.f32()[7] = std::numeric_limits<float>::quiet_NaN();
  t.f32()[31] = std::numeric_limits<float>::infinity();
  return t;
}
Tensor Mask(const Shape& shape) {
  Tensor t(DType::kFloat32, shape);
  const int lm = shape.IndexOf("l"), mm = shape.IndexOf("m");
  for (StridedIterator it(shape.Sizes(), {shape.Strides()}); !it.done(); it.Next()) {
    const int64_t l = lm >= 0 ? it.index()[lm] : 0, m = mm >= 0 ? it.index()[mm] : 0;
    t.f32()[it.offset(0)] = m > l ? -1e9f : 0.0f;
    if ((it.offset(0) + m) % 9 == 5) {
      t.f32()[it.offset(0)] = -std::numeric_limits<float>::infinity();
    }
  }
  return t;
}

// Runs `program` on every processor with `fetches`; y of processor 0 and each executor's
// fused_softmaxes().
struct Result {
  std::vector<float> y;
  std::vector<int64_t> fused;
};
Result RunAll(const v1::Program& program, const std::vector<std::string>& fetches, bool overlap,
              const KernelRunner& kernels = CpuKernels()) {
  const int procs = program.mesh().dims(0).size();
  LocalCollectiveHub hub(*Mesh::Parse(absl::StrCat("x:", procs)), {absl::Seconds(10)});
  std::vector<std::unique_ptr<Executor>> executors;
  std::vector<absl::Status> statuses(procs);
  std::vector<std::thread> threads;
  const Shape ks = *Shape::FromProto(program.inputs(1).shape());
  for (int p = 0; p < procs; ++p) {
    executors.push_back(std::make_unique<Executor>(program, std::vector<int64_t>{p}, &kernels,
                                                   hub.communicator(p), KernelContext(),
                                                   ExecutorOptions{overlap}));
  }
  for (int p = 0; p < procs; ++p) {
    threads.emplace_back([&, p] {
      // Processor 1 adds zeros to the mask's sum: the allreduced mask is exactly the mask.
      statuses[p] = executors[p]->Run(
          {{"x", Logits()}, {"k", p == 0 ? Mask(ks) : Tensor(DType::kFloat32, ks)}}, fetches);
    });
  }
  for (std::thread& t : threads) t.join();
  Result r;
  for (int p = 0; p < procs; ++p) {
    EXPECT_TRUE(statuses[p].ok()) << statuses[p];
    if (!statuses[p].ok()) return r;
    r.fused.push_back(executors[p]->fused_softmaxes());
  }
  absl::StatusOr<Tensor> y = executors[0]->OutputSlice("y");
  EXPECT_TRUE(y.ok()) << y.status();
  if (y.ok()) r.y.assign(y->floats().begin(), y->floats().end());
  return r;
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  for (const char* type : {"softmax", "log_softmax"}) {
    Case c;
    c.type = type;
    cases.push_back(c);  // the causal mask [m, l] against [b, h, l, m]: a transposed broadcast
    Case same = c;
    same.k = "b:2,h:2,l:3,m:5";
    cases.push_back(same);
    Case first = c;
    first.mask_first = true;
    cases.push_back(first);
    Case two = c;
    two.dims = {"l", "m"};
    cases.push_back(two);
    Case inner = c;  // not the innermost dim: the kernel's general path
    inner.dims = {"l"};
    cases.push_back(inner);
    Case reduced = c;
    reduced.allreduce = true;
    cases.push_back(reduced);
  }
  return cases;
}

TEST(ExecutorFusionTest, AddThenSoftmaxRunsInOnePassWithTheSameBits) {
  for (const Case& c : Cases()) {
    for (const bool overlap : {true, false}) {
      SCOPED_TRACE(absl::StrCat(c.Name(), overlap ? ", overlap" : ", no overlap"));
      const v1::Program program = AddSoftmaxProgram(c);
      // t fetched: it must exist, so the two ops run as the program says.
      const Result two_ops = RunAll(program, {"y", "t"}, overlap);
      const Result one_pass = RunAll(program, {"y"}, overlap);
      EXPECT_EQ(two_ops.fused, std::vector<int64_t>(c.allreduce ? 2 : 1, 0));
      EXPECT_EQ(one_pass.fused, std::vector<int64_t>(c.allreduce ? 2 : 1, 1));
      ASSERT_EQ(one_pass.y.size(), kX.num_elements());
      ASSERT_EQ(two_ops.y.size(), kX.num_elements());
      int nans = 0, zeros = 0;
      for (size_t i = 0; i < one_pass.y.size(); ++i) {
        EXPECT_EQ(std::memcmp(&one_pass.y[i], &two_ops.y[i], sizeof(float)), 0)
            << i << ": " << one_pass.y[i] << " vs " << two_ops.y[i];
        nans += std::isnan(one_pass.y[i]);
        zeros += one_pass.y[i] == 0.0f;
      }
      EXPECT_GT(nans, 0);  // the NaN logit, inf - inf
      if (c.type == "softmax" && c.dims.size() == 1 && c.dims[0] == "m") {
        EXPECT_GT(zeros, 0);  // masked positions
      }
    }
  }
}

// A runner without the one-pass op (the reference kernels): the add and the softmax run one by
// one at the softmax, with the same result; a failure there names the add's instruction.
TEST(ExecutorFusionTest, RunnersWithoutTheFusedOpRunTheTwoOps) {
  const v1::Program program = AddSoftmaxProgram(Case());
  const Result reference = RunAll(program, {"y", "t"}, true, ReferenceKernels());
  const Result fallback = RunAll(program, {"y"}, true, ReferenceKernels());
  EXPECT_EQ(fallback.fused, std::vector<int64_t>{0});
  ASSERT_EQ(fallback.y.size(), reference.y.size());
  EXPECT_EQ(std::memcmp(fallback.y.data(), reference.y.data(), 4 * reference.y.size()), 0);

  // A mask with a dim the sum lacks: neither the fused op nor the add accepts it.
  v1::Program bad = AddSoftmaxProgram(Case());
  *bad.mutable_inputs(1)->mutable_shape() = S("m:5,q:3").ToProto();
  LocalCollectiveHub hub(*Mesh::Parse("x:1"));
  Executor executor(bad, {0}, &CpuKernels(), hub.communicator(0));
  const absl::Status s =
      executor.Run({{"x", Logits()}, {"k", Tensor(DType::kFloat32, S("m:5,q:3"))}}, {"y"});
  EXPECT_TRUE(StatusIs(s, absl::StatusCode::kInvalidArgument,
                       {"instruction 0", "'masked'", "local op 'add'", "'q'"}))
      << s;
  EXPECT_EQ(executor.fused_softmaxes(), 0);
}

// FindFusions on the program above with every instruction running and the inputs (plus `extra`)
// pinned.
std::map<int, FusedUpdate> Fusions(const v1::Program& p, std::vector<int> extra = {},
                                   std::vector<bool>* runs_out = nullptr) {
  std::vector<bool> pinned(p.num_buffers(), false);
  for (const v1::ProgramTensor& t : p.inputs()) pinned[t.buffer()] = true;
  for (int b : extra) pinned[b] = true;
  std::vector<bool> runs(p.instructions_size(), true);
  std::map<int, FusedUpdate> f = FindFusions(p, pinned, &runs);
  if (runs_out != nullptr) *runs_out = runs;
  return f;
}

TEST(FindFusionsTest, FusesTheAddIntoItsOnlyReaderSoftmax) {
  for (const char* type : {"softmax", "log_softmax"}) {
    SCOPED_TRACE(type);
    Case c;
    c.type = type;
    std::vector<bool> runs;
    const std::map<int, FusedUpdate> f = Fusions(AddSoftmaxProgram(c), {3}, &runs);
    ASSERT_EQ(f.size(), 1u);
    EXPECT_EQ(f.begin()->first, 1);  // S: the softmax
    EXPECT_EQ(f.begin()->second.add, 0);
    EXPECT_EQ(f.begin()->second.ops(), (std::array<int, 4>{-1, -1, -1, 0}));
    EXPECT_EQ(runs, (std::vector<bool>{false, true}));  // the add runs inside the softmax
  }
  Case reduced;
  reduced.allreduce = true;
  const std::map<int, FusedUpdate> f = Fusions(AddSoftmaxProgram(reduced), {3});
  ASSERT_EQ(f.count(2), 1u);  // the allreduce (0) stays; the add (1) goes into the softmax (2)
  EXPECT_EQ(f.at(2).add, 1);
}

TEST(FindFusionsTest, LeavesTheAddWhenItsSumIsNeededOrItsInputsChange) {
  const v1::Program base = AddSoftmaxProgram(Case());
  // The sum fetched (pinned).
  EXPECT_TRUE(Fusions(base, {2, 3}).empty());
  // A second reader of the sum.
  v1::Program second = base;
  second.set_num_buffers(6);
  AddLocal(&second, "exp", {2}, 5, kX);
  EXPECT_TRUE(Fusions(second).empty());
  // The add or the softmax guarded (a predicate, buffer 4 here).
  for (int guarded : {0, 1}) {
    v1::Program g = base;
    g.mutable_instructions(guarded)->set_predicate(4);
    EXPECT_TRUE(Fusions(g, {4}).empty()) << "guarded instruction " << guarded;
  }
  // A buffer the add reads rewritten between the add and the softmax: x (0) or k (1).
  for (int rewritten : {0, 1}) {
    v1::Program r = base;
    *r.add_instructions() = r.instructions(1);
    const Shape shape = rewritten == 0 ? kX : S("m:5,l:3");
    v1::Instruction between;
    between.set_output(rewritten);
    between.add_inputs(rewritten);
    between.set_dtype(v1::DT_FLOAT32);
    *between.mutable_slice_shape() = shape.ToProto();
    between.mutable_local()->set_type("neg");
    *r.mutable_instructions(1) = between;
    EXPECT_TRUE(Fusions(r).empty()) << "buffer " << rewritten << " rewritten";
  }
  // An add of a scalar attr, another declared slice shape, a softmax that is not running.
  v1::Program scalar = base;
  (*scalar.mutable_instructions(0)->mutable_local()->mutable_attrs())["scalar"].set_f(1);
  EXPECT_TRUE(Fusions(scalar).empty());
  v1::Program shape = base;
  *shape.mutable_instructions(1)->mutable_slice_shape() = S("b:2,h:2,m:5,l:3").ToProto();
  EXPECT_TRUE(Fusions(shape).empty());
  std::vector<bool> pinned(5, false), runs = {true, false};
  EXPECT_TRUE(FindFusions(base, pinned, &runs).empty());
  EXPECT_EQ(runs, (std::vector<bool>{true, false}));
}

// An add that is itself a scaled update's S (w + mul(g, lr)) stays one: the softmax after it
// reads its result unfused.
TEST(FindFusionsTest, AnAddAlreadyFusedStaysWithItsGroup) {
  v1::Program q = AddSoftmaxProgram(Case());
  q.set_num_buffers(7);
  AddTensor("lr", 5, S(""), q.mutable_inputs());
  q.clear_instructions();
  AddLocal(&q, "mul", {0, 5}, 6, kX);
  AddLocal(&q, "add", {0, 6}, 2, kX);
  AddLocal(&q, "softmax", {2}, 3, kX)->mutable_local()->add_dims("m");
  std::vector<bool> runs;
  const std::map<int, FusedUpdate> f = Fusions(q, {3}, &runs);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f.begin()->first, 1);
  EXPECT_EQ(f.begin()->second.mul, 0);
  EXPECT_EQ(f.begin()->second.add, -1);
  EXPECT_EQ(runs, (std::vector<bool>{false, true, true}));
}

// The rewrite: the one instruction that replaces S, reading the group's outside operands.
TEST(FusedInstructionTest, ReplacesSWithOneFusedLocalOp) {
  const v1::Program softmax = AddSoftmaxProgram(Case());
  const std::map<int, FusedUpdate> f = Fusions(softmax, {3});
  ASSERT_EQ(f.count(1), 1u);
  const v1::Instruction fused = FusedInstruction(softmax, 1, f.at(1));
  EXPECT_EQ(fused.local().type(), "_add_softmax");
  EXPECT_EQ(std::vector<int>(fused.inputs().begin(), fused.inputs().end()),
            (std::vector<int>{0, 1}));  // the add's
  EXPECT_EQ(fused.output(), 3);
  EXPECT_EQ(fused.source_op(), softmax.instructions(1).source_op());
  EXPECT_EQ(fused.local().dims_size(), 1);
  EXPECT_EQ(FusionKindOf(f.at(1)), FusionKind::kAddSoftmax);

  v1::Program update = AddSoftmaxProgram(Case());  // w + mul(x, lr): a plain scaled update
  update.set_num_buffers(7);
  AddTensor("lr", 5, S(""), update.mutable_inputs());
  update.clear_instructions();
  AddLocal(&update, "mul", {0, 5}, 6, kX);
  AddLocal(&update, "sub", {1, 6}, 2, kX);
  const std::map<int, FusedUpdate> u = Fusions(update, {2});
  ASSERT_EQ(u.count(1), 1u);
  const v1::Instruction scaled = FusedInstruction(update, 1, u.at(1));
  EXPECT_EQ(scaled.local().type(), "_scaled_add");
  EXPECT_EQ(std::vector<int>(scaled.inputs().begin(), scaled.inputs().end()),
            (std::vector<int>{1, 0, 5}));  // x, then the mul's inputs
  EXPECT_EQ(scaled.local().attrs().at("sign").f(), -1.0f);
  EXPECT_EQ(scaled.output(), 2);
  EXPECT_EQ(FusionKindOf(u.at(1)), FusionKind::kScaledUpdate);
}

}  // namespace
}  // namespace meshrt
