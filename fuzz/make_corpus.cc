// Writes the fuzzer's seed corpus: one v1::CreateSessionRequest per (graph, mesh, layout), each in
// both encodings the fuzz target reads (fuzz/graph_fuzzer.cc: 't' + text format, 'b' + binary),
// and a libFuzzer dictionary for the text format.
//
//   make_corpus EXAMPLES_DIR OUT_DIR DICT_FILE
//
// Graphs: every EXAMPLES_DIR/*.pbtxt with each "MESH LAYOUT" line of its .layouts file (`-` is the
// empty layout), and small configurations of the models (MLP training graphs with three
// optimizers, the Transformer's with Adam, its sampler) under their documented layouts. Seeds that
// do not lower are reported and skipped: a seed should reach as deep as possible.
// The dictionary: every registered op type and every attribute name the seeds use, quoted as in
// the text format, and the text format's field names.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/ir/mesh.h"
#include "core/lowering/lowering.h"
#include "core/ops/builder.h"
#include "core/ops/graph.h"
#include "core/ops/ops.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/text_format.h"
#include "models/train.h"
#include "models/transformer.h"
#include "proto/session.pb.h"
#include "util/status_macros.h"

namespace meshrt {
namespace {

namespace fs = std::filesystem;

struct Layout {
  std::string mesh;
  std::string rules;  // "" = everything replicated
};

// The request, or the reason it does not lower.
absl::StatusOr<v1::CreateSessionRequest> MakeRequest(const v1::Graph& graph, const Layout& l) {
  ASSIGN_OR_RETURN(Graph built, Graph::Build(graph));
  ASSIGN_OR_RETURN(Mesh mesh, Mesh::Parse(l.mesh));
  ASSIGN_OR_RETURN(LayoutRules rules, LayoutRules::Parse(l.rules, mesh));
  RETURN_IF_ERROR(Lower(built, mesh, rules).status());
  v1::CreateSessionRequest request;
  *request.mutable_graph() = graph;
  *request.mutable_mesh() = mesh.ToProto();
  *request.mutable_rules() = rules.ToProto();
  return request;
}

// Attribute names of every op of `graph`, loop bodies included.
void CollectAttrNames(const v1::Graph& graph, std::set<std::string>* names) {
  for (const v1::Op& op : graph.ops()) {
    for (const auto& [name, value] : op.attrs()) names->insert(name);
    CollectAttrNames(op.body(), names);
  }
}

std::set<std::string>& SeedAttrNames() {
  static auto* names = new std::set<std::string>();
  return *names;
}

// Map fields (attrs) in key order, so regenerating the corpus changes only what changed.
std::string SerializeDeterministic(const google::protobuf::Message& message) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    message.SerializeToCodedStream(&coded);
  }
  return bytes;
}

bool WriteFile(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
  return static_cast<bool>(out);
}

// Writes OUT/<name>.<i>.{txt,bin} for each layout; false on a write error.
bool WriteSeeds(const fs::path& out, const std::string& name, const v1::Graph& graph,
                const std::vector<Layout>& layouts, int* written) {
  for (size_t i = 0; i < layouts.size(); ++i) {
    absl::StatusOr<v1::CreateSessionRequest> request = MakeRequest(graph, layouts[i]);
    if (!request.ok()) {
      std::cerr << "make_corpus: skipping " << name << " on " << layouts[i].mesh << " '"
                << layouts[i].rules << "': " << request.status() << "\n";
      continue;
    }
    CollectAttrNames(graph, &SeedAttrNames());
    std::string text;
    google::protobuf::TextFormat::PrintToString(*request, &text);
    const std::string stem = absl::StrCat(name, ".", i);
    if (!WriteFile(out / (stem + ".txt"), "t" + text) ||
        !WriteFile(out / (stem + ".bin"), "b" + SerializeDeterministic(*request))) {
      std::cerr << "make_corpus: cannot write " << (out / stem) << "\n";
      return false;
    }
    *written += 2;
  }
  return true;
}

// The .layouts lines: "MESH LAYOUT", '#' comments.
std::vector<Layout> ReadLayouts(const fs::path& path) {
  std::vector<Layout> layouts;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    absl::string_view s = absl::StripAsciiWhitespace(line);
    if (s.empty() || s[0] == '#') continue;
    std::vector<std::string> parts = absl::StrSplit(s, ' ', absl::SkipWhitespace());
    if (parts.size() != 2) continue;
    layouts.push_back({parts[0], parts[1] == "-" ? "" : parts[1]});
  }
  return layouts;
}

bool WriteExamples(const fs::path& examples, const fs::path& out, int* written) {
  std::vector<fs::path> graphs;
  for (const auto& entry : fs::directory_iterator(examples)) {
    if (entry.path().extension() == ".pbtxt") graphs.push_back(entry.path());
  }
  std::sort(graphs.begin(), graphs.end());
  for (const fs::path& path : graphs) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    v1::Graph graph;
    if (!google::protobuf::TextFormat::ParseFromString(text.str(), &graph)) {
      std::cerr << "make_corpus: cannot parse " << path << "\n";
      return false;
    }
    fs::path layouts = path;
    layouts.replace_extension(".layouts");
    if (!WriteSeeds(out, path.stem().string(), graph, ReadLayouts(layouts), written)) return false;
  }
  return true;
}

// Small configurations: the seeds should lower in milliseconds.
bool WriteModels(const fs::path& out, int* written) {
  const std::vector<Layout> mlp_layouts = {
      {"rows:2,cols:2", "batch:rows,d_ff:cols"}, {"x:4", "d_ff:x"}, {"p:1", ""}};
  const std::vector<Layout> transformer_layouts = {
      {"rows:2,cols:2", "batch:rows"},
      {"rows:2,cols:2", "batch:rows,heads:cols,d_ff:cols,vocab:cols"},
      {"x:2", "heads:x,d_ff:x"}};

  models::MlpOptions mlp;
  mlp.batch = 8;
  mlp.d_model = 8;
  mlp.d_ff = 16;
  mlp.biases = true;
  models::TransformerOptions transformer;
  transformer.batch = 4;
  transformer.length = 8;
  transformer.d_model = 8;
  transformer.heads = 2;
  transformer.d_kv = 4;
  transformer.d_ff = 16;
  transformer.layers = 1;
  transformer.vocab = 16;

  for (const std::string optimizer : {"sgd", "adam", "adafactor"}) {
    TrainOptions train;
    train.optimizer = optimizer;
    train.clip_global_norm = optimizer == "adam" ? 1.0f : 0.0f;
    train.microbatches = optimizer == "sgd" ? 2 : 1;
    absl::StatusOr<models::TrainGraph> m = models::BuildMlpTrainGraph(mlp, train);
    absl::StatusOr<models::TrainGraph> t = models::BuildTransformerTrainGraph(transformer, train);
    if (!m.ok() || !t.ok()) {
      std::cerr << "make_corpus: model graphs: " << m.status() << "; " << t.status() << "\n";
      return false;
    }
    if (!WriteSeeds(out, "mlp_train_" + optimizer, m->graph.proto(), mlp_layouts, written)) {
      return false;
    }
    // One Transformer training graph: 75 KB of text each, and the MLP covers the optimizers.
    if (optimizer == "adam" && !WriteSeeds(out, "transformer_train_" + optimizer, t->graph.proto(),
                                           transformer_layouts, written)) {
      return false;
    }
  }
  GraphBuilder b;
  absl::StatusOr<models::SamplerOutputs> sampler = models::BuildTransformerSampler(b, transformer);
  if (!sampler.ok()) {
    std::cerr << "make_corpus: sampler: " << sampler.status() << "\n";
    return false;
  }
  return WriteSeeds(out, "transformer_sampler", b.proto(), transformer_layouts, written);
}

// One entry per line, `"token"`, with the text format's own quotes escaped inside.
bool WriteDictionary(const fs::path& path) {
  std::set<std::string> tokens = {
      "ops {",      "name: ",      "type: ",    "inputs: ",  "shape {",
      "dims {",     "size: ",      "dtype: ",   "dims: ",    "attrs {",
      "key: ",      "value {",     "i: ",       "f: ",       "s: ",
      "b: true",    "ints {",      "floats {",  "strings {", "values: ",
      "body {",     "outputs: ",   "mesh {",    "rules {",   "tensor_dim: ",
      "mesh_dim: ", "float_val: ", "int_val: ", "DT_INT32",  "DT_FLOAT32",
      "}"};
  for (const OpInfo& op : AllOps()) tokens.insert(absl::StrCat("\"", op.type, "\""));
  for (const std::string& name : SeedAttrNames()) tokens.insert(absl::StrCat("\"", name, "\""));
  std::string out = "# Generated by fuzz/make_corpus.cc (make -f fuzz/fuzz.mk corpus).\n";
  for (const std::string& t : tokens) {
    std::string escaped;
    for (char c : t) {
      if (c == '"' || c == '\\') escaped += '\\';
      escaped += c;
    }
    absl::StrAppend(&out, "\"", escaped, "\"\n");
  }
  return WriteFile(path, out);
}

}  // namespace
}  // namespace meshrt

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: make_corpus EXAMPLES_DIR OUT_DIR DICT_FILE "
                 "(e.g. examples/graphs fuzz/corpus fuzz/graph.dict)\n";
    return 2;
  }
  const std::filesystem::path out = argv[2];
  std::filesystem::create_directories(out);
  int written = 0;
  if (!meshrt::WriteExamples(argv[1], out, &written) || !meshrt::WriteModels(out, &written)) {
    return 1;
  }
  if (!meshrt::WriteDictionary(argv[3])) {
    std::cerr << "make_corpus: cannot write " << argv[3] << "\n";
    return 1;
  }
  std::cout << "make_corpus: wrote " << written << " seeds to " << out << "\n";
  return 0;
}
