// Microbatch accumulators reduced once per K (core/lowering/lower_accumulate.cc): in data parallelism the
// "<var>/acc" variables are partial sums on the workers and the accumulated gradient's allreduce
// is guarded by train/apply, so it runs once per cycle; the collectives a step runs (counted on
// the communicator), equality with the reference interpreter on several meshes (fetched values
// included), and checkpoints saved mid-cycle that restore onto other meshes and layouts.
#include <algorithm>
#include <atomic>
#include <memory>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/ir/slicing.h"
#include "core/lowering/lowering.h"
#include "core/planning/explain.h"
#include "core/reference/interpreter.h"
#include "core/testing/test_util.h"
#include "core/train/optimizers.h"
#include "gtest/gtest.h"
#include "kernels/cpu_kernels.h"
#include "models/mlp.h"
#include "models/train.h"
#include "models/transformer.h"
#include "runtime/checkpoint.h"
#include "runtime/executor.h"
#include "runtime/local_communicator.h"
#include "runtime/simulated_mesh.h"
#include "util/status_macros.h"

namespace meshrt {
namespace {

constexpr int kK = 4;

models::TrainGraph MlpTrainGraph(TrainOptions train) {
  models::MlpOptions m;
  m.batch = 16;
  m.d_model = 8;
  m.d_ff = 16;
  m.biases = true;
  absl::StatusOr<models::TrainGraph> t = models::BuildMlpTrainGraph(m, train);
  EXPECT_TRUE(t.ok()) << t.status();
  return *std::move(t);
}

TrainOptions Sgd(int microbatches) {
  TrainOptions o;
  o.optimizer = "sgd";
  o.learning_rate.base = 0.1f;
  o.microbatches = microbatches;
  return o;
}

v1::Program LowerOrDie(const Graph& g, const std::string& mesh, const std::string& layout) {
  Mesh m = Mesh::Parse(mesh).value();
  absl::StatusOr<v1::Program> p = Lower(g, m, LayoutRules::Parse(layout, m).value());
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : v1::Program();
}

int OutputBuffer(const v1::Program& p, const std::string& name) {
  for (const v1::ProgramTensor& t : p.outputs()) {
    if (t.name() == name) return t.buffer();
  }
  ADD_FAILURE() << "no output " << name;
  return -1;
}

int64_t SliceElements(const v1::Instruction& inst) {
  return Shape::FromProto(inst.slice_shape()).value().num_elements();
}

// Wraps a communicator and counts its allreduce calls and the elements they reduce.
class CountingCommunicator : public Communicator {
 public:
  explicit CountingCommunicator(Communicator* inner) : inner_(inner) {}
  const Mesh& mesh() const override { return inner_->mesh(); }
  const std::vector<int64_t>& coordinate() const override { return inner_->coordinate(); }
  absl::Status AllReduce(const std::vector<int>& axes, v1::ReduceOp op, DType dtype, void* data,
                         int64_t count) override {
    ++allreduces;
    reduced += count;
    return inner_->AllReduce(axes, op, dtype, data, count);
  }
  absl::Status AllGather(const std::vector<int>& axes, const void* in, int64_t bytes,
                         void* out) override {
    ++others;
    return inner_->AllGather(axes, in, bytes, out);
  }
  absl::Status AllToAll(const std::vector<int>& axes, const void* in, void* out,
                        int64_t bytes_per_rank) override {
    ++others;
    return inner_->AllToAll(axes, in, out, bytes_per_rank);
  }
  absl::Status ReduceScatter(const std::vector<int>& axes, v1::ReduceOp op, DType dtype,
                             const void* in, int64_t count_per_rank, void* out) override {
    ++others;
    return inner_->ReduceScatter(axes, op, dtype, in, count_per_rank, out);
  }
  absl::Status Broadcast(const std::vector<int>& axes, int root, void* data,
                         int64_t bytes) override {
    ++others;
    return inner_->Broadcast(axes, root, data, bytes);
  }
  absl::Status Permute(int axis, int shift, bool wrap, const void* in, void* out,
                       int64_t bytes) override {
    ++others;
    return inner_->Permute(axis, shift, wrap, in, out, bytes);
  }
  absl::Status Barrier(const std::vector<int>& axes) override { return inner_->Barrier(axes); }

  std::atomic<int64_t> allreduces{0}, reduced{0}, others{0};

 private:
  Communicator* inner_;
};

// One executor per processor of the program's mesh, as workers hold them, with counting
// communicators; steps fed nothing (the MLP draws its data on the processors).
class Processors {
 public:
  explicit Processors(const v1::Program& program)
      : program_(program), mesh_(Mesh::FromProto(program.mesh()).value()), hub_(mesh_) {
    for (int r = 0; r < mesh_.num_processors(); ++r) {
      comms_.push_back(std::make_unique<CountingCommunicator>(hub_.communicator(r)));
      executors_.push_back(std::make_unique<Executor>(program_, mesh_.Coordinate(r),
                                                      &CpuKernels(), comms_.back().get()));
    }
  }

  // Runs one step on every processor; the whole tensors of `fetches`.
  absl::StatusOr<TensorMap> Step(const std::vector<std::string>& fetches) {
    std::vector<absl::Status> status(mesh_.num_processors());
    std::vector<std::thread> threads;
    for (int r = 0; r < mesh_.num_processors(); ++r) {
      threads.emplace_back([&, r] { status[r] = executors_[r]->Run({}, fetches); });
    }
    for (std::thread& t : threads) t.join();
    for (const absl::Status& s : status) RETURN_IF_ERROR(s);
    TensorMap out;
    for (const v1::ProgramTensor& t : program_.outputs()) {
      if (std::find(fetches.begin(), fetches.end(), t.name()) == fetches.end()) continue;
      Tensor whole(DTypeFromProto(t.dtype()).value(), Shape::FromProto(t.shape()).value());
      for (int r = 0; r < mesh_.num_processors(); ++r) {
        ASSIGN_OR_RETURN(Tensor slice, executors_[r]->OutputSlice(t.name()));
        RETURN_IF_ERROR(InsertSlice(slice, TensorLayout::FromProto(t.layout()), mesh_,
                                    mesh_.Coordinate(r), &whole));
      }
      out[t.name()] = std::move(whole);
    }
    return out;
  }

  // Allreduce calls / elements / other collectives of processor 0 since the last call.
  struct Counts {
    int64_t allreduces = 0, reduced = 0, others = 0;
  };
  Counts TakeCounts() {
    CountingCommunicator& c = *comms_[0];
    return {c.allreduces.exchange(0), c.reduced.exchange(0), c.others.exchange(0)};
  }

  const Mesh& mesh() const { return mesh_; }
  Executor& executor(int r) { return *executors_[r]; }

 private:
  const v1::Program& program_;
  const Mesh mesh_;
  LocalCollectiveHub hub_;
  std::vector<std::unique_ptr<CountingCommunicator>> comms_;
  std::vector<std::unique_ptr<Executor>> executors_;
};

// The guarded instructions of `p`, by position.
std::vector<int> Guarded(const v1::Program& p) {
  std::vector<int> out;
  for (int i = 0; i < p.instructions_size(); ++i) {
    if (p.instructions(i).has_predicate()) out.push_back(i);
  }
  return out;
}

TEST(MicrobatchAccumulateTest, DataParallelGradientsAreAllreducedOncePerCycle) {
  const models::TrainGraph t = MlpTrainGraph(Sgd(kK));
  const v1::Program p = LowerOrDie(t.graph, "b:4", "batch:b");
  // Every trainable variable's accumulator is a partial sum over b; nothing else is.
  for (const v1::ProgramVariable& v : p.variables()) {
    const bool acc = absl::EndsWith(v.name(), "/acc");
    EXPECT_EQ(std::vector<int>(v.partial_sum_axes().begin(), v.partial_sum_axes().end()),
              acc ? std::vector<int>{0} : std::vector<int>{})
        << v.name();
  }
  // One guarded allreduce over b per trainable variable (w1, b1, w2, b2), all guarded by
  // train/apply, reducing the whole gradient: 8*16 + 16 + 16*8 + 8 = 280 elements.
  const int apply = OutputBuffer(p, "train/apply");
  const std::vector<int> guarded = Guarded(p);
  ASSERT_EQ(guarded.size(), t.trainable.size());
  int64_t guarded_elements = 0;
  for (int i : guarded) {
    const v1::Instruction& inst = p.instructions(i);
    EXPECT_EQ(inst.predicate(), apply);
    ASSERT_TRUE(inst.has_collective()) << inst.source_op();
    EXPECT_EQ(inst.collective().kind(), v1::Collective::ALLREDUCE) << inst.source_op();
    EXPECT_EQ(std::vector<int>(inst.collective().mesh_axes().begin(),
                               inst.collective().mesh_axes().end()),
              std::vector<int>{0});
    guarded_elements += SliceElements(inst);
  }
  EXPECT_EQ(guarded_elements, 280);
  // explain marks them and subtotals them (in the step total: an applying step sends them).
  const std::string explained = ExplainProgram(p);
  EXPECT_TRUE(absl::StrContains(explained, "(when 'train/apply' is nonzero)")) << explained;
  EXPECT_TRUE(absl::StrContains(explained, absl::StrCat("of which guarded: 4 step(s), ",
                                                        2 * 3 * 280, " bytes")))
      << explained;

  // What a step fetching the loss reduces besides the gradients: the loss itself.
  const std::vector<std::string> fetches = {t.loss};
  int64_t unguarded_elements = 0;
  const std::vector<bool> runs = StepInstructions(p, &fetches);
  for (int i = 0; i < p.instructions_size(); ++i) {
    const v1::Instruction& inst = p.instructions(i);
    if (!runs[i] || inst.has_predicate() || !inst.has_collective()) continue;
    ASSERT_EQ(inst.collective().kind(), v1::Collective::ALLREDUCE) << inst.source_op();
    unguarded_elements += SliceElements(inst);
  }
  EXPECT_EQ(unguarded_elements, 1);

  // Accumulating steps reduce the loss only (one allreduce call); the applying step the loss
  // and the 280 gradient elements, fused into one call (all are small: runtime/executor.h).
  Processors procs(p);
  for (int step = 0; step < 2 * kK; ++step) {
    SCOPED_TRACE(absl::StrCat("step ", step));
    ASSERT_OK(procs.Step(fetches).status());
    const Processors::Counts c = procs.TakeCounts();
    const bool applies = step % kK == kK - 1;
    EXPECT_EQ(c.reduced, applies ? unguarded_elements + guarded_elements : unguarded_elements);
    EXPECT_EQ(c.allreduces, 1);
    EXPECT_EQ(c.others, 0);
  }

  // Without microbatches every step reduces the gradients: what each microbatch cost before.
  const models::TrainGraph t1 = MlpTrainGraph(Sgd(1));
  const v1::Program p1 = LowerOrDie(t1.graph, "b:4", "batch:b");
  EXPECT_TRUE(Guarded(p1).empty());
  Processors procs1(p1);
  ASSERT_OK(procs1.Step({t1.loss}).status());
  EXPECT_EQ(procs1.TakeCounts().reduced, unguarded_elements + guarded_elements);
}

// A step that fetches a tensor computed from the accumulated gradient (the global norm) runs the
// guarded allreduces, so the fetched value is the interpreter's on every step.
TEST(MicrobatchAccumulateTest, FetchingTheGlobalNormRunsTheResolveAndIsExact) {
  TrainOptions o = Sgd(kK);
  o.clip_global_norm = 0.5f;
  const models::TrainGraph t = MlpTrainGraph(o);
  const v1::Program p = LowerOrDie(t.graph, "b:4", "batch:b");
  int64_t guarded_elements = 0;
  for (int i : Guarded(p)) guarded_elements += SliceElements(p.instructions(i));
  ASSERT_GT(guarded_elements, 0);
  Processors procs(p);
  TensorMap state;
  const std::vector<std::string> fetches = {t.loss, t.global_norm};
  for (int step = 0; step < 2 * kK; ++step) {
    SCOPED_TRACE(absl::StrCat("step ", step));
    ASSERT_OK_AND_ASSIGN(TensorMap want, InterpretStep(t.graph, {}, fetches, &state));
    ASSERT_OK_AND_ASSIGN(TensorMap got, procs.Step(fetches));
    for (const std::string& f : fetches) {
      EXPECT_LE(MaxRelativeError(got.at(f), want.at(f)), 1e-5) << f;
    }
    EXPECT_GT(want.at(t.global_norm).f32()[0], 0.0f);
    EXPECT_GE(procs.TakeCounts().reduced, guarded_elements);  // every step: the norm is fetched
  }
}

// Losses and every variable (the partial accumulators summed) equal the interpreter's over two
// cycles, with Adam and clipping, on meshes where the accumulators are partial (dp, dp x mp) and
// where they are not (mp: the gradients need no allreduce, nothing is guarded).
TEST(MicrobatchAccumulateTest, TrainingEqualsTheInterpreterOnSeveralMeshes) {
  TrainOptions o;
  o.optimizer = "adam";
  o.learning_rate.base = 0.02f;
  o.clip_global_norm = 0.5f;
  o.microbatches = kK;
  const models::TrainGraph t = MlpTrainGraph(o);
  struct Case {
    std::string mesh, layout;
    size_t guarded;  // allreduces guarded by train/apply
  };
  for (const Case& c : std::vector<Case>{{"b:4", "batch:b", 4},
                                         {"rows:2,cols:2", "batch:rows,d_ff:cols", 4},
                                         {"m:4", "d_ff:m", 0}}) {
    SCOPED_TRACE(c.mesh + " " + c.layout);
    const v1::Program p = LowerOrDie(t.graph, c.mesh, c.layout);
    EXPECT_EQ(Guarded(p).size(), c.guarded);
    ASSERT_OK_AND_ASSIGN(auto sim, SimulatedMesh::Create(p, {&CpuKernels()}));
    TensorMap state;
    for (int step = 0; step < 2 * kK; ++step) {
      SCOPED_TRACE(absl::StrCat("step ", step));
      ASSERT_OK_AND_ASSIGN(TensorMap want, InterpretStep(t.graph, {}, {t.loss}, &state));
      ASSERT_OK_AND_ASSIGN(TensorMap got, sim->Step({}, {t.loss}));
      EXPECT_LE(MaxRelativeError(got.at(t.loss), want.at(t.loss)), 1e-5);
      ASSERT_OK_AND_ASSIGN(TensorMap vars, sim->Variables());
      ASSERT_EQ(vars.size(), state.size());
      for (const auto& [name, value] : state) {
        EXPECT_LE(MaxRelativeError(vars.at(name), value), 1e-5) << name;
      }
      if (step % kK != kK - 1) {  // mid-cycle the accumulators hold the cycle's gradients
        EXPECT_GT(MaxRelativeError(state.at("w1/acc"), Tensor(DType::kFloat32,
                                                               state.at("w1").shape())),
                  1e-3);
      }
    }
  }
}

// The Transformer in dp x mp: every weight's gradient sums over the batch split over rows, so
// every accumulator is partial over rows and its allreduce guarded; two cycles equal the
// interpreter.
TEST(MicrobatchAccumulateTest, TransformerInDataAndModelParallelism) {
  models::TransformerOptions m;
  m.batch = 4;
  m.length = 8;
  m.d_model = 16;
  m.heads = 2;
  m.d_kv = 8;
  m.d_ff = 32;
  m.layers = 2;
  m.seed = 5;
  TrainOptions o;
  o.optimizer = "adam";
  o.learning_rate.base = 0.01f;
  o.microbatches = 2;
  ASSERT_OK_AND_ASSIGN(models::TrainGraph t, models::BuildTransformerTrainGraph(m, o));
  const v1::Program p =
      LowerOrDie(t.graph, "rows:2,cols:2", "batch:rows,heads:cols,d_ff:cols,vocab:cols");
  EXPECT_EQ(Guarded(p).size(), t.trainable.size());
  for (const v1::ProgramVariable& v : p.variables()) {
    if (!absl::EndsWith(v.name(), "/acc")) continue;
    EXPECT_EQ(std::vector<int>(v.partial_sum_axes().begin(), v.partial_sum_axes().end()),
              std::vector<int>{0})
        << v.name();
  }
  ASSERT_OK_AND_ASSIGN(auto sim, SimulatedMesh::Create(p, {&CpuKernels()}));
  TensorMap state;
  for (int step = 0; step < 4; ++step) {
    SCOPED_TRACE(absl::StrCat("step ", step));
    ASSERT_OK_AND_ASSIGN(TensorMap want, InterpretStep(t.graph, {}, {t.loss}, &state));
    ASSERT_OK_AND_ASSIGN(TensorMap got, sim->Step({}, {t.loss}));
    EXPECT_LE(MaxRelativeError(got.at(t.loss), want.at(t.loss)), 1e-5);
  }
  ASSERT_OK_AND_ASSIGN(TensorMap vars, sim->Variables());
  for (const auto& [name, value] : state) {
    EXPECT_LE(MaxRelativeError(vars.at(name), value), 1e-4) << name;
  }
}

// Saves every processor's variables as the workers do (SaveShards, then the coordinator's
// BuildManifest), into `dir`; returns the manifest as read back.
absl::StatusOr<v1::CheckpointManifest> Save(const v1::Program& p, Processors& procs, int64_t step,
                                            const std::string& dir) {
  std::vector<v1::CheckpointShard> shards;
  for (int r = 0; r < procs.mesh().num_processors(); ++r) {
    ASSIGN_OR_RETURN(std::vector<v1::CheckpointShard> mine,
                     SaveShards(p, procs.mesh().Coordinate(r), procs.executor(r).variables(), dir));
    shards.insert(shards.end(), mine.begin(), mine.end());
  }
  ASSIGN_OR_RETURN(v1::CheckpointManifest m, BuildManifest(p, step, std::move(shards)));
  RETURN_IF_ERROR(WriteManifest(dir, m));
  return ReadManifest(dir);
}

// Restores `m` from `dir` into every processor (LoadSlices, then SetVariable).
absl::Status Restore(const v1::CheckpointManifest& m, const std::string& dir, const v1::Program& p,
                     Processors& procs) {
  for (int r = 0; r < procs.mesh().num_processors(); ++r) {
    ASSIGN_OR_RETURN(auto slices, LoadSlices(m, dir, p, procs.mesh().Coordinate(r)));
    for (auto& [name, slice] : slices) {
      RETURN_IF_ERROR(procs.executor(r).SetVariable(name, std::move(slice)));
    }
  }
  return absl::OkStatus();
}

// Training saved mid-cycle (micro_step 2 of 4) and restored onto another mesh and layout —
// accumulators partial on either side or neither — continues as the interpreter's run without
// the save: the same losses, then the same variables (the accumulators fetched through their
// on-fetch resolve); restored on the mesh it was saved on, bitwise as the run that was not saved.
TEST(MicrobatchAccumulateTest, ACheckpointSavedMidCycleRestoresOnAnotherMesh) {
  const models::TrainGraph t = MlpTrainGraph(Sgd(kK));
  constexpr int kBefore = 6, kAfter = 6;
  std::vector<Tensor> want_losses;
  TensorMap state;
  for (int step = 0; step < kBefore + kAfter; ++step) {
    ASSERT_OK_AND_ASSIGN(TensorMap out, InterpretStep(t.graph, {}, {t.loss}, &state));
    want_losses.push_back(out.at(t.loss));
  }
  struct Case {
    std::string from_mesh, from_layout, to_mesh, to_layout;
  };
  for (const Case& c : std::vector<Case>{{"b:4", "batch:b", "b:4", "batch:b"},
                                         {"b:4", "batch:b", "rows:2,cols:2", "batch:rows,d_ff:cols"},
                                         {"b:4", "batch:b", "m:2", "d_ff:m"},
                                         {"b:4", "batch:b", "b:2", "batch:b"},
                                         {"m:2", "d_ff:m", "b:4", "batch:b"}}) {
    SCOPED_TRACE(absl::StrCat(c.from_mesh, " ", c.from_layout, " -> ", c.to_mesh, " ",
                              c.to_layout));
    const v1::Program from = LowerOrDie(t.graph, c.from_mesh, c.from_layout);
    const v1::Program to = LowerOrDie(t.graph, c.to_mesh, c.to_layout);
    Processors before(from);
    for (int step = 0; step < kBefore; ++step) {
      ASSERT_OK_AND_ASSIGN(TensorMap out, before.Step({t.loss}));
      EXPECT_LE(MaxRelativeError(out.at(t.loss), want_losses[step]), 1e-5) << "step " << step;
    }
    const std::string dir = MakeTestTempDir("micro_ckpt");
    ASSERT_OK_AND_ASSIGN(v1::CheckpointManifest m, Save(from, before, kBefore, dir));
    // Partial accumulators are saved as one addend per processor along b (format 3).
    const bool partial = absl::StartsWith(c.from_mesh, "b:");
    EXPECT_EQ(m.format_version(), partial ? 3 : 2);
    for (const v1::CheckpointVariable& v : m.variables()) {
      EXPECT_EQ(v.addends(), partial && absl::EndsWith(v.name(), "/acc") ? 4 : 0) << v.name();
    }
    Processors after(to);
    ASSERT_OK(Restore(m, dir, to, after));
    for (int step = kBefore; step < kBefore + kAfter; ++step) {
      ASSERT_OK_AND_ASSIGN(TensorMap out, after.Step({t.loss}));
      EXPECT_LE(MaxRelativeError(out.at(t.loss), want_losses[step]), 1e-5) << "step " << step;
      if (c.from_mesh == c.to_mesh) {
        // Restored where it was saved, every processor has its own slices back: the run goes on
        // bitwise as the one that was not saved.
        ASSERT_OK_AND_ASSIGN(TensorMap same, before.Step({t.loss}));
        EXPECT_EQ(MaxRelativeError(out.at(t.loss), same.at(t.loss)), 0) << "step " << step;
      }
    }
    // The variables at the start of one more step: the interpreter's after all the steps.
    std::vector<std::string> names;
    for (const auto& [name, value] : state) names.push_back(name);
    ASSERT_OK_AND_ASSIGN(TensorMap vars, after.Step(names));
    for (const auto& [name, value] : state) {
      EXPECT_LE(MaxRelativeError(vars.at(name), value), 1e-5) << name;
    }
  }
}

}  // namespace
}  // namespace meshrt
