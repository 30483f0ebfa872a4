#include "bench/train_flops.h"

#include <map>
#include <set>
#include <string>

namespace meshrt {
namespace bench {

double TransformerStepFlops(const models::TransformerOptions& o) {
  const double b = o.batch, l = o.length, d = o.d_model, hk = o.heads * o.d_kv, f = o.d_ff,
               v = o.vocab, layers = o.layers;
  const double forward =
      2 * b * l * (layers * (4 * d * hk + 2 * d * f) + d * v) + layers * 4 * b * l * l * hk;
  return 3 * forward;
}

double MlpStepFlops(const models::MlpOptions& o) {
  const double product = 2.0 * o.batch * o.d_model * o.d_ff;
  return product * (o.input_gradient ? 6 : 5);
}

double TransformerEmbeddingFlops(const models::TransformerOptions& o) {
  return 4.0 * o.batch * o.length * o.vocab * o.d_model;
}

double GraphGemmFlops(const Graph& graph, const std::vector<std::string>& fetches) {
  // The ops the step runs: everything the fetches and the variable updates depend on.
  std::set<std::string> live;
  std::vector<std::string> stack = fetches;
  for (const v1::Op& op : graph.proto().ops()) {
    if (op.type() == "assign" || op.type() == "assign_add") stack.push_back(op.name());
  }
  while (!stack.empty()) {
    const std::string name = stack.back();
    stack.pop_back();
    const v1::Op* op = graph.FindOp(name);
    if (op == nullptr || !live.insert(name).second) continue;
    for (const std::string& input : op->inputs()) stack.push_back(input);
  }
  double total = 0;
  for (const v1::Op& op : graph.proto().ops()) {
    if (op.type() != "einsum" || op.inputs_size() < 2 || live.count(op.name()) == 0) continue;
    std::map<std::string, int64_t> dims;
    for (const Dim& dim : graph.type(op.name()).shape.dims()) dims[dim.name] = dim.size;
    for (const std::string& input : op.inputs()) {
      for (const Dim& dim : graph.type(input).shape.dims()) dims[dim.name] = dim.size;
    }
    double product = 2;
    for (const auto& [name, size] : dims) product *= static_cast<double>(size);
    total += product * (op.inputs_size() - 1);
  }
  return total;
}

}  // namespace bench
}  // namespace meshrt
