#include "client/graph_io.h"


#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/file_bytes.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"

namespace meshrt {
namespace {

enum class Format { kText, kBinary, kUnknown };

Format FormatOf(absl::string_view path) {
  if (absl::EndsWith(path, ".pbtxt") || absl::EndsWith(path, ".txt")) return Format::kText;
  if (absl::EndsWith(path, ".pb")) return Format::kBinary;
  return Format::kUnknown;
}

absl::Status UnknownExtension(absl::string_view path) {
  return absl::InvalidArgumentError(absl::StrCat(
      path, ": unknown graph file extension; use .pbtxt or .txt (text format) or .pb (binary)"));
}

// Keeps the first error with its position (the parser's later errors are usually consequences of
// the first) and counts the rest.
class FirstErrorCollector : public google::protobuf::io::ErrorCollector {
 public:
  explicit FirstErrorCollector(absl::string_view source) : source_(source) {}

  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (count_++ > 0) return;
    // Lines and columns arrive zero-based; -1 means "no position".
    first_ = line < 0 ? absl::StrCat(source_, ": ", message)
                      : absl::StrCat(source_, ":", line + 1, ":", column + 1, ": ", message);
  }

  absl::Status status() const {
    if (count_ == 0) return absl::OkStatus();
    return absl::InvalidArgumentError(
        count_ == 1 ? first_ : absl::StrCat(first_, " (and ", count_ - 1, " more errors)"));
  }

 private:
  std::string source_;
  std::string first_;
  int count_ = 0;
};

}  // namespace

absl::StatusOr<v1::Graph> ParseGraphText(absl::string_view text, absl::string_view source) {
  google::protobuf::TextFormat::Parser parser;
  FirstErrorCollector errors(source);
  parser.RecordErrorsTo(&errors);
  v1::Graph graph;
  const bool ok = parser.ParseFromString(std::string(text), &graph);
  if (!errors.status().ok()) return errors.status();
  if (!ok) return absl::InvalidArgumentError(absl::StrCat(source, ": not a text-format graph"));
  return graph;
}

absl::StatusOr<v1::Graph> LoadGraph(const std::string& path) {
  const Format format = FormatOf(path);
  if (format == Format::kUnknown) return UnknownExtension(path);
  absl::StatusOr<std::string> bytes = ReadFileBytes(path, "graph file");
  if (!bytes.ok()) return bytes.status();
  if (format == Format::kText) return ParseGraphText(*bytes, path);
  v1::Graph graph;
  if (!graph.ParseFromString(*bytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a binary meshrt.v1.Graph (for text format, name it .pbtxt)"));
  }
  return graph;
}

absl::Status SaveGraph(const v1::Graph& graph, const std::string& path) {
  const Format format = FormatOf(path);
  if (format == Format::kUnknown) return UnknownExtension(path);
  std::string bytes;
  if (format == Format::kText) {
    bytes = "# proto-file: proto/graph.proto\n# proto-message: meshrt.v1.Graph\n\n";
    std::string text;
    if (!google::protobuf::TextFormat::PrintToString(graph, &text)) {
      return absl::InternalError(absl::StrCat("cannot print the graph for ", path));
    }
    bytes += text;
  } else if (!graph.SerializeToString(&bytes)) {
    return absl::InternalError(absl::StrCat("cannot serialise the graph for ", path));
  }
  return WriteFileBytes(path, bytes);
}

}  // namespace meshrt
