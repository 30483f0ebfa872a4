#include "runtime/variable_store.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/ir/mesh.h"
#include "core/ir/shape.h"
#include "runtime/communicator.h"
#include "util/status_macros.h"

namespace meshrt {

absl::Status VariableStore::Set(const std::string& name, Tensor slice) {
  for (const v1::ProgramVariable& var : program_.variables()) {
    if (var.name() != name) continue;
    auto mesh = Mesh::FromProto(program_.mesh());
    if (!mesh.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("program mesh: ", mesh.status().message()));
    }
    ASSIGN_OR_RETURN(const Shape global, Shape::FromProto(var.shape(), name));
    const Shape want = SliceShape(global, TensorLayout::FromProto(var.layout()), *mesh);
    auto dtype = DTypeFromProto(var.dtype());
    if (slice.shape() != want || !dtype.ok() || slice.dtype() != *dtype) {
      return absl::InvalidArgumentError(absl::StrCat(
          "variable '", name, "' at processor ", CoordinateString(coordinate_), " takes a ",
          dtype.ok() ? DTypeName(*dtype) : "?", " slice of shape ", want.ToString(), ", not ",
          DTypeName(slice.dtype()), " ", slice.shape().ToString()));
    }
    slices_[name] = std::move(slice);
    return absl::OkStatus();
  }
  return absl::NotFoundError(absl::StrCat("'", name, "' is not a variable of the program"));
}

absl::Status VariableStore::Load(Buffers* buffers, const InitFn& init) {
  const int n = program_.num_buffers();
  for (const v1::ProgramVariable& var : program_.variables()) {
    if (var.buffer() < 0 || var.buffer() >= n || var.update_buffer() < -1 ||
        var.update_buffer() >= n) {
      return absl::InvalidArgumentError(
          absl::StrCat("variable '", var.name(), "' names buffers ", var.buffer(), " and ",
                       var.update_buffer(), " but the program has ", n));
    }
    auto it = slices_.find(var.name());
    if (it != slices_.end()) {
      (*buffers)[var.buffer()] = std::move(it->second);
      slices_.erase(it);
      continue;
    }
    Tensor value;
    absl::Status s = init(var.initializer(), &value);
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat("initializing variable '", var.name(),
                                                 "' at processor ", CoordinateString(coordinate_),
                                                 ": ", s.message()));
    }
    (*buffers)[var.buffer()] = std::move(value);
  }
  return absl::OkStatus();
}

void VariableStore::Store(bool step_succeeded, Buffers* buffers) {
  // Where each variable's next value is; a buffer feeding several variables is copied for all
  // but the last (e.g. assign(b, a) with a unchanged).
  std::map<int, int> uses;
  auto source = [&](const v1::ProgramVariable& var) {
    return step_succeeded && var.update_buffer() >= 0 ? var.update_buffer() : var.buffer();
  };
  for (const v1::ProgramVariable& var : program_.variables()) ++uses[source(var)];
  for (const v1::ProgramVariable& var : program_.variables()) {
    const int b = source(var);
    if (b < 0 || b >= static_cast<int>(buffers->size()) || !(*buffers)[b].has_value()) {
      continue;  // a malformed program failed before loading it; the slice stays where it is
    }
    if (--uses[b] == 0) {
      slices_[var.name()] = std::move(*(*buffers)[b]);
      (*buffers)[b].reset();
      moved_into_[b] = var.name();  // fetches of buffer b read the variable
    } else {
      slices_[var.name()] = *(*buffers)[b];
    }
  }
}

const Tensor* VariableStore::MovedInto(int b) const {
  auto moved = moved_into_.find(b);
  if (moved == moved_into_.end()) return nullptr;
  auto slice = slices_.find(moved->second);
  return slice == slices_.end() ? nullptr : &slice->second;
}

}  // namespace meshrt
