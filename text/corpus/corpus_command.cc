#include "text/corpus/corpus_command.h"

namespace meshrt {
namespace text {

absl::Status DataCommand(const std::vector<std::string>& args, std::ostream& out) {
  (void)args;
  (void)out;
  return absl::UnimplementedError("meshrt data is not built yet");
}

}  // namespace text
}  // namespace meshrt
