// meshrt._core: the C++ language (core/) for the Python package, so that Python graphs get the
// same shape inference, validation and reference interpreter as C++ ones (one implementation),
// and checkpoints read and written as whole tensors (runtime/checkpoint_tensors.h).
//
// Everything crosses the boundary as serialized protos (bytes): the Python side builds and reads
// them with its own generated stubs (meshrt/_proto), so no protobuf object is shared between the
// two runtimes. Every function returns (code, message, result): code is the absl::StatusCode
// (0 = OK) and result is None unless code is 0; python/meshrt/errors.py turns codes into
// exceptions. Nothing here aborts on bad input (a parse failure is InvalidArgument).
#include <map>
#include <string>
#include <vector>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/ir/tensor.h"
#include "core/ops/builder.h"
#include "core/ops/graph.h"
#include "core/ops/ops.h"
#include "core/reference/interpreter.h"
#include "core/train/training_spec.h"
#include "models/mlp.h"
#include "models/transformer.h"
#include "models/transformer_encdec.h"
#include "proto/graph.pb.h"
#include "proto/session.pb.h"
#include "runtime/checkpoint_tensors.h"

namespace py = pybind11;

namespace meshrt {
namespace {

py::tuple Result(const absl::Status& status, py::object value = py::none()) {
  return py::make_tuple(static_cast<int>(status.code()), std::string(status.message()),
                        status.ok() ? value : py::none());
}

absl::Status ParseError(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("cannot parse ", what, " (not a serialized ",
                                                 "meshrt.v1 message)"));
}

template <typename Message>
absl::Status Parse(const py::bytes& bytes, absl::string_view what, Message* message) {
  if (!message->ParseFromString(std::string(bytes))) return ParseError(what);
  return absl::OkStatus();
}

py::bytes Serialize(const google::protobuf::Message& message) {
  return py::bytes(message.SerializeAsString());
}

// infer(op, [(shape, dtype), ...]) -> (shape, dtype): InferOutputType.
py::tuple Infer(const py::bytes& op_bytes, const std::vector<std::pair<py::bytes, int>>& inputs) {
  v1::Op op;
  if (absl::Status s = Parse(op_bytes, "op", &op); !s.ok()) return Result(s);
  std::vector<TensorType> types;
  for (size_t i = 0; i < inputs.size(); ++i) {
    v1::Shape shape;
    const std::string what = absl::StrCat("input ", i, "'s shape of ", OpLabel(op));
    if (absl::Status s = Parse(inputs[i].first, what, &shape); !s.ok()) return Result(s);
    absl::StatusOr<Shape> parsed = Shape::FromProto(shape, what);
    if (!parsed.ok()) return Result(parsed.status());
    absl::StatusOr<DType> dtype = DTypeFromProto(static_cast<v1::DType>(inputs[i].second));
    if (!dtype.ok()) return Result(dtype.status());
    types.push_back(TensorType{*parsed, *dtype});
  }
  absl::StatusOr<TensorType> out = InferOutputType(op, types);
  if (!out.ok()) return Result(out.status());
  return Result(absl::OkStatus(), py::make_tuple(Serialize(out->shape.ToProto()),
                                                 static_cast<int>(DTypeToProto(out->dtype))));
}

// ops() -> [dict]: the registry, as `meshrt ops` prints it.
py::list Ops() {
  py::list out;
  for (const OpInfo& info : AllOps()) {
    if (!info.type.empty() && info.type[0] == '_') continue;  // runtime-internal ops
    py::dict d;
    d["type"] = info.type;
    d["family"] = FamilyName(info.family);
    d["min_inputs"] = info.min_inputs;
    d["max_inputs"] = info.max_inputs;
    d["differentiable"] = info.differentiable;
    d["summary"] = info.summary;
    d["collectives"] = info.collectives;
    out.append(d);
  }
  return out;
}

// check_graph(graph) -> None: Graph::Build's validation.
py::tuple CheckGraph(const py::bytes& graph_bytes) {
  v1::Graph graph;
  if (absl::Status s = Parse(graph_bytes, "graph", &graph); !s.ok()) return Result(s);
  return Result(Graph::Build(std::move(graph)).status());
}

absl::Status ParseTensors(const std::map<std::string, py::bytes>& in, absl::string_view what,
                          TensorMap* out) {
  for (const auto& [name, bytes] : in) {
    v1::TensorValue value;
    const std::string label = absl::StrCat(what, " '", name, "'");
    if (absl::Status s = Parse(bytes, label, &value); !s.ok()) return s;
    absl::StatusOr<Tensor> t = Tensor::FromProto(value, label);
    if (!t.ok()) return t.status();
    out->emplace(name, *std::move(t));
  }
  return absl::OkStatus();
}

py::dict SerializeTensors(const TensorMap& tensors) {
  py::dict out;
  for (const auto& [name, t] : tensors) out[py::str(name)] = Serialize(t.ToProto());
  return out;
}

// interpret(graph, feeds, fetches, variables) -> (fetched, variables after the step): one step of
// the reference interpreter (InterpretStep), tensors as serialized TensorValues by name.
py::tuple InterpretOneStep(const py::bytes& graph_bytes,
                           const std::map<std::string, py::bytes>& feed_bytes,
                           const std::vector<std::string>& fetches,
                           const std::map<std::string, py::bytes>& variable_bytes) {
  v1::Graph proto;
  if (absl::Status s = Parse(graph_bytes, "graph", &proto); !s.ok()) return Result(s);
  absl::StatusOr<Graph> graph = Graph::Build(std::move(proto));
  if (!graph.ok()) return Result(graph.status());
  TensorMap feeds, variables;
  if (absl::Status s = ParseTensors(feed_bytes, "feed", &feeds); !s.ok()) return Result(s);
  if (absl::Status s = ParseTensors(variable_bytes, "variable", &variables); !s.ok()) {
    return Result(s);
  }
  absl::StatusOr<TensorMap> out;
  {
    py::gil_scoped_release release;  // long steps must not stop other Python threads
    out = InterpretStep(*graph, feeds, fetches, &variables);
  }
  if (!out.ok()) return Result(out.status());
  return Result(absl::OkStatus(),
                py::make_tuple(SerializeTensors(*out), SerializeTensors(variables)));
}

// add_training(graph, spec) -> (graph, outputs): `graph` with the gradient and update ops of
// TrainingSpec `spec`, exactly as the coordinator adds them to a training session's graph
// (core/train/training_spec.h AddTraining); `outputs` is the serialized TrainingOutputs (the
// names of the loss, learning rate, global norm and global step). With it the reference
// interpreter runs training steps (interpret, carrying the variables) to compare with a cluster.
py::tuple AddTrainingToGraph(const py::bytes& graph_bytes, const py::bytes& spec_bytes) {
  v1::Graph proto;
  if (absl::Status s = Parse(graph_bytes, "graph", &proto); !s.ok()) return Result(s);
  v1::TrainingSpec spec;
  if (absl::Status s = Parse(spec_bytes, "training spec", &spec); !s.ok()) return Result(s);
  absl::StatusOr<Graph> graph = Graph::Build(std::move(proto));
  if (!graph.ok()) return Result(graph.status());
  absl::StatusOr<TrainedGraph> trained = AddTraining(*graph, spec);
  if (!trained.ok()) return Result(trained.status());
  return Result(absl::OkStatus(), py::make_tuple(Serialize(trained->graph.proto()),
                                                 Serialize(trained->outputs)));
}

// read_checkpoint(directory) -> (step, {name: TensorValue}): the committed version of a
// checkpoint directory, every variable whole (ReadCheckpointTensors).
py::tuple ReadCheckpoint(const std::string& directory) {
  absl::StatusOr<CheckpointTensors> read;
  {
    py::gil_scoped_release release;  // reading large shards must not stop other Python threads
    read = ReadCheckpointTensors(directory);
  }
  if (!read.ok()) return Result(read.status());
  return Result(absl::OkStatus(), py::make_tuple(read->step, SerializeTensors(read->tensors)));
}

// write_checkpoint(directory, {name: TensorValue}, step, keep) -> None: a new committed version
// of checkpoint directory `directory` holding the tensors whole (WriteCheckpointFromTensors).
py::tuple WriteCheckpoint(const std::string& directory,
                          const std::map<std::string, py::bytes>& tensor_bytes, int64_t step,
                          int keep) {
  TensorMap tensors;
  if (absl::Status s = ParseTensors(tensor_bytes, "variable", &tensors); !s.ok()) {
    return Result(s);
  }
  absl::Status s;
  {
    py::gil_scoped_release release;
    s = WriteCheckpointFromTensors(directory, tensors, step, keep);
  }
  return Result(s);
}

// models::EncDecOptions from `options` (field name -> value; fields not given keep their
// defaults). InvalidArgument naming `what` and the key for an unknown key or a value of the wrong
// type (pybind11's cast_error, caught: nothing here throws into Python or aborts).
absl::Status ParseEncDecOptions(const py::dict& options, absl::string_view what,
                                models::EncDecOptions* o) {
  for (const auto& [k, v] : options) {
    const std::string key = py::str(k);
    try {
      if (key == "batch") o->batch = v.cast<int64_t>();
      else if (key == "length") o->length = v.cast<int64_t>();
      else if (key == "d_model") o->d_model = v.cast<int64_t>();
      else if (key == "heads") o->heads = v.cast<int64_t>();
      else if (key == "d_kv") o->d_kv = v.cast<int64_t>();
      else if (key == "d_ff") o->d_ff = v.cast<int64_t>();
      else if (key == "encoder_layers") o->encoder_layers = v.cast<int64_t>();
      else if (key == "decoder_layers") o->decoder_layers = v.cast<int64_t>();
      else if (key == "vocab") o->vocab = v.cast<int64_t>();
      else if (key == "norm") o->norm = v.cast<std::string>();
      else if (key == "epsilon") o->epsilon = v.cast<float>();
      else if (key == "dropout") o->dropout = v.cast<float>();
      else if (key == "label_smoothing") o->label_smoothing = v.cast<float>();
      else if (key == "inputs_path") o->inputs_path = v.cast<std::string>();
      else if (key == "targets_path") o->targets_path = v.cast<std::string>();
      else if (key == "seed") o->seed = v.cast<int64_t>();
      else {
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": transformer_encdec has no option '", key, "'"));
      }
    } catch (const py::cast_error&) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": option '", key, "' has the wrong type (", std::string(py::str(v.get_type())),
          ")"));
    }
  }
  return absl::OkStatus();
}

// encdec_decoder(options, decode) -> (graph, names): the decoding graph of the encoder-decoder
// Transformer (models::BuildEncDecDecoder) with model `options` (as model_graph's
// "transformer_encdec") and `decode` (models::DecodeOptions fields: max_length, beam, alpha,
// beam_search, scores, teacher_forcing). `names`: {"inputs", "decoded", "scores",
// "forced_targets", "forced_logits": tensor name ("" when the graph has none), "variables":
// [names in creation order]}.
py::tuple EncDecDecoder(const py::dict& options, const py::dict& decode_options) {
  models::EncDecOptions o;
  if (absl::Status s = ParseEncDecOptions(options, "encdec_decoder", &o); !s.ok()) {
    return Result(s);
  }
  models::DecodeOptions decode;
  for (const auto& [k, v] : decode_options) {
    const std::string key = py::str(k);
    try {
      if (key == "max_length") decode.max_length = v.cast<int64_t>();
      else if (key == "beam") decode.beam = v.cast<int64_t>();
      else if (key == "alpha") decode.alpha = v.cast<float>();
      else if (key == "beam_search") decode.beam_search = v.cast<bool>();
      else if (key == "scores") decode.scores = v.cast<bool>();
      else if (key == "teacher_forcing") decode.teacher_forcing = v.cast<bool>();
      else {
        return Result(absl::InvalidArgumentError(
            absl::StrCat("encdec_decoder: no decode option '", key,
                         "' (max_length, beam, alpha, beam_search, scores, teacher_forcing)")));
      }
    } catch (const py::cast_error&) {
      return Result(absl::InvalidArgumentError(absl::StrCat(
          "encdec_decoder: decode option '", key, "' has the wrong type (",
          std::string(py::str(v.get_type())), ")")));
    }
  }
  GraphBuilder b;
  absl::StatusOr<models::DecoderOutputs> d = models::BuildEncDecDecoder(b, o, decode);
  if (!d.ok()) return Result(d.status());
  py::dict names;
  names["inputs"] = d->inputs.name;
  names["decoded"] = d->decoded.name;
  names["scores"] = d->scores.name;
  names["forced_targets"] = d->forced_targets.name;
  names["forced_logits"] = d->forced_logits.name;
  py::list variables;
  for (const TensorRef& v : d->variables) variables.append(v.name);
  names["variables"] = variables;
  return Result(absl::OkStatus(), py::make_tuple(Serialize(b.proto()), names));
}

// Builds C++ model "mlp" or "transformer" with `options` into `b` (model_graph); a value of the
// wrong type throws py::cast_error (caught by the caller).
absl::Status BuildCppModel(const std::string& kind, const py::dict& options, GraphBuilder& b) {
  auto unknown = [&](const std::string& key) {
    return absl::InvalidArgumentError(
        absl::StrCat("model_graph: ", kind, " has no option '", key, "'"));
  };
  if (kind == "mlp") {
    models::MlpOptions o;
    for (const auto& [k, v] : options) {
      const std::string key = py::str(k);
      if (key == "batch") o.batch = v.cast<int64_t>();
      else if (key == "d_model") o.d_model = v.cast<int64_t>();
      else if (key == "d_ff") o.d_ff = v.cast<int64_t>();
      else if (key == "seed") o.seed = v.cast<int64_t>();
      else if (key == "teacher_tanh") o.teacher_tanh = v.cast<bool>();
      else if (key == "teacher_noise") o.teacher_noise = v.cast<float>();
      else if (key == "biases") o.biases = v.cast<bool>();
      else if (key == "feed_data") o.feed_data = v.cast<bool>();
      else if (key == "fixed_data") o.fixed_data = v.cast<bool>();
      else if (key == "input_gradient") o.input_gradient = v.cast<bool>();
      else return unknown(key);
    }
    return models::BuildMlp(b, o).status();
  } else if (kind == "transformer") {
    models::TransformerOptions o;
    for (const auto& [k, v] : options) {
      const std::string key = py::str(k);
      if (key == "batch") o.batch = v.cast<int64_t>();
      else if (key == "length") o.length = v.cast<int64_t>();
      else if (key == "d_model") o.d_model = v.cast<int64_t>();
      else if (key == "heads") o.heads = v.cast<int64_t>();
      else if (key == "d_kv") o.d_kv = v.cast<int64_t>();
      else if (key == "d_ff") o.d_ff = v.cast<int64_t>();
      else if (key == "layers") o.layers = v.cast<int64_t>();
      else if (key == "vocab") o.vocab = v.cast<int64_t>();
      else if (key == "norm") o.norm = v.cast<std::string>();
      else if (key == "epsilon") o.epsilon = v.cast<float>();
      else if (key == "data_path") o.data_path = v.cast<std::string>();
      else if (key == "data_format") o.data_format = v.cast<std::string>();
      else if (key == "eval_fraction") o.eval_fraction = v.cast<float>();
      else if (key == "seed") o.seed = v.cast<int64_t>();
      else if (key == "embedding_stddev") o.embedding_stddev = v.cast<float>();
      else if (key == "position_stddev") o.position_stddev = v.cast<float>();
      else if (key == "init_scale") o.init_scale = v.cast<float>();
      else return unknown(key);
    }
    return models::BuildTransformer(b, o).status();
  }
  return absl::InvalidArgumentError(absl::StrCat("model_graph: no model '", kind, "'"));
}

// model_graph(kind, options) -> graph: the forward graph (model and loss, no training) of the C++
// model `kind` ("mlp", "transformer" or "transformer_encdec", models/) with `options` (field name
// -> value; fields not given keep their defaults). For comparing Python-built graphs with the C++
// ones.
py::tuple ModelGraph(const std::string& kind, const py::dict& options) {
  GraphBuilder b;
  absl::Status status;
  if (kind == "transformer_encdec") {
    models::EncDecOptions o;
    status = ParseEncDecOptions(options, "model_graph", &o);
    if (status.ok()) status = models::BuildEncDec(b, o).status();
  } else if (kind == "mlp" || kind == "transformer") {
    try {
      status = BuildCppModel(kind, options, b);
    } catch (const py::cast_error&) {
      status = absl::InvalidArgumentError(
          absl::StrCat("model_graph: an option of ", kind, " has the wrong type"));
    }
  } else {
    status = absl::InvalidArgumentError(
        absl::StrCat("model_graph: no model '", kind, "' (mlp, transformer, transformer_encdec)"));
  }
  if (!status.ok()) return Result(status);
  return Result(absl::OkStatus(), Serialize(b.proto()));
}

}  // namespace
}  // namespace meshrt

PYBIND11_MODULE(_core, m) {
  m.doc() = "meshrt's C++ language core: shape inference, validation, the reference interpreter";
  m.def("infer", &meshrt::Infer, py::arg("op"), py::arg("inputs"));
  m.def("ops", &meshrt::Ops);
  m.def("check_graph", &meshrt::CheckGraph, py::arg("graph"));
  m.def("interpret", &meshrt::InterpretOneStep, py::arg("graph"), py::arg("feeds"),
        py::arg("fetches"), py::arg("variables"));
  m.def("model_graph", &meshrt::ModelGraph, py::arg("kind"), py::arg("options"));
  m.def("encdec_decoder", &meshrt::EncDecDecoder, py::arg("options"), py::arg("decode"));
  m.def("add_training", &meshrt::AddTrainingToGraph, py::arg("graph"), py::arg("spec"));
  m.def("read_checkpoint", &meshrt::ReadCheckpoint, py::arg("directory"));
  m.def("write_checkpoint", &meshrt::WriteCheckpoint, py::arg("directory"), py::arg("tensors"),
        py::arg("step"), py::arg("keep"));
}
