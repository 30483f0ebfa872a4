// VariableStore: one processor's slices of a program's variables (proto ProgramVariable,
// core/ops/ops_state.h), kept between the executor's steps. A step loads every slice into the
// variable's buffer (initialising a missing one by running its initializer), runs, and stores the
// next values back: the updates after a successful step, the values it loaded after a failed one.
// A slice stored by moving a buffer's tensor is remembered as that buffer's value (MovedInto), so
// a fetch of the buffer after the step still reads it.
//
// Ownership: `program` is borrowed and must outlive the store. Buffers are the executor's, passed
// to each call.
// Thread-safety: thread-compatible (the executor's step thread).
#ifndef MESHRT_RUNTIME_VARIABLE_STORE_H_
#define MESHRT_RUNTIME_VARIABLE_STORE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/ir/tensor.h"
#include "proto/program.pb.h"

namespace meshrt {

class VariableStore {
 public:
  using Buffers = std::vector<std::optional<Tensor>>;
  // Runs a variable's initializer instruction into `*out` (the executor's RunInstruction).
  using InitFn = std::function<absl::Status(const v1::Instruction& initializer, Tensor* out)>;

  VariableStore(const v1::Program& program, std::vector<int64_t> coordinate)
      : program_(program), coordinate_(std::move(coordinate)) {}

  // The slices, by variable name. A variable without one is initialised by the next Load.
  const std::map<std::string, Tensor>& slices() const { return slices_; }
  // Replaces variable `name`'s slice (e.g. from a checkpoint). NotFound for a name that is not a
  // program variable; InvalidArgument (naming the variable, the processor and both dtypes and
  // shapes) for a slice of another dtype or shape than the variable's layout gives this processor.
  absl::Status Set(const std::string& name, Tensor slice);
  // Forgets every slice.
  void Reset() { slices_.clear(); }

  // Starts a step: forgets which buffers the last one moved into slices.
  void BeginStep() { moved_into_.clear(); }
  // Moves each variable's slice into its buffer of `buffers` (one per program buffer), running
  // `init` for a variable without one. InvalidArgument naming a variable whose buffers are out of
  // range; an initializer's error with the variable and processor named. Variables before the
  // failing one stay loaded (StoreVariables puts them back).
  absl::Status Load(Buffers* buffers, const InitFn& init);
  // Moves the next values back from `buffers`: each variable's update buffer after a successful
  // step (`step_succeeded`), else its own buffer (the value loaded). A buffer feeding several
  // variables is copied for all but the last. An unwritten buffer leaves the slice as it is.
  void Store(bool step_succeeded, Buffers* buffers);
  // The slice that buffer `b`'s value moved into at the end of this step, or null.
  const Tensor* MovedInto(int b) const;

 private:
  const v1::Program& program_;
  const std::vector<int64_t> coordinate_;
  std::map<std::string, Tensor> slices_;
  std::map<int, std::string> moved_into_;  // buffer -> variable its value moved into
};

}  // namespace meshrt

#endif  // MESHRT_RUNTIME_VARIABLE_STORE_H_
