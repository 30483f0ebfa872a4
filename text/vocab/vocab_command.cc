#include "text/vocab/vocab_command.h"

namespace meshrt {
namespace text {

absl::Status VocabCommand(const std::vector<std::string>& args, std::ostream& out) {
  (void)args;
  (void)out;
  return absl::UnimplementedError("meshrt vocab is not built yet");
}

}  // namespace text
}  // namespace meshrt
