// Loading and saving mesh graphs (proto/graph.proto) as files, for the `meshrt` CLI and tools.
//
// The format follows the extension: `.pbtxt` or `.txt` is protobuf text format (what people write
// by hand, see examples/graphs/), `.pb` is the binary wire format. These functions only parse and
// print; Graph::Build (core/ops/graph.h) validates what they return. Thread-safe.
#ifndef MESHRT_CLIENT_GRAPH_IO_H_
#define MESHRT_CLIENT_GRAPH_IO_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/graph.pb.h"

namespace meshrt {

// Parses protobuf text format. A syntax error, an unknown field or a bad value is InvalidArgument
// "SOURCE:LINE:COL: message" (1-based, the first error; later ones are counted), so editors can
// jump to it.
absl::StatusOr<v1::Graph> ParseGraphText(absl::string_view text, absl::string_view source);

// Reads `path` in the format its extension names. Errors: NotFound naming the path when it does
// not exist (other I/O errors keep their errno-derived code); InvalidArgument for an unknown
// extension, a text-format error (see ParseGraphText) or bytes that are not a binary v1.Graph.
absl::StatusOr<v1::Graph> LoadGraph(const std::string& path);

// Writes `graph` to `path` (replacing it) in the format its extension names. Errors:
// InvalidArgument for an unknown extension; I/O errors naming the path.
absl::Status SaveGraph(const v1::Graph& graph, const std::string& path);

}  // namespace meshrt

#endif  // MESHRT_CLIENT_GRAPH_IO_H_
