// Internal to the `meshrt` CLI: `meshrt sample`, text (or token ids) from a Transformer LM
// checkpoint, decoded on the mesh by one program with a key/value cache
// (models/transformer.h BuildTransformerDecoder).
#ifndef MESHRT_CLIENT_CLI_SAMPLE_H_
#define MESHRT_CLIENT_CLI_SAMPLE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/cli_commands.h"
#include "core/reference/interpreter.h"
#include "models/transformer.h"

namespace meshrt {

// The Transformer LM whose weights `weights` are (models/transformer.h variable names and shapes):
// vocab, length, d_model, heads, d_kv, d_ff, layers and the norm (layer when final_ln/bias is
// there). Data options are left at their defaults (no data path). InvalidArgument naming `what`
// and the missing variable ("not a transformer checkpoint").
absl::StatusOr<models::TransformerOptions> TransformerOptionsFromWeights(const TensorMap& weights,
                                                                         const std::string& what);

// `meshrt sample CK --prompt TEXT ...`.
absl::Status SampleCommand(const std::vector<std::string>& args, CliIo io);

}  // namespace meshrt

#endif  // MESHRT_CLIENT_CLI_SAMPLE_H_
