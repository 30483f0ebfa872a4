#include "bench/gemm_floor.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/ir/mesh.h"
#include "core/ir/shape.h"
#include "core/lowering/lowering.h"
#include "core/planning/explain.h"
#include "kernels/blas.h"
#include "util/status_macros.h"

namespace meshrt {
namespace bench {
namespace {

// The slice shape every buffer of `program` holds on a processor.
absl::StatusOr<std::map<int, Shape>> BufferShapes(const v1::Program& program) {
  std::map<int, Shape> shapes;
  ASSIGN_OR_RETURN(const Mesh mesh, Mesh::FromProto(program.mesh()));
  for (const v1::ProgramTensor& t : program.inputs()) {
    ASSIGN_OR_RETURN(const Shape global, Shape::FromProto(t.shape(), t.name()));
    shapes[t.buffer()] = SliceShape(global, TensorLayout::FromProto(t.layout()), mesh);
  }
  for (const v1::ProgramVariable& v : program.variables()) {
    ASSIGN_OR_RETURN(shapes[v.buffer()], Shape::FromProto(v.initializer().slice_shape(), v.name()));
  }
  for (const v1::Instruction& i : program.instructions()) {
    ASSIGN_OR_RETURN(shapes[i.output()], Shape::FromProto(i.slice_shape(), i.source_op()));
  }
  return shapes;
}

GemmShape Classify(const Shape& a, const Shape& b, const Shape& out) {
  GemmShape g;
  for (const Dim& d : a.dims()) {
    const bool in_b = b.Contains(d.name), in_out = out.Contains(d.name);
    if (in_b && in_out) g.batch *= d.size;
    if (in_b && !in_out) g.k *= d.size;
    if (!in_b && in_out) g.m *= d.size;
  }
  for (const Dim& d : b.dims()) {
    if (!a.Contains(d.name) && out.Contains(d.name)) g.n *= d.size;
  }
  return g;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

absl::StatusOr<std::map<GemmShape, int64_t>> ProgramGemms(
    const v1::Program& program, const std::vector<std::string>& fetches) {
  ASSIGN_OR_RETURN(const auto shapes, BufferShapes(program));
  const std::vector<bool> runs = StepInstructions(program, &fetches);  // as the executor prunes
  std::map<GemmShape, int64_t> gemms;
  for (int index = 0; index < program.instructions_size(); ++index) {
    const v1::Instruction& i = program.instructions(index);
    if (!runs[index] || i.kind_case() != v1::Instruction::kLocal || i.local().type() != "einsum" ||
        i.inputs_size() != 2) {
      continue;
    }
    std::vector<const Shape*> in;
    for (int b : i.inputs()) {
      auto it = shapes.find(b);
      if (it == shapes.end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "einsum '", i.source_op(), "' reads buffer ", b, ", which nothing gives a shape"));
      }
      in.push_back(&it->second);
    }
    ++gemms[Classify(*in[0], *in[1], shapes.at(i.output()))];
  }
  return gemms;
}

double GemmSeconds(const GemmShape& s, int reps) {
  const kernels::Blas& blas = kernels::GetBlas();
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> a(s.batch * s.m * s.k), b(s.batch * s.k * s.n), c(s.batch * s.m * s.n);
  for (float& x : a) x = dist(rng);
  for (float& x : b) x = dist(rng);
  double best = -1;
  for (int variant = 0; variant < 4; ++variant) {
    const bool ta = variant & 1, tb = variant & 2;
    auto call = [&] {
      for (int64_t p = 0; p < s.batch; ++p) {
        blas.Sgemm(ta, tb, s.m, s.n, s.k, 1.0f, a.data() + p * s.m * s.k, ta ? s.m : s.k,
                   b.data() + p * s.k * s.n, tb ? s.k : s.n, 0.0f, c.data() + p * s.m * s.n, s.n);
      }
    };
    call();  // warm-up: packing buffers, caches
    std::vector<double> times;
    for (int r = 0; r < std::max(1, reps); ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      call();
      times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    const double t = Median(std::move(times));
    if (best < 0 || t < best) best = t;
  }
  return best;
}

absl::StatusOr<GemmFloor> MeasureGemmFloor(const Graph& graph,
                                           const std::vector<std::string>& fetches,
                                           const std::string& mesh_text,
                                           const std::string& layout, int reps) {
  ASSIGN_OR_RETURN(const Mesh mesh, Mesh::Parse(mesh_text));
  ASSIGN_OR_RETURN(const LayoutRules rules, LayoutRules::Parse(layout, mesh));
  ASSIGN_OR_RETURN(const v1::Program program, Lower(graph, mesh, rules));
  ASSIGN_OR_RETURN(const auto gemms, ProgramGemms(program, fetches));
  GemmFloor floor;
  floor.core = kernels::GetBlas().corename();
  for (const auto& [shape, count] : gemms) {
    floor.seconds += count * GemmSeconds(shape, reps);
    floor.flops += count * shape.Flops();
    floor.products += count;
    ++floor.shapes;
  }
  return floor;
}

}  // namespace bench
}  // namespace meshrt
