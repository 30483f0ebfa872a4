// libFuzzer target: what the coordinator does with a CreateSession request before it picks any
// worker (coordinator/coordinator.cc, Coordinator::CreateSession): Graph::Build, Mesh::FromProto,
// LayoutRules::FromProto, Lower (which runs ValidateLayouts first), the outputs map, the mesh
// coordinates, the program's wire size, and ExplainProgram for the response.
//
// Input: the first byte picks the encoding of the rest, a v1::CreateSessionRequest:
//   't'        protobuf text format (reaches deep quickly: mutating "size: 8" keeps it parseable)
//   otherwise  binary protobuf, as it arrives over gRPC
// Half the mutations are libFuzzer's byte-level ones, half structure-aware
// (fuzz/request_mutator.h) on the decoded request, written back in the input's encoding.
// Every error status is a fine outcome; a crash, abort (MESHRT_CHECK), sanitizer report, leak or
// timeout is a finding. See fuzz/README.md.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "core/ir/limits.h"
#include "core/ir/mesh.h"
#include "core/lowering/lowering.h"
#include "core/ops/graph.h"
#include "core/planning/explain.h"
#include "fuzz/request_mutator.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/stubs/logging.h"
#include "google/protobuf/text_format.h"
#include "proto/session.pb.h"

namespace meshrt {
namespace {

// Drops the text parser's complaints: malformed text is most of the fuzzer's input.
class SilentErrors : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int, google::protobuf::io::ColumnNumber, const std::string&) override {}
  void AddWarning(int, google::protobuf::io::ColumnNumber, const std::string&) override {}
};

bool Decode(const uint8_t* data, size_t size, v1::CreateSessionRequest* request) {
  if (size == 0) return false;
  const char* rest = reinterpret_cast<const char*>(data + 1);
  const int rest_size = static_cast<int>(size - 1);
  if (data[0] == 't') {
    google::protobuf::TextFormat::Parser parser;
    SilentErrors errors;
    parser.RecordErrorsTo(&errors);
    return parser.ParseFromString(std::string(rest, rest_size), request);
  }
  return request->ParseFromArray(rest, rest_size);
}

// The inverse of Decode, keeping the encoding `flag` selects.
std::string Encode(uint8_t flag, const v1::CreateSessionRequest& request) {
  std::string out(1, static_cast<char>(flag));
  if (flag == 't') {
    std::string text;
    google::protobuf::TextFormat::PrintToString(request, &text);
    return out + text;
  }
  return out + request.SerializeAsString();
}

// The coordinator's request caps (core/ir/limits.h), tightened so that valid but big requests stay
// fast to lower: the fuzzer exercises the caps themselves, not a guard of its own.
const RequestLimits& FuzzLimits() {
  static const RequestLimits limits = [] {
    RequestLimits l;
    l.max_mesh_processors = 64;
    l.max_elements_per_tensor = int64_t{1} << 20;
    l.max_ops = int64_t{1} << 14;  // counting unrolled while_loop bodies
    return l;
  }();
  return limits;
}

// Coordinator::CreateSession up to the wait for workers, then the response's explain.
void CreateSessionWithoutWorkers(const v1::CreateSessionRequest& request) {
  const RequestLimits& limits = FuzzLimits();
  if (!CheckGraphBytes(static_cast<int64_t>(request.ByteSizeLong()), limits, "the request").ok() ||
      !CheckMeshLimits(request.mesh(), limits).ok()) {
    return;
  }
  absl::StatusOr<Graph> graph = Graph::Build(request.graph(), limits);
  if (!graph.ok()) return;
  absl::StatusOr<Mesh> mesh = Mesh::FromProto(request.mesh());
  if (!mesh.ok()) return;
  absl::StatusOr<LayoutRules> rules = LayoutRules::FromProto(request.rules(), *mesh);
  if (!rules.ok()) return;
  absl::StatusOr<v1::Program> program = Lower(*graph, *mesh, *rules);
  if (!program.ok()) return;

  std::map<std::string, v1::ProgramTensor> outputs;
  for (const v1::ProgramTensor& t : program->outputs()) outputs[t.name()] = t;
  const int n = mesh->num_processors();
  for (int p = 0; p < n; ++p) (void)mesh->Coordinate(p);
  (void)mesh->ToString();
  (void)rules->ToString();
  (void)program->ByteSizeLong();  // the SessionSpec every worker receives carries the program
  (void)ExplainProgram(*program);
}

}  // namespace
}  // namespace meshrt

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);  // e.g. "String field contains invalid UTF-8"
  return 0;
}

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size,
                                          unsigned int seed) {
  meshrt::v1::CreateSessionRequest request;
  if (seed % 2 == 0 || !meshrt::Decode(data, size, &request)) {
    return LLVMFuzzerMutate(data, size, max_size);
  }
  meshrt::fuzz::MutateRequest(seed / 2, &request);
  const std::string out = meshrt::Encode(data[0], request);
  if (out.size() > max_size) return LLVMFuzzerMutate(data, size, max_size);
  std::memcpy(data, out.data(), out.size());
  return out.size();
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  meshrt::v1::CreateSessionRequest request;
  if (!meshrt::Decode(data, size, &request)) return 0;
  meshrt::CreateSessionWithoutWorkers(request);
  return 0;
}
