#include "runtime/simulated_mesh.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "core/ir/mesh.h"
#include "core/ir/slicing.h"
#include "runtime/executor.h"
#include "runtime/local_communicator.h"
#include "util/status_macros.h"

namespace meshrt {
namespace {

std::string ProcessorName(const Mesh& mesh, int p) {
  return absl::StrCat("processor ", p, " ", CoordinateString(mesh.Coordinate(p)));
}

// Cuts every whole feed into per-processor slices. InvalidArgument for a missing, unknown or
// mis-shaped feed.
absl::StatusOr<std::vector<std::map<std::string, Tensor>>> SliceFeeds(
    const v1::Program& program, const Mesh& mesh,
    const std::map<std::string, Tensor>& whole_feeds) {
  std::vector<std::map<std::string, Tensor>> feeds(mesh.num_processors());
  std::set<std::string> names;
  for (const v1::ProgramTensor& input : program.inputs()) {
    const std::string what = absl::StrCat("placeholder '", input.name(), "'");
    names.insert(input.name());
    ASSIGN_OR_RETURN(const ProgramTensorInfo info,
                     ParseProgramTensor(input, mesh, program.num_buffers(), what));
    auto it = whole_feeds.find(input.name());
    if (it == whole_feeds.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "missing feed for ", what, " (", DTypeName(info.dtype), " ", info.shape.ToString(), ")"));
    }
    const Tensor& whole = it->second;
    if (whole.dtype() != info.dtype || whole.shape() != info.shape) {
      return absl::InvalidArgumentError(absl::StrCat(
          "feed for ", what, " is ", DTypeName(whole.dtype()), " ", whole.shape().ToString(),
          " but the program expects ", DTypeName(info.dtype), " ", info.shape.ToString()));
    }
    for (int p = 0; p < mesh.num_processors(); ++p) {
      feeds[p][input.name()] = ExtractSlice(whole, info.layout, mesh, mesh.Coordinate(p));
    }
  }
  for (const auto& [name, tensor] : whole_feeds) {
    if (names.count(name) == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("feed '", name, "' is not a placeholder of the program (",
                       names.empty() ? "it has none" : absl::StrJoin(names, ", "), ")"));
    }
  }
  return feeds;
}

// Runs one executor per processor, each on its own thread. The first processor to fail aborts the
// hub so the others return instead of waiting for it; its error is the one returned.
absl::Status RunAll(const Mesh& mesh, LocalCollectiveHub& hub,
                    const std::vector<std::map<std::string, Tensor>>& feeds,
                    std::vector<std::unique_ptr<Executor>>& executors,
                    const std::vector<std::string>& fetches) {
  absl::Mutex mu;
  absl::Status first_error;  // guarded by mu
  std::vector<std::thread> threads;
  for (int p = 0; p < mesh.num_processors(); ++p) {
    threads.emplace_back([&, p] {
      // Like a worker, a step with fetches runs only what they and the variables need.
      absl::Status s =
          fetches.empty() ? executors[p]->Run(feeds[p]) : executors[p]->Run(feeds[p], fetches);
      if (s.ok()) return;
      s = absl::Status(s.code(), absl::StrCat(ProcessorName(mesh, p), ": ", s.message()));
      {
        absl::MutexLock lock(&mu);
        if (first_error.ok()) first_error = s;
      }
      // Processors released by this abort fail with `s` too, but record it after the root cause.
      hub.Abort(s);
    });
  }
  for (std::thread& t : threads) t.join();
  absl::MutexLock lock(&mu);
  return first_error;
}

// Assembles output `info` from every processor's slice, checking that processors holding copies
// of the same slice (those differing only in mesh axes the layout does not use) agree.
absl::StatusOr<Tensor> Assemble(
    const Mesh& mesh, const ProgramTensorInfo& info,
    const std::function<absl::StatusOr<Tensor>(int processor)>& slice_of, double tolerance) {
  Tensor whole(info.dtype, info.shape);
  std::vector<bool> used_axis(mesh.ndims(), false);
  for (int a : info.layout.mesh_axis) {
    if (a != kReplicated) used_axis[a] = true;
  }
  std::map<int, Tensor> owner_slices;  // by the lowest processor holding each distinct slice
  for (int p = 0; p < mesh.num_processors(); ++p) {
    const std::vector<int64_t> coord = mesh.Coordinate(p);
    std::vector<int64_t> owner_coord = coord;
    for (int d = 0; d < mesh.ndims(); ++d) {
      if (!used_axis[d]) owner_coord[d] = 0;
    }
    const int owner = mesh.ProcessorNumber(owner_coord);
    auto slice = slice_of(p);
    if (!slice.ok()) {
      return absl::InternalError(absl::StrCat(
          "output '", info.name, "' at ", ProcessorName(mesh, p), ": ", slice.status().message()));
    }
    if (owner == p) {
      absl::Status s = InsertSlice(*slice, info.layout, mesh, coord, &whole);
      if (!s.ok()) {
        return absl::InternalError(absl::StrCat("output '", info.name, "' at ",
                                                ProcessorName(mesh, p),
                                                " does not fit its layout: ", s.message()));
      }
      owner_slices.emplace(p, *std::move(slice));
      continue;
    }
    const double diff = MaxRelativeError(*slice, owner_slices.at(owner));
    if (!(diff <= tolerance)) {
      return absl::InternalError(absl::StrCat(
          "output '", info.name, "': ", ProcessorName(mesh, owner), " and ", ProcessorName(mesh, p),
          " hold copies of the same slice that differ (max relative "
          "difference ",
          diff, " > ", tolerance, "); the program's lowering is wrong"));
    }
  }
  return whole;
}

}  // namespace

absl::StatusOr<std::map<std::string, Tensor>> RunOnSimulatedMesh(
    const v1::Program& program, const std::map<std::string, Tensor>& whole_feeds,
    const SimulatedMeshOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<SimulatedMesh> mesh, SimulatedMesh::Create(program, options));
  return mesh->Step(whole_feeds);
}

SimulatedMesh::SimulatedMesh(const v1::Program& program, Mesh mesh,
                             const SimulatedMeshOptions& options)
    : program_(program),
      mesh_(std::move(mesh)),
      options_(options),
      hub_(std::make_unique<LocalCollectiveHub>(mesh_,
                                                LocalCollectiveHub::Options{options.timeout})) {
  for (int p = 0; p < mesh_.num_processors(); ++p) {
    executors_.push_back(std::make_unique<Executor>(program_, mesh_.Coordinate(p),
                                                    options.kernels, hub_->communicator(p),
                                                    KernelContext(), options.executor));
  }
}

SimulatedMesh::~SimulatedMesh() = default;

absl::StatusOr<std::unique_ptr<SimulatedMesh>> SimulatedMesh::Create(
    const v1::Program& program, const SimulatedMeshOptions& options) {
  auto mesh = Mesh::FromProto(program.mesh());
  if (!mesh.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("program mesh: ", mesh.status().message()));
  }
  return std::unique_ptr<SimulatedMesh>(new SimulatedMesh(program, *std::move(mesh), options));
}

absl::StatusOr<std::map<std::string, Tensor>> SimulatedMesh::Step(
    const std::map<std::string, Tensor>& whole_feeds, const std::vector<std::string>& fetches) {
  std::vector<ProgramTensorInfo> outputs;
  for (const v1::ProgramTensor& output : program_.outputs()) {
    if (!fetches.empty() &&
        std::find(fetches.begin(), fetches.end(), output.name()) == fetches.end()) {
      continue;
    }
    ASSIGN_OR_RETURN(ProgramTensorInfo info,
                     ParseProgramTensor(output, mesh_, program_.num_buffers(),
                                        absl::StrCat("output '", output.name(), "'")));
    outputs.push_back(std::move(info));
  }
  ASSIGN_OR_RETURN(const auto feeds, SliceFeeds(program_, mesh_, whole_feeds));
  RETURN_IF_ERROR(RunAll(mesh_, *hub_, feeds, executors_, fetches));

  std::map<std::string, Tensor> result;
  for (const ProgramTensorInfo& info : outputs) {
    ASSIGN_OR_RETURN(
        Tensor whole,
        Assemble(
            mesh_, info, [&](int p) { return executors_[p]->OutputSlice(info.name); },
            options_.replica_tolerance));
    result[info.name] = std::move(whole);
  }
  return result;
}

absl::StatusOr<std::map<std::string, Tensor>> SimulatedMesh::Variables() const {
  std::map<std::string, Tensor> result;
  for (const v1::ProgramVariable& var : program_.variables()) {
    v1::ProgramTensor t;
    t.set_name(var.name());
    t.set_buffer(var.buffer());
    *t.mutable_shape() = var.shape();
    t.set_dtype(var.dtype());
    *t.mutable_layout() = var.layout();
    ASSIGN_OR_RETURN(ProgramTensorInfo info,
                     ParseProgramTensor(t, mesh_, program_.num_buffers(),
                                        absl::StrCat("variable '", var.name(), "'")));
    auto slice_of = [&](int p) -> absl::StatusOr<Tensor> {
      const auto& vars = executors_[p]->variables();
      auto it = vars.find(var.name());
      if (it == vars.end()) {
        return absl::FailedPreconditionError("has no slice yet (run a step first)");
      }
      return it->second;
    };
    std::vector<int> partial(var.partial_sum_axes().begin(), var.partial_sum_axes().end());
    std::sort(partial.begin(), partial.end());
    const bool bad_axis = std::any_of(partial.begin(), partial.end(),
                                      [&](int a) { return a < 0 || a >= mesh_.ndims(); });
    if (bad_axis) {
      return absl::InvalidArgumentError(absl::StrCat(
          "variable '", var.name(), "' is partial over a mesh axis not in mesh ",
          mesh_.ToString()));
    }
    if (partial.empty()) {
      ASSIGN_OR_RETURN(Tensor whole, Assemble(mesh_, info, slice_of, options_.replica_tolerance));
      result[var.name()] = std::move(whole);
      continue;
    }
    // A partial sum (proto ProgramVariable): the value is the sum, over the processors differing
    // only along the partial axes, of their slices. Assemble each addend (the processors at one
    // coordinate along those axes), then add them in coordinate order.
    Tensor whole(info.dtype, info.shape);
    const std::vector<int64_t> origin(mesh_.ndims(), 0);
    for (int q : mesh_.GroupMembers(partial, origin)) {
      const std::vector<int64_t> at = mesh_.Coordinate(q);
      auto addend_slice = [&](int p) -> absl::StatusOr<Tensor> {
        std::vector<int64_t> c = mesh_.Coordinate(p);
        for (int a : partial) c[a] = at[a];
        return slice_of(mesh_.ProcessorNumber(c));
      };
      ASSIGN_OR_RETURN(Tensor addend,
                       Assemble(mesh_, info, addend_slice, options_.replica_tolerance));
      AddInto(addend, &whole);
    }
    result[var.name()] = std::move(whole);
  }
  return result;
}

absl::Status SimulatedMesh::SetVariables(const std::map<std::string, Tensor>& whole) {
  for (const auto& [name, value] : whole) {
    const v1::ProgramVariable* var = nullptr;
    for (const v1::ProgramVariable& v : program_.variables()) {
      if (v.name() == name) var = &v;
    }
    if (var == nullptr) {
      return absl::NotFoundError(absl::StrCat("'", name, "' is not a variable of the program"));
    }
    const TensorLayout layout = TensorLayout::FromProto(var->layout());
    for (int p = 0; p < mesh_.num_processors(); ++p) {
      const std::vector<int64_t> c = mesh_.Coordinate(p);
      Tensor slice = ExtractSlice(value, layout, mesh_, c);
      // A partial-sum variable: the value on the processor at 0 along its axes, zeros elsewhere.
      for (int a : var->partial_sum_axes()) {
        if (a >= 0 && a < mesh_.ndims() && c[a] != 0) slice = Tensor(slice.dtype(), slice.shape());
      }
      RETURN_IF_ERROR(executors_[p]->SetVariable(name, std::move(slice)));
    }
  }
  return absl::OkStatus();
}

}  // namespace meshrt
