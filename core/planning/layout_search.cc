#include "core/planning/layout_search.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <optional>
#include <set>
#include <thread>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace meshrt {
namespace {

void Factorisations(int rest, int max_dims, std::vector<int64_t>* prefix,
                    std::vector<std::vector<int64_t>>* out) {
  if (rest == 1) {
    if (!prefix->empty()) out->push_back(*prefix);
    return;
  }
  if (static_cast<int>(prefix->size()) == max_dims) return;
  for (int f = 2; f <= rest; ++f) {
    if (rest % f != 0) continue;
    prefix->push_back(f);
    Factorisations(rest / f, max_dims, prefix, out);
    prefix->pop_back();
  }
}

std::vector<std::string> MeshDimNames(size_t n) {
  if (n == 1) return {"x"};
  if (n == 2) return {"rows", "cols"};
  std::vector<std::string> names;
  for (size_t i = 0; i < n; ++i) names.push_back(absl::StrCat("d", i));
  return names;
}

// The size of every dim name of `graph` (Graph::Build refuses one name with two sizes).
std::map<std::string, int64_t> DimSizes(const Graph& graph) {
  std::map<std::string, int64_t> sizes;
  for (int i : graph.topological_order()) {
    for (const Dim& d : graph.type(graph.op(i).name()).shape.dims()) sizes[d.name] = d.size;
  }
  return sizes;
}

using Rules = std::map<std::string, std::string>;  // graph dim -> mesh dim

std::string RulesKey(const Mesh& mesh, const Rules& rules) {
  std::string key = mesh.ToString();
  for (const auto& [dim, mesh_dim] : rules) absl::StrAppend(&key, "|", dim, ":", mesh_dim);
  return key;
}

// Every permutation of `mesh`'s dim names that maps each dim to one of the same size (the
// identity first).
std::vector<std::map<std::string, std::string>> EqualSizePermutations(const Mesh& mesh) {
  std::vector<int> order(mesh.dims().size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::vector<std::map<std::string, std::string>> perms;
  do {
    bool same_sizes = true;
    std::map<std::string, std::string> perm;
    for (size_t i = 0; i < order.size(); ++i) {
      same_sizes = same_sizes && mesh.dims()[i].size == mesh.dims()[order[i]].size;
      perm[mesh.dims()[i].name] = mesh.dims()[order[i]].name;
    }
    if (same_sizes) perms.push_back(std::move(perm));
  } while (std::next_permutation(order.begin(), order.end()));
  return perms;
}

// The candidate's identity: the smallest text among the rules with the mesh dims permuted by
// `perms` (EqualSizePermutations, so "batch:rows" and "batch:cols" on 4x4 are one; empty: the
// rules' own text).
std::string Key(const Mesh& mesh, const Rules& rules,
                const std::vector<std::map<std::string, std::string>>& perms) {
  std::string best = RulesKey(mesh, rules);
  for (const auto& perm : perms) {
    Rules permuted;
    for (const auto& [dim, mesh_dim] : rules) permuted[dim] = perm.at(mesh_dim);
    best = std::min(best, RulesKey(mesh, permuted));
  }
  return best;
}

struct Scored {
  std::string key;
  Rules rules;
  Candidate candidate;
};

// Candidates that fit first, by time; then the others, by peak memory; ties by the rules' text.
bool Better(const Scored& a, const Scored& b) {
  const Evaluation& x = a.candidate.evaluation;
  const Evaluation& y = b.candidate.evaluation;
  if (x.fits != y.fits) return x.fits;
  if (x.fits && x.seconds != y.seconds) return x.seconds < y.seconds;
  if (!x.fits && x.peak_bytes != y.peak_bytes) return x.peak_bytes < y.peak_bytes;
  return a.key < b.key;
}

// Evaluates `candidates` (on `threads` threads when more than one): results in their order.
std::vector<absl::StatusOr<Evaluation>> EvaluateAll(
    const std::vector<std::pair<Mesh, Rules>>& candidates, const EvaluateFn& evaluate,
    int threads) {
  std::vector<absl::StatusOr<Evaluation>> results(candidates.size(),
                                                  absl::UnknownError("not evaluated"));
  auto run = [&](size_t i) {
    const auto& [mesh, rules] = candidates[i];
    absl::StatusOr<LayoutRules> made = LayoutRules::Make(
        std::vector<std::pair<std::string, std::string>>(rules.begin(), rules.end()), mesh);
    results[i] = made.ok() ? evaluate(mesh, *made) : absl::StatusOr<Evaluation>(made.status());
  };
  const int n = std::min<int>(threads, static_cast<int>(candidates.size()));
  if (n <= 1) {
    for (size_t i = 0; i < candidates.size(); ++i) run(i);
    return results;
  }
  std::atomic<size_t> next{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < n; ++t) {
    pool.emplace_back([&] {
      for (size_t i = next++; i < candidates.size(); i = next++) run(i);
    });
  }
  for (std::thread& t : pool) t.join();
  return results;
}

// One mesh's beam search; feasible candidates go to `all`. Each round's new candidates are
// evaluated together (in parallel with options.threads) and then taken in their order, so the
// result does not depend on the threads.
void SearchMesh(const Graph& graph, const Mesh& mesh, const EvaluateFn& evaluate,
                const SearchOptions& options, SearchResult* result, std::vector<Scored>* all) {
  const auto moves = LayoutMoves(graph, mesh);
  const std::vector<std::map<std::string, std::string>> perms =
      options.mesh_symmetry ? EqualSizePermutations(mesh)
                            : std::vector<std::map<std::string, std::string>>{};
  std::set<std::string> seen;
  // The new candidates among `proposals` (within the budget), evaluated; the feasible ones.
  auto try_all = [&](const std::vector<Rules>& proposals) {
    std::vector<std::pair<Mesh, Rules>> fresh;
    std::vector<std::string> keys;
    for (const Rules& rules : proposals) {
      std::string key = Key(mesh, rules, perms);
      if (result->evaluations >= options.max_evaluations || !seen.insert(key).second) continue;
      ++result->evaluations;
      fresh.emplace_back(mesh, rules);
      keys.push_back(std::move(key));
    }
    std::vector<absl::StatusOr<Evaluation>> e = EvaluateAll(fresh, evaluate, options.threads);
    std::vector<Scored> kept;
    for (size_t i = 0; i < fresh.size(); ++i) {
      if (!e[i].ok()) {
        ++result->refused;
        result->last_refusal =
            absl::StrCat(RulesKey(mesh, fresh[i].second), ": ", e[i].status().message());
        continue;
      }
      LayoutRules made = *LayoutRules::Make(std::vector<std::pair<std::string, std::string>>(
                                                fresh[i].second.begin(), fresh[i].second.end()),
                                            mesh);
      Scored s{keys[i], fresh[i].second, Candidate{mesh, std::move(made), *e[i]}};
      if (e[i]->fits) {
        all->push_back(s);
      } else {
        ++result->refused;
        result->last_refusal = absl::StrCat(RulesKey(mesh, fresh[i].second), ": ", e[i]->refusal);
        if (result->closest_peak_bytes < 0 || e[i]->peak_bytes < result->closest_peak_bytes) {
          result->closest_peak_bytes = e[i]->peak_bytes;
          result->closest_refusal = result->last_refusal;
        }
      }
      kept.push_back(std::move(s));
    }
    return kept;
  };
  std::vector<Scored> beam = try_all({Rules{}});
  if (beam.empty()) {  // replicated does not fit: start from every single rule instead
    std::vector<Rules> singles;
    for (const auto& [dim, mesh_dim] : moves) singles.push_back({{dim, mesh_dim}});
    beam = try_all(singles);
    std::sort(beam.begin(), beam.end(), Better);
    if (static_cast<int>(beam.size()) > options.beam) beam.resize(options.beam);
  }
  for (int round = 0; round < options.max_rounds && !beam.empty(); ++round) {
    std::vector<Rules> proposals;
    for (const Scored& s : beam) {
      for (const auto& [dim, mesh_dim] : moves) {
        if (s.rules.count(dim)) continue;
        Rules r = s.rules;
        r[dim] = mesh_dim;
        proposals.push_back(std::move(r));
      }
    }
    std::vector<Scored> next = beam;
    for (Scored& t : try_all(proposals)) next.push_back(std::move(t));
    std::sort(next.begin(), next.end(), Better);
    if (static_cast<int>(next.size()) > options.beam) next.resize(options.beam);
    std::vector<std::string> before, after;
    for (const Scored& s : beam) before.push_back(s.key);
    for (const Scored& s : next) after.push_back(s.key);
    beam = std::move(next);
    if (before == after) break;  // the round improved nothing
  }
}

}  // namespace

absl::StatusOr<std::vector<Mesh>> MeshesFor(int workers, int max_dims) {
  if (workers < 1 || max_dims < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "meshes need workers >= 1 and max_dims >= 1, not ", workers, " and ", max_dims));
  }
  if (workers == 1) return std::vector<Mesh>{*Mesh::Parse("x:1")};
  std::vector<std::vector<int64_t>> shapes;
  std::vector<int64_t> prefix;
  Factorisations(workers, max_dims, &prefix, &shapes);
  std::stable_sort(shapes.begin(), shapes.end(), [](const auto& a, const auto& b) {
    return a.size() != b.size() ? a.size() < b.size() : a < b;
  });
  std::vector<Mesh> meshes;
  for (const std::vector<int64_t>& shape : shapes) {
    const std::vector<std::string> names = MeshDimNames(shape.size());
    std::vector<Dim> dims;
    for (size_t i = 0; i < shape.size(); ++i) dims.push_back({names[i], shape[i]});
    absl::StatusOr<Mesh> mesh = Mesh::Make(std::move(dims));
    if (!mesh.ok()) return mesh.status();
    meshes.push_back(*std::move(mesh));
  }
  return meshes;
}

absl::StatusOr<int> ParseAutoMesh(absl::string_view text) {
  absl::string_view rest = text;
  int n = 0;
  if (!absl::ConsumePrefix(&rest, "auto:") || !absl::SimpleAtoi(rest, &n) || n < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("mesh '", text, "' is not auto:N with a worker count N >= 1 (e.g. auto:8)"));
  }
  return n;
}

std::vector<std::pair<std::string, std::string>> LayoutMoves(const Graph& graph, const Mesh& mesh) {
  std::vector<std::pair<std::string, std::string>> moves;
  for (const auto& [dim, size] : DimSizes(graph)) {
    for (const Dim& m : mesh.dims()) {
      if (m.size >= 2 && size % m.size == 0) moves.emplace_back(dim, m.name);
    }
  }
  return moves;
}

absl::StatusOr<SearchResult> SearchLayouts(const Graph& graph, const std::vector<Mesh>& meshes,
                                           const EvaluateFn& evaluate,
                                           const SearchOptions& options) {
  SearchResult result;
  std::vector<Scored> all;
  for (const Mesh& mesh : meshes) SearchMesh(graph, mesh, evaluate, options, &result, &all);
  if (all.empty()) {
    const std::string& why =
        result.closest_refusal.empty() ? result.last_refusal : result.closest_refusal;
    return absl::NotFoundError(absl::StrCat(
        "no layout of ", result.evaluations, " tried fits",
        why.empty()
            ? ""
            : absl::StrCat(result.closest_refusal.empty() ? " (last refused: " : " (the closest: ",
                           why, ")")));
  }
  std::sort(all.begin(), all.end(), Better);
  for (Scored& s : all) {
    if (static_cast<int>(result.best.size()) >= options.keep) break;
    result.best.push_back(std::move(s.candidate));
  }
  return result;
}

}  // namespace meshrt
