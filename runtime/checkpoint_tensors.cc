#include "runtime/checkpoint_tensors.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/ir/mesh.h"
#include "runtime/checkpoint.h"
#include "runtime/checkpoint_store.h"
#include "util/status_macros.h"

namespace meshrt {
namespace {

// A program on the one-processor mesh "x:1" holding whole, replicated variables: only the parts
// that SaveShards, BuildManifest and LoadSlices read (no instructions).
v1::Program WholeVariablesProgram() {
  v1::Program program;
  v1::Dim* dim = program.mutable_mesh()->add_dims();
  dim->set_name("x");
  dim->set_size(1);
  return program;
}

void AddWholeVariable(const std::string& name, const v1::Shape& shape, v1::DType dtype,
                      v1::Program* program) {
  v1::ProgramVariable* v = program->add_variables();
  v->set_name(name);
  *v->mutable_shape() = shape;
  v->set_dtype(dtype);
  for (int d = 0; d < shape.dims_size(); ++d) v->mutable_layout()->add_mesh_axis(kReplicated);
}

}  // namespace

absl::StatusOr<CheckpointTensors> ReadCheckpointTensors(const std::string& directory) {
  ASSIGN_OR_RETURN(const CommittedCheckpoint committed, ReadCommittedCheckpoint(directory));
  v1::Program program = WholeVariablesProgram();
  for (const v1::CheckpointVariable& v : committed.manifest.variables()) {
    AddWholeVariable(v.name(), v.shape(), v.dtype(), &program);
  }
  CheckpointTensors out;
  out.step = committed.manifest.step();
  ASSIGN_OR_RETURN(out.tensors,
                   LoadSlices(committed.manifest, committed.directory, program, {0}));
  return out;
}

absl::Status WriteCheckpointFromTensors(const std::string& directory,
                                        const std::map<std::string, Tensor>& tensors,
                                        int64_t step, int keep) {
  if (step < 0 || keep < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "writing checkpoint ", directory, ": the step (", step, ") must be >= 0 and keep (", keep,
        ") >= 1"));
  }
  v1::Program program = WholeVariablesProgram();
  for (const auto& [name, tensor] : tensors) {
    if (name.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("writing checkpoint ", directory, ": a variable has an empty name"));
    }
    AddWholeVariable(name, tensor.shape().ToProto(), DTypeToProto(tensor.dtype()), &program);
  }
  return SaveOneProcessorCheckpoint(directory, program, tensors, step, keep);
}

absl::Status SaveOneProcessorCheckpoint(const std::string& directory, const v1::Program& program,
                                        const std::map<std::string, Tensor>& variables,
                                        int64_t step, int keep) {
  ASSIGN_OR_RETURN(CheckpointWriter writer, CheckpointWriter::Begin(directory, step, keep));
  absl::StatusOr<std::vector<v1::CheckpointShard>> shards =
      SaveShards(program, {0}, variables, writer.version_dir());
  absl::StatusOr<v1::CheckpointManifest> manifest =
      shards.ok() ? BuildManifest(program, step, *std::move(shards)) : shards.status();
  absl::Status s = manifest.ok() ? writer.Commit(*manifest) : manifest.status();
  if (!s.ok()) writer.Abandon();
  return s;
}

}  // namespace meshrt
