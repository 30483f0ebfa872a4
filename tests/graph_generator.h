// A seeded generator of random well-formed mesh graphs, meshes and layout rules, for property
// tests: every generated graph must run on every valid layout exactly as the reference interpreter
// runs it, and every invalid layout must be refused.
#ifndef MESHRT_TESTS_GRAPH_GENERATOR_H_
#define MESHRT_TESTS_GRAPH_GENERATOR_H_

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/ir/mesh.h"
#include "core/ops/graph.h"
#include "core/reference/interpreter.h"
#include "proto/graph.pb.h"

namespace meshrt {

struct GeneratedCase {
  uint64_t seed = 0;
  v1::Graph graph;
  std::string mesh;    // "a:2,b:2"
  std::string layout;  // "d0:a,d3:b"
};

struct GeneratorOptions {
  int max_ops = 8;
  int max_processors = 8;
  // Half the ops come from every registered family (math, data movement, indexing, spatial,
  // random) instead of the first family (einsum, add/sub/mul, reductions, reshape, rename).
  bool all_families = true;
};

// Graph, mesh and rules drawn from `seed` (the same seed always gives the same case). Dim sizes
// are drawn from {1, 2, 3, 4, 6, 8, 12}, so some divide the mesh dims and some do not; the rules
// map each dim to a random mesh dim or to none, so the layout may be invalid.
GeneratedCase GenerateCase(uint64_t seed, const GeneratorOptions& options = {});

// Whether `rules` give every tensor of `graph` a valid layout, decided independently of
// core/lowering (two dims of one tensor on one mesh dim, or a size not divisible).
bool LayoutIsValid(const Graph& graph, const Mesh& mesh, const LayoutRules& rules);

// Reproducible random feeds for every placeholder.
TensorMap GeneratedFeeds(const Graph& graph, uint64_t seed);

// "seed S, mesh M, layout L" and the graph in text format, for failure messages.
std::string Describe(const GeneratedCase& c);

}  // namespace meshrt

#endif  // MESHRT_TESTS_GRAPH_GENERATOR_H_
