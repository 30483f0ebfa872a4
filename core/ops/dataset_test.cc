// Worker-side input: text_windows against bytes computed by hand (both offsets, wrap-around, a
// slice read alone), the same tensors from the interpreter and the simulated mesh on 1-D and 2-D
// meshes with no communication, clear errors for missing and short files; and the random ops'
// optional step input (pinned values, fresh per step, layout-invariant, unchanged without it).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/lowering/lowering.h"
#include "core/ops/graph.h"
#include "core/ops/ops.h"
#include "core/ops/reference_kernels.h"
#include "core/reference/interpreter.h"
#include "core/testing/data_index_test_util.h"
#include "core/testing/test_util.h"
#include "gtest/gtest.h"
#include "kernels/cpu_kernels.h"
#include "runtime/simulated_mesh.h"

namespace meshrt {
namespace {

using testing_util::Attr;
using testing_util::GraphWriter;

// Bytes 0, 1, ..., size-1: a byte's value is its position, so windows are easy to read.
std::string Positions(int size) {
  std::string s;
  for (int i = 0; i < size; ++i) s.push_back(static_cast<char>(i));
  return s;
}

Tensor IntStep(int32_t s) { return Tensor::Int(Shape(), {s}); }
Tensor FloatStep(float s) { return Tensor::Float(Shape(), {s}); }

std::vector<int32_t> Ints(const Tensor& t) { return {t.ints().begin(), t.ints().end()}; }

// step (placeholder of `step_dtype`) -> x = text_windows(offset 0), y = text_windows(offset 1),
// shape [b: batch, l: length].
Graph WindowsGraph(const std::string& path, int batch, int length,
                   DType step_dtype = DType::kInt32) {
  GraphWriter w;
  w.Placeholder("step", Shape(), step_dtype);
  for (const auto& [name, offset] : {std::pair<const char*, int>{"x", 0}, {"y", 1}}) {
    v1::Op& op = w.Op(name, "text_windows", {"step"}, {},
                      {Attr("path", path.c_str()), Attr("offset", offset)});
    *op.mutable_shape() = Shape::Parse(absl::StrCat("b:", batch, ",l:", length))
                              .value()
                              .ToProto();
  }
  absl::StatusOr<Graph> g = w.Build();
  EXPECT_TRUE(g.ok()) << g.status();
  return *std::move(g);
}

absl::StatusOr<TensorMap> RunStep(const Graph& g, const Tensor& step) {
  return Interpret(g, {{"step", step}});
}

TEST(TextWindowsTest, RegisteredAsSliceAwareSource) {
  const OpInfo* info = FindOp("text_windows");
  ASSERT_NE(info, nullptr);
  EXPECT_TRUE(info->needs_slice_begin);
  EXPECT_EQ(info->min_inputs, 1);
  EXPECT_EQ(info->max_inputs, 1);
  EXPECT_FALSE(info->differentiable);
}

TEST(TextWindowsTest, ValuesByHand) {
  // 40 bytes, batch 2, length 5: n = 40 - 6 = 34, row r of step s starts at ((2s + r) * 5) mod 34.
  const std::string path = WriteTestFile("by_hand.bin", Positions(40));
  const Graph gi = WindowsGraph(path, 2, 5), gf = WindowsGraph(path, 2, 5, DType::kFloat32);
  struct Case {
    int step;
    std::vector<int32_t> x, y;
  };
  const std::vector<Case> cases = {
      // starts 0 and 5
      {0, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}},
      // starts 10 and 15
      {1, {10, 11, 12, 13, 14, 15, 16, 17, 18, 19}, {11, 12, 13, 14, 15, 16, 17, 18, 19, 20}},
      // starts 30 and 35 mod 34 = 1: the second row wraps to the file's start
      {3, {30, 31, 32, 33, 34, 1, 2, 3, 4, 5}, {31, 32, 33, 34, 35, 2, 3, 4, 5, 6}},
      // starts 40 mod 34 = 6 and 45 mod 34 = 11
      {4, {6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, {7, 8, 9, 10, 11, 12, 13, 14, 15, 16}},
      // starts 170 mod 34 = 0 and 175 mod 34 = 5: step 17 repeats step 0
      {17, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::StrCat("step ", c.step));
    for (const auto& [g, step] : {std::pair<const Graph*, Tensor>{&gi, IntStep(c.step)},
                                  {&gf, FloatStep(static_cast<float>(c.step))}}) {
      ASSERT_OK_AND_ASSIGN(TensorMap out, RunStep(*g, step));
      EXPECT_EQ(out.at("x").dtype(), DType::kInt32);
      EXPECT_EQ(out.at("x").shape(), Shape::Parse("b:2,l:5").value());
      EXPECT_EQ(Ints(out.at("x")), c.x);
      EXPECT_EQ(Ints(out.at("y")), c.y);
    }
  }
}

TEST(TextWindowsTest, MatchesTheBenchBatchesOnText) {
  // make_batches in ../shared/peers/transformer_bench.py, step by step: starts = (arange(S*B)*L) % n,
  // window = data[start : start + L + 1], input = window[:L], target = window[1:].
  std::string text;
  for (int i = 0; text.size() < 997; ++i) absl::StrAppend(&text, "line ", i, ": the quick fox\n");
  text.resize(997);
  const int B = 4, L = 24;
  const Graph g = WindowsGraph(WriteTestFile("bench.txt", text), B, L);
  const int n = static_cast<int>(text.size()) - (L + 1);
  for (int s = 0; s < 30; ++s) {
    ASSERT_OK_AND_ASSIGN(TensorMap out, RunStep(g, IntStep(s)));
    for (int r = 0; r < B; ++r) {
      const int start = ((s * B + r) * L) % n;
      for (int j = 0; j < L; ++j) {
        ASSERT_EQ(out.at("x").i32()[r * L + j], static_cast<unsigned char>(text[start + j]))
            << "step " << s << " row " << r << " col " << j;
        ASSERT_EQ(out.at("y").i32()[r * L + j], static_cast<unsigned char>(text[start + j + 1]));
      }
    }
  }
}

TEST(TextWindowsTest, HighBytesAreNonNegative) {
  std::string bytes(16, '\0');
  for (int i = 0; i < 16; ++i) bytes[i] = static_cast<char>(240 + i);
  const Graph g = WindowsGraph(WriteTestFile("high.bin", bytes), 1, 4);
  ASSERT_OK_AND_ASSIGN(TensorMap out, RunStep(g, IntStep(1)));  // start (1*1*4) mod 11 = 4
  EXPECT_EQ(Ints(out.at("x")), (std::vector<int32_t>{244, 245, 246, 247}));
}

TEST(TextWindowsTest, KernelReadsOnlyItsSlice) {
  // Processor slice rows [1, 2) and columns [2, 5) of the [2, 5] tensor of step 3 (starts 30, 1).
  const std::string path = WriteTestFile("slice.bin", Positions(40));
  v1::Op op;
  op.set_name("t");
  op.set_type("text_windows");
  (*op.mutable_attrs())["path"].set_s(path);
  (*op.mutable_attrs())["offset"].set_i(1);
  for (int64_t b : {1, 2}) (*op.mutable_attrs())["_slice_begin"].mutable_ints()->add_values(b);
  for (int64_t s : {2, 5}) (*op.mutable_attrs())["_global_sizes"].mutable_ints()->add_values(s);
  const Tensor step = IntStep(3);
  Tensor out(DType::kInt32, Shape::Parse("b:1,l:3").value());
  ASSERT_OK(ReferenceKernels().Run(op, {&step}, &out));
  EXPECT_EQ(Ints(out), (std::vector<int32_t>{4, 5, 6}));  // 1 + offset 1 + column 2
}

// Interpreter vs simulated mesh with both kernel runners: every tensor bitwise equal, and no
// collective at all.
void ExpectSameOnMesh(const Graph& g, const TensorMap& feeds, const std::string& mesh_text,
                      const std::string& layout) {
  SCOPED_TRACE(absl::StrCat("mesh ", mesh_text, " layout '", layout, "'"));
  ASSERT_OK_AND_ASSIGN(Mesh mesh, Mesh::Parse(mesh_text));
  ASSERT_OK_AND_ASSIGN(LayoutRules rules, LayoutRules::Parse(layout, mesh));
  ASSERT_OK_AND_ASSIGN(v1::Program program, Lower(g, mesh, rules));
  for (const v1::Instruction& inst : program.instructions()) {
    EXPECT_FALSE(inst.has_collective()) << inst.DebugString();
  }
  ASSERT_OK_AND_ASSIGN(TensorMap want, Interpret(g, feeds));
  for (const KernelRunner* kernels : {&ReferenceKernels(), &CpuKernels()}) {
    SimulatedMeshOptions options;
    options.kernels = kernels;
    options.replica_tolerance = 0;
    ASSERT_OK_AND_ASSIGN(TensorMap got, RunOnSimulatedMesh(program, feeds, options));
    for (const auto& [name, expected] : want) {
      ASSERT_TRUE(got.count(name)) << name;
      const Tensor& actual = got.at(name);
      ASSERT_EQ(actual.dtype(), expected.dtype()) << name;
      ASSERT_EQ(actual.shape(), expected.shape()) << name;
      for (int64_t i = 0; i < expected.num_elements(); ++i) {
        if (expected.dtype() == DType::kInt32) {
          ASSERT_EQ(actual.i32()[i], expected.i32()[i]) << name << "[" << i << "]";
        } else {
          ASSERT_EQ(actual.f32()[i], expected.f32()[i]) << name << "[" << i << "]";
        }
      }
    }
  }
}

TEST(TextWindowsTest, SameOnEveryMeshAndLayout) {
  std::string text;
  for (int i = 0; i < 300; ++i) text.push_back(static_cast<char>((i * 37 + 11) % 256));
  const Graph g = WindowsGraph(WriteTestFile("mesh.bin", text), 8, 12);
  const Graph gf = WindowsGraph(WriteTestFile("mesh.bin", text), 8, 12, DType::kFloat32);
  for (int s : {0, 1, 7, 123}) {
    SCOPED_TRACE(absl::StrCat("step ", s));
    for (const auto& [mesh, layout] : std::vector<std::pair<std::string, std::string>>{
             {"p:4", "b:p"},                  // 1-D, batch split
             {"p:2", "l:p"},                  // 1-D, length split
             {"p:4", ""},                     // replicated
             {"rows:2,cols:2", "b:rows,l:cols"},  // 2-D, batch and length split
             {"rows:2,cols:3", "b:rows,l:cols"},
             {"rows:2,cols:2", "b:cols"}}) {
      ExpectSameOnMesh(g, {{"step", IntStep(s)}}, mesh, layout);
      ExpectSameOnMesh(gf, {{"step", FloatStep(static_cast<float>(s))}}, mesh, layout);
    }
  }
}

TEST(TextWindowsTest, StepFromAComputedScalar) {
  // The step is the sum of a split vector (a partial sum before its allreduce): still the same.
  const std::string path = WriteTestFile("computed.bin", Positions(200));
  GraphWriter w;
  w.Placeholder("v", Shape::Parse("k:4").value(), DType::kFloat32);
  w.Op("step", "reduce_sum", {"v"}, {"k"});
  v1::Op& x = w.Op("x", "text_windows", {"step"}, {}, {Attr("path", path.c_str())});
  *x.mutable_shape() = Shape::Parse("b:4,l:6").value().ToProto();
  ASSERT_OK_AND_ASSIGN(Graph g, w.Build());
  const TensorMap feeds = {{"v", Tensor::Float(Shape::Parse("k:4").value(), {1, 2, 3, 4})}};
  ASSERT_OK_AND_ASSIGN(TensorMap want, Interpret(g, feeds));
  // step 10: row r starts at ((40 + r) * 6) mod 193.
  EXPECT_EQ(want.at("x").i32()[0], (40 * 6) % 193);
  testing_util::ExpectMatchesInterpreter(g, feeds, "p:2,q:2", "k:p,b:q", ReferenceKernels());
}

TEST(TextWindowsTest, MissingFileNamesOpAndPath) {
  const std::string path = "/nonexistent-meshrt-dir/corpus.txt";
  const Graph g = WindowsGraph(path, 2, 4);
  EXPECT_TRUE(StatusIs(RunStep(g, IntStep(0)).status(), absl::StatusCode::kNotFound,
                       {path, "text_windows", "'x'"}));
  // On the mesh, the reading processor's error comes back with its code.
  ASSERT_OK_AND_ASSIGN(Mesh mesh, Mesh::Parse("p:2"));
  ASSERT_OK_AND_ASSIGN(LayoutRules rules, LayoutRules::Parse("b:p", mesh));
  ASSERT_OK_AND_ASSIGN(v1::Program program, Lower(g, mesh, rules));
  SimulatedMeshOptions options;
  options.kernels = &CpuKernels();
  EXPECT_TRUE(StatusIs(RunOnSimulatedMesh(program, {{"step", IntStep(0)}}, options).status(),
                       absl::StatusCode::kNotFound, {path}));
}

TEST(TextWindowsTest, UnusableFilesAreRefused) {
  // n = size - (length + 1) must be > 0: 5 bytes cannot hold a window of 4 + 1 with a choice.
  const std::string short_path = WriteTestFile("short.bin", Positions(5));
  EXPECT_TRUE(StatusIs(RunStep(WindowsGraph(short_path, 2, 4), IntStep(0)).status(),
                       absl::StatusCode::kInvalidArgument, {short_path, "text_windows", "5 bytes"}));
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string dir_path = dir != nullptr ? dir : "/tmp";
  EXPECT_TRUE(StatusIs(RunStep(WindowsGraph(dir_path, 2, 4), IntStep(0)).status(),
                       absl::StatusCode::kInvalidArgument, {dir_path, "not a regular file"}));
  // A float step must be a whole number.
  const Graph gf = WindowsGraph(WriteTestFile("frac.bin", Positions(40)), 2, 4, DType::kFloat32);
  EXPECT_TRUE(StatusIs(RunStep(gf, FloatStep(1.5f)).status(), absl::StatusCode::kInvalidArgument,
                       {"whole number"}));
}

TEST(TextWindowsTest, ReplacedFileIsReread) {
  const std::string path = WriteTestFile("replaced.bin", Positions(40));
  const Graph g = WindowsGraph(path, 1, 3);
  ASSERT_OK_AND_ASSIGN(TensorMap before, RunStep(g, IntStep(0)));
  EXPECT_EQ(Ints(before.at("x")), (std::vector<int32_t>{0, 1, 2}));
  const std::string tmp = WriteTestFile("replaced.bin.new", std::string(40, 'A'));
  ASSERT_EQ(std::rename(tmp.c_str(), path.c_str()), 0);  // a new inode at the same path
  ASSERT_OK_AND_ASSIGN(TensorMap after, RunStep(g, IntStep(0)));
  EXPECT_EQ(Ints(after.at("x")), (std::vector<int32_t>{65, 65, 65}));
}

TEST(TextWindowsTest, BadGraphsAreRefusedAtBuild) {
  const std::string path = WriteTestFile("build.bin", Positions(40));
  auto build = [&](const std::string& shape, DType step_dtype, const Shape& step_shape,
                   int offset, const char* p) {
    GraphWriter w;
    w.Placeholder("step", step_shape, step_dtype);
    v1::Op& op =
        w.Op("x", "text_windows", {"step"}, {}, {Attr("path", p), Attr("offset", offset)});
    *op.mutable_shape() = Shape::Parse(shape).value().ToProto();
    return w.Build().status();
  };
  const Shape scalar;
  EXPECT_TRUE(build("b:2,l:4", DType::kInt32, scalar, 0, path.c_str()).ok());
  EXPECT_TRUE(StatusIs(build("b:2,l:4", DType::kInt32, scalar, 2, path.c_str()),
                       absl::StatusCode::kInvalidArgument, {"offset"}));
  EXPECT_TRUE(StatusIs(build("b:2,l:4,c:2", DType::kInt32, scalar, 0, path.c_str()),
                       absl::StatusCode::kInvalidArgument, {"[batch, length]"}));
  EXPECT_TRUE(StatusIs(build("b:2,l:4", DType::kInt32, Shape::Parse("k:1").value(), 0,
                             path.c_str()),
                       absl::StatusCode::kInvalidArgument, {"scalar"}));
  EXPECT_TRUE(StatusIs(build("b:2,l:4", DType::kInt32, scalar, 0, ""),
                       absl::StatusCode::kInvalidArgument, {"path"}));
}

// ---- the random ops' step input -------------------------------------------------------------

// step -> u = random_uniform(step) [a:8, c:6] seed 5, n = random_normal(step) seed 9, and the
// same two without the step (u0, n0).
Graph RandomGraph(DType step_dtype) {
  GraphWriter w;
  w.Placeholder("step", Shape(), step_dtype);
  const Shape shape = Shape::Parse("a:8,c:6").value();
  for (const auto& [name, type, seed, with_step] :
       std::vector<std::tuple<std::string, std::string, int, bool>>{
           {"u", "random_uniform", 5, true},
           {"n", "random_normal", 9, true},
           {"u0", "random_uniform", 5, false},
           {"n0", "random_normal", 9, false}}) {
    std::vector<std::string> inputs;
    if (with_step) inputs.push_back("step");
    v1::Op& op = w.Op(name, type, inputs, {}, {Attr("seed", seed)});
    *op.mutable_shape() = shape.ToProto();
  }
  absl::StatusOr<Graph> g = w.Build();
  EXPECT_TRUE(g.ok()) << g.status();
  return *std::move(g);
}

int SameCount(const Tensor& a, const Tensor& b) {
  int same = 0;
  for (int64_t i = 0; i < a.num_elements(); ++i) same += a.f32()[i] == b.f32()[i];
  return same;
}

TEST(RandomStepTest, PinnedValues) {
  // Independently computed from the documented generator (core/ops/ops_random.h): op 'u', seed 5.
  GraphWriter w;
  w.Placeholder("step", Shape(), DType::kInt32);
  v1::Op& op = w.Op("u", "random_uniform", {"step"}, {}, {Attr("seed", 5)});
  *op.mutable_shape() = Shape::Parse("a:3").value().ToProto();
  ASSERT_OK_AND_ASSIGN(Graph g, w.Build());
  const std::vector<std::pair<int, std::vector<float>>> cases = {
      {0, {0.4480805993080139f, 0.38968944549560547f, 0.3788825273513794f}},
      {3, {0.03455770015716553f, 0.7425863146781921f, 0.6706953048706055f}},
      {-1, {0.2429436445236206f, 0.24947524070739746f, 0.44489794969558716f}},
  };
  for (const auto& [s, want] : cases) {
    ASSERT_OK_AND_ASSIGN(TensorMap out, RunStep(g, IntStep(s)));
    EXPECT_EQ(std::vector<float>(out.at("u").floats().begin(), out.at("u").floats().end()), want)
        << "step " << s;
  }
}

TEST(RandomStepTest, FreshPerStepAndUnchangedWithout) {
  const Graph g = RandomGraph(DType::kInt32);
  ASSERT_OK_AND_ASSIGN(TensorMap s0, RunStep(g, IntStep(0)));
  ASSERT_OK_AND_ASSIGN(TensorMap s1, RunStep(g, IntStep(1)));
  ASSERT_OK_AND_ASSIGN(TensorMap s1again, RunStep(g, IntStep(1)));
  for (const char* name : {"u", "n"}) {
    EXPECT_LT(SameCount(s0.at(name), s1.at(name)), 3) << name;
    EXPECT_EQ(SameCount(s1.at(name), s1again.at(name)), 48) << name;
    // The step-keyed stream is not the step-less one.
    EXPECT_LT(SameCount(s0.at(name), s0.at(absl::StrCat(name, "0"))), 3) << name;
  }
  // Without the input: the same numbers whatever the step, and the documented step-less stream
  // (computed independently from core/ops/ops_random.h for op 'u0', seed 5).
  EXPECT_EQ(SameCount(s0.at("u0"), s1.at("u0")), 48);
  EXPECT_EQ(SameCount(s0.at("n0"), s1.at("n0")), 48);
  EXPECT_EQ(s0.at("u0").f32()[0], 0.6576776504516602f);
  EXPECT_EQ(s0.at("u0").f32()[1], 0.01060110330581665f);
  // A float32 step is its whole number.
  const Graph gf = RandomGraph(DType::kFloat32);
  ASSERT_OK_AND_ASSIGN(TensorMap f1, RunStep(gf, FloatStep(1.0f)));
  EXPECT_EQ(SameCount(f1.at("u"), s1.at("u")), 48);
  EXPECT_EQ(SameCount(f1.at("n"), s1.at("n")), 48);
}

TEST(RandomStepTest, SameOnEveryLayout) {
  const Graph g = RandomGraph(DType::kInt32);
  for (int s : {0, 5}) {
    for (const auto& [mesh, layout] : std::vector<std::pair<std::string, std::string>>{
             {"p:4", "a:p"}, {"p:2", "c:p"}, {"rows:2,cols:2", "a:rows,c:cols"},
             {"rows:2,cols:3", "c:cols"}}) {
      ExpectSameOnMesh(g, {{"step", IntStep(s)}}, mesh, layout);
    }
  }
}

TEST(RandomStepTest, BadStepsAreRefused) {
  GraphWriter w;
  w.Placeholder("step", Shape::Parse("k:2").value(), DType::kInt32);
  v1::Op& op = w.Op("u", "random_uniform", {"step"}, {}, {});
  *op.mutable_shape() = Shape::Parse("a:3").value().ToProto();
  EXPECT_TRUE(
      StatusIs(w.Build().status(), absl::StatusCode::kInvalidArgument, {"'u'", "scalar"}));
  EXPECT_TRUE(StatusIs(RunStep(RandomGraph(DType::kFloat32), FloatStep(0.25f)).status(),
                       absl::StatusCode::kInvalidArgument, {"whole number"}));
}

}  // namespace
}  // namespace meshrt
