#include "tests/graph_generator.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/random_feeds.h"
#include "core/ops/builder.h"
#include "core/ops/ops.h"
#include "google/protobuf/text_format.h"

namespace meshrt {
namespace {

constexpr int64_t kSizes[] = {1, 2, 3, 4, 6, 8, 12};
const char* const kMeshes[] = {"p:1", "p:2", "p:3", "p:4", "p:8", "a:2,b:2", "a:2,b:3",
                               "a:3,b:2", "a:2,b:4", "a:4,b:2", "a:2,b:2,c:2"};

class Generator {
 public:
  Generator(uint64_t seed, const GeneratorOptions& options) : rng_(seed), options_(options) {}

  GeneratedCase Run(uint64_t seed) {
    GeneratedCase c;
    c.seed = seed;
    for (int i = 0; i < 5; ++i) sizes_[absl::StrCat("d", i)] = kSizes[Pick(7)];
    const int placeholders = 1 + Pick(3);
    for (int i = 0; i < placeholders; ++i) {
      tensors_.push_back(b_.Placeholder(absl::StrCat("x", i), RandomShape(3)));
    }
    const int ops = 1 + Pick(options_.max_ops);
    for (int i = 0; i < ops && b_.status().ok(); ++i) AddOp();
    c.graph = b_.proto();
    c.mesh = PickMesh();
    Mesh mesh = Mesh::Parse(c.mesh).value();
    std::vector<std::string> rules;
    for (const auto& [name, size] : sizes_) {
      int pick = Pick(mesh.ndims() + 2);  // a bias towards splitting nothing
      if (pick < mesh.ndims()) rules.push_back(absl::StrCat(name, ":", mesh.dims()[pick].name));
    }
    c.layout = absl::StrJoin(rules, ",");
    return c;
  }

 private:
  int Pick(int n) { return static_cast<int>(rng_() % n); }

  std::string PickMesh() {
    while (true) {
      std::string m = kMeshes[Pick(sizeof(kMeshes) / sizeof(kMeshes[0]))];
      if (Mesh::Parse(m).value().num_processors() <= options_.max_processors) return m;
    }
  }

  Shape RandomShape(int max_rank) {
    std::vector<std::string> names;
    for (const auto& [n, s] : sizes_) names.push_back(n);
    std::shuffle(names.begin(), names.end(), rng_);
    const int rank = Pick(max_rank + 1);
    std::vector<Dim> dims;
    for (int i = 0; i < rank; ++i) dims.push_back(Dim{names[i], sizes_[names[i]]});
    return Shape(dims);
  }

  const TensorRef& AnyTensor() { return tensors_[Pick(static_cast<int>(tensors_.size()))]; }

  std::string NewDimName(int64_t size) {
    std::string name = absl::StrCat("d", sizes_.size());
    sizes_[name] = size;
    return name;
  }

  // An op of the type with `dims` and attrs set by `fill`, skipped when the type is not registered.
  TensorRef Make(const std::string& type, const std::vector<TensorRef>& inputs,
                 const std::vector<std::string>& dims,
                 const std::function<void(v1::Op*)>& fill = nullptr) {
    if (FindOp(type) == nullptr) return TensorRef{};
    v1::Op op;
    op.set_type(type);
    for (const std::string& d : dims) op.add_dims(d);
    if (fill) fill(&op);
    return b_.Apply(op, inputs);
  }

  static void SetInt(v1::Op* op, const std::string& k, int64_t v) { (*op->mutable_attrs())[k].set_i(v); }
  static void SetStr(v1::Op* op, const std::string& k, const std::string& v) {
    (*op->mutable_attrs())[k].set_s(v);
  }

  // The op families beyond the first: math, data movement, indexing, spatial, random.
  TensorRef AddFamilyOp(const TensorRef& x) {
    const std::string d = x.shape.rank() > 0 ? x.shape.dim(Pick(x.shape.rank())).name : "";
    const int64_t n = d.empty() ? 0 : sizes_[d];
    switch (Pick(12)) {
      case 0: {
        const char* unary[] = {"tanh", "sigmoid", "square", "abs", "gelu", "sign"};
        return Make(unary[Pick(6)], {x}, {});
      }
      case 1:
        if (d.empty()) return {};
        return Make(Pick(2) ? "softmax" : "log_softmax", {x}, {d});
      case 2:
        if (d.empty()) return {};
        return Make(Pick(2) ? "layer_norm" : "rms_norm", {x}, {d});
      case 3: {
        if (d.empty()) return {};
        const char* reduce[] = {"reduce_min", "reduce_logsumexp", "reduce_any"};
        return Make(reduce[Pick(3)], {x}, {d});
      }
      case 4: {  // slice or pad along d, into a fresh dim
        if (n < 2) return {};
        const int64_t begin = Pick(static_cast<int>(n) - 1);
        const int64_t size = 1 + Pick(static_cast<int>(n - begin));
        if (Pick(2)) {
          const std::string nd = NewDimName(size);
          return Make("slice", {x}, {d}, [&](v1::Op* op) {
            SetInt(op, "begin", begin);
            SetInt(op, "size", size);
            SetStr(op, "new_dim", nd);
          });
        }
        const int64_t before = Pick(3), after = Pick(3);
        const std::string nd = NewDimName(n + before + after);
        return Make("pad", {x}, {d}, [&](v1::Op* op) {
          SetInt(op, "before", before);
          SetInt(op, "after", after);
          SetStr(op, "new_dim", nd);
        });
      }
      case 5: {  // concat with itself along d
        if (d.empty()) return {};
        const std::string nd = NewDimName(2 * n);
        return Make("concat", {x, x}, {d}, [&](v1::Op* op) { SetStr(op, "new_dim", nd); });
      }
      case 6: {  // split into equal pieces, or unstack
        if (n < 2) return {};
        if (n % 2 == 0 && Pick(2)) {
          const std::string nd = NewDimName(n / 2);
          const int64_t index = Pick(2);
          return Make("split", {x}, {d}, [&](v1::Op* op) {
            SetInt(op, "index", index);
            SetInt(op, "num", 2);
            SetStr(op, "new_dim", nd);
          });
        }
        const int64_t index = Pick(static_cast<int>(n));
        return Make("unstack", {x}, {d}, [&](v1::Op* op) { SetInt(op, "index", index); });
      }
      case 7:
        if (d.empty()) return {};
        return Make("cumsum", {x}, {d}, [&](v1::Op* op) {
          (*op->mutable_attrs())["exclusive"].set_b(Pick(2) == 1);
        });
      case 8: {
        if (n < 2) return {};
        const int64_t offset = Pick(static_cast<int>(2 * n)) - n;
        const bool wrap = Pick(2) == 1;
        return Make("shift", {x}, {d}, [&](v1::Op* op) {
          SetInt(op, "offset", offset);
          (*op->mutable_attrs())["wrap"].set_b(wrap);
        });
      }
      case 9: {  // random tensors combined with x: bitwise layout invariance under the ops after
        const int64_t seed = Pick(1000);
        const Shape shape = x.shape;
        if (FindOp("random_uniform") == nullptr) return {};
        v1::Op op;
        op.set_type(Pick(2) ? "random_uniform" : "random_normal");
        *op.mutable_shape() = shape.ToProto();
        SetInt(&op, "seed", seed);
        TensorRef r = b_.Apply(op, {});
        return b_.status().ok() ? b_.Add(x, r) : TensorRef{};
      }
      case 10: {
        const float rate = 0.25f * Pick(3);
        const int64_t seed = Pick(1000);
        return Make("dropout", {x}, {}, [&](v1::Op* op) {
          (*op->mutable_attrs())["rate"].set_f(rate);
          SetInt(op, "seed", seed);
        });
      }
      default: {  // sort along d (values), or where(x > 0, x, -x)
        if (!d.empty() && Pick(2)) {
          return Make("sort", {x}, {d}, [&](v1::Op* op) {
            (*op->mutable_attrs())["descending"].set_b(Pick(2) == 1);
          });
        }
        TensorRef positive = Make("greater", {x}, {}, [](v1::Op* op) {
          (*op->mutable_attrs())["scalar"].set_f(0.0f);
        });
        if (positive.name.empty() || !b_.status().ok()) return {};
        return Make("where", {positive, x, b_.Neg(x)}, {});
      }
    }
  }

  void AddOp() {
    const TensorRef x = AnyTensor();
    TensorRef out;
    if (options_.all_families && Pick(2) == 0) {
      out = AddFamilyOp(x);
      if (b_.status().ok() && !out.name.empty() && out.dtype == DType::kFloat32 &&
          out.shape.rank() <= 4) {
        tensors_.push_back(out);
      }
      return;
    }
    switch (Pick(8)) {
      case 0:
      case 1: {  // einsum of two tensors, output a random subset of their dims (rank <= 3)
        const TensorRef y = AnyTensor();
        std::vector<Dim> all = x.shape.dims();
        for (const Dim& d : y.shape.dims()) {
          if (!x.shape.Contains(d.name)) all.push_back(d);
        }
        std::shuffle(all.begin(), all.end(), rng_);
        all.resize(std::min<size_t>(all.size(), Pick(4)));
        out = b_.Einsum({x, y}, Shape(all));
        break;
      }
      case 2: {  // binary with broadcasting, as long as the result stays small
        const TensorRef y = AnyTensor();
        std::set<std::string> names;
        for (const Dim& d : x.shape.dims()) names.insert(d.name);
        for (const Dim& d : y.shape.dims()) names.insert(d.name);
        if (names.size() > 4) return;
        const char* kinds[] = {"add", "sub", "mul", "maximum", "minimum"};
        v1::Op op;
        op.set_type(kinds[Pick(5)]);
        out = b_.Apply(op, {x, y});
        break;
      }
      case 3:
        out = Pick(2) ? b_.Relu(x) : b_.Neg(b_.Scale(x, 0.5f));
        break;
      case 4: {  // reduce over a random subset
        std::vector<std::string> dims;
        for (const Dim& d : x.shape.dims()) {
          if (Pick(2)) dims.push_back(d.name);
        }
        if (dims.empty()) return;  // an empty list would reduce everything: fine, but rarer
        const int kind = Pick(3);
        out = kind == 0 ? b_.ReduceSum(x, dims) : kind == 1 ? b_.ReduceMax(x, dims)
                                                            : b_.ReduceMean(x, dims);
        break;
      }
      case 5: {  // rename one dim to a fresh name (a layout change)
        if (x.shape.rank() == 0) return;
        const Dim& d = x.shape.dim(Pick(x.shape.rank()));
        out = b_.RenameDim(x, d.name, NewDimName(d.size));
        break;
      }
      case 6: {  // reshape: merge two adjacent dims, or rename all dims
        if (x.shape.rank() >= 2 && Pick(2)) {
          const int i = Pick(x.shape.rank() - 1);
          std::vector<Dim> dims;
          for (int k = 0; k < x.shape.rank(); ++k) {
            if (k == i) {
              const int64_t merged = x.shape.dim(k).size * x.shape.dim(k + 1).size;
              dims.push_back(Dim{NewDimName(merged), merged});
              ++k;
            } else {
              dims.push_back(x.shape.dim(k));
            }
          }
          out = b_.Reshape(x, Shape(dims));
        } else {
          std::vector<Dim> dims;
          for (const Dim& d : x.shape.dims()) dims.push_back(Dim{NewDimName(d.size), d.size});
          out = b_.Reshape(x, Shape(dims));
        }
        break;
      }
      default: {  // einsum with one input: a transpose / partial sum
        std::vector<Dim> dims = x.shape.dims();
        std::shuffle(dims.begin(), dims.end(), rng_);
        if (!dims.empty() && Pick(2)) dims.pop_back();
        out = b_.Einsum({x}, Shape(dims));
        break;
      }
    }
    if (b_.status().ok() && !out.name.empty()) tensors_.push_back(out);
  }

  std::mt19937_64 rng_;
  GeneratorOptions options_;
  GraphBuilder b_;
  std::map<std::string, int64_t> sizes_;
  std::vector<TensorRef> tensors_;
};

}  // namespace

GeneratedCase GenerateCase(uint64_t seed, const GeneratorOptions& options) {
  return Generator(seed, options).Run(seed);
}

bool LayoutIsValid(const Graph& graph, const Mesh& mesh, const LayoutRules& rules) {
  for (int i : graph.topological_order()) {
    const Shape& s = graph.type(graph.op(i).name()).shape;
    std::set<int> used;
    for (const Dim& d : s.dims()) {
      const int a = rules.MeshAxisFor(d.name);
      if (a == kReplicated) continue;
      if (!used.insert(a).second) return false;
      if (d.size % mesh.size(a) != 0) return false;
    }
  }
  return true;
}

TensorMap GeneratedFeeds(const Graph& graph, uint64_t seed) {
  return RandomFeeds(graph, seed * 7919 + 1);
}

std::string Describe(const GeneratedCase& c) {
  std::string text;
  google::protobuf::TextFormat::PrintToString(c.graph, &text);
  return absl::StrCat("seed ", c.seed, ", mesh ", c.mesh, ", layout '", c.layout, "'\n", text);
}

}  // namespace meshrt
