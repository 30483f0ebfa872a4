// Test helpers for the spatial and random op families (test-only): graphs from text format, seeded
// feeds, and the layout-invariance check — lower for a mesh and layout, run on the simulated mesh,
// compare every tensor with the reference interpreter.
#ifndef MESHRT_CORE_TESTING_SPATIAL_TESTING_H_
#define MESHRT_CORE_TESTING_SPATIAL_TESTING_H_

#include <cstring>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/lowering/lowering.h"
#include "core/ops/graph.h"
#include "core/reference/interpreter.h"
#include "core/testing/test_util.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "runtime/simulated_mesh.h"

namespace meshrt {
namespace testing_spatial {

// The graph in `text` (proto/graph.proto text format); fails the test when it does not build.
inline Graph GraphFromText(const std::string& text) {
  v1::Graph proto;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &proto)) << text;
  absl::StatusOr<Graph> g = Graph::Build(proto);
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *std::move(g) : Graph();
}

// Every placeholder filled from a seeded uniform [-1, 1) (int32: [-5, 5]).
inline TensorMap SeededFeeds(const Graph& g, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  TensorMap feeds;
  for (const std::string& name : g.Placeholders()) {
    Tensor t(g.type(name).dtype, g.type(name).shape);
    for (int64_t i = 0; i < t.num_elements(); ++i) {
      if (t.dtype() == DType::kFloat32) {
        t.f32()[i] = dist(rng);
      } else {
        t.i32()[i] = static_cast<int32_t>(rng() % 11) - 5;
      }
    }
    feeds[name] = std::move(t);
  }
  return feeds;
}

inline bool BitwiseEqual(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const void* pa = a.dtype() == DType::kFloat32 ? static_cast<const void*>(a.f32()) : a.i32();
  const void* pb = b.dtype() == DType::kFloat32 ? static_cast<const void*>(b.f32()) : b.i32();
  return a.num_elements() == 0 || std::memcmp(pa, pb, a.num_elements() * 4) == 0;
}

// Lowers `g` for `mesh` and `layout`, runs it on the simulated mesh with `kernels`, and expects
// every tensor to equal the interpreter's: bitwise when `tolerance` is 0, else within `tolerance`
// (MaxRelativeError). Returns the program (empty on failure) for structure checks.
inline v1::Program ExpectMatchesInterpreter(const Graph& g, const std::string& mesh_text,
                                            const std::string& layout, const KernelRunner& kernels,
                                            double tolerance) {
  SCOPED_TRACE(absl::StrCat("mesh ", mesh_text, " layout '", layout, "'"));
  absl::StatusOr<Mesh> mesh = Mesh::Parse(mesh_text);
  EXPECT_TRUE(mesh.ok()) << mesh.status();
  if (!mesh.ok()) return {};
  absl::StatusOr<LayoutRules> rules = LayoutRules::Parse(layout, *mesh);
  EXPECT_TRUE(rules.ok()) << rules.status();
  if (!rules.ok()) return {};
  absl::StatusOr<v1::Program> program = Lower(g, *mesh, *rules);
  EXPECT_TRUE(program.ok()) << program.status();
  if (!program.ok()) return {};
  const TensorMap feeds = SeededFeeds(g, 11);
  absl::StatusOr<TensorMap> want = Interpret(g, feeds);
  EXPECT_TRUE(want.ok()) << want.status();
  SimulatedMeshOptions options;
  options.kernels = &kernels;
  options.replica_tolerance = 0;
  absl::StatusOr<TensorMap> got = RunOnSimulatedMesh(*program, feeds, options);
  EXPECT_TRUE(got.ok()) << got.status();
  if (!want.ok() || !got.ok()) return {};
  for (const auto& [name, expected] : *want) {
    if (!got->count(name)) {
      ADD_FAILURE() << "missing tensor " << name;
      continue;
    }
    if (tolerance == 0) {
      EXPECT_TRUE(BitwiseEqual(got->at(name), expected)) << "tensor " << name;
    } else {
      EXPECT_LE(MaxRelativeError(got->at(name), expected), tolerance) << "tensor " << name;
    }
  }
  return *std::move(program);
}

// Number of collectives of `kind` in `program` made for graph op `source_op` ("" = any op).
inline int CountCollectives(const v1::Program& program, v1::Collective::Kind kind,
                            const std::string& source_op = "") {
  int n = 0;
  for (const v1::Instruction& inst : program.instructions()) {
    if (inst.has_collective() && inst.collective().kind() == kind &&
        (source_op.empty() || inst.source_op() == source_op)) {
      ++n;
    }
  }
  return n;
}

}  // namespace testing_spatial
}  // namespace meshrt

#endif  // MESHRT_CORE_TESTING_SPATIAL_TESTING_H_
