#include "text/bleu/bleu_command.h"

namespace meshrt {
namespace text {

absl::Status BleuCommand(const std::vector<std::string>& args, std::ostream& out) {
  (void)args;
  (void)out;
  return absl::UnimplementedError("meshrt bleu is not built yet");
}

}  // namespace text
}  // namespace meshrt
