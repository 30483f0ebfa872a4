// --mesh / --layout with the planner (core/planning/planner.h): `--layout auto` and `--mesh auto:N`.
#include <ostream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/cli_commands.h"
#include "client/hardware_probe.h"
#include "core/planning/layout_search.h"
#include "core/planning/planner.h"
#include "util/status_macros.h"

namespace meshrt {

absl::StatusOr<HardwareProfile> ProfileFromFlag(const std::string& path) {
  if (path.empty()) return MeasuredHardwareProfile();
  absl::StatusOr<HardwareProfile> loaded = LoadHardwareProfile(path);
  if (!loaded.ok()) return WithContext(loaded.status(), "--profile");
  return loaded;
}

bool WantsPlanner(absl::string_view mesh_text, absl::string_view layout_text) {
  return layout_text == "auto" || absl::StartsWith(mesh_text, "auto");
}

absl::StatusOr<MeshAndRules> ChooseMeshAndRules(const Graph& graph, absl::string_view mesh_text,
                                                absl::string_view layout_text,
                                                const PlanFlags& plan, std::ostream& report) {
  if (!WantsPlanner(mesh_text, layout_text)) return ParseMeshAndRules(mesh_text, layout_text);
  std::vector<Mesh> meshes;
  if (absl::StartsWith(mesh_text, "auto")) {
    absl::StatusOr<int> workers = ParseAutoMesh(mesh_text);
    if (!workers.ok()) return WithContext(workers.status(), "--mesh");
    if (layout_text != "auto") {
      return absl::InvalidArgumentError(
          absl::StrCat("--mesh ", mesh_text,
                       " lets the planner choose the mesh, so it must choose the rules "
                       "too: give --layout auto (rules name mesh dims, which depend on the mesh)"));
    }
    ASSIGN_OR_RETURN(meshes, MeshesFor(*workers));
  } else {
    absl::StatusOr<Mesh> mesh = Mesh::Parse(mesh_text);
    if (!mesh.ok()) return WithContext(mesh.status(), "--mesh");
    meshes.push_back(*std::move(mesh));
  }
  PlanOptions options;
  if (plan.profile != nullptr) {
    options.profile = *plan.profile;
  } else {
    ASSIGN_OR_RETURN(options.profile, ProfileFromFlag(plan.profile_path));
  }
  options.memory_limit_bytes = plan.memory_limit_bytes;
  options.fetches = plan.fetches;
  absl::StatusOr<Plan> chosen = PlanLayout(graph, meshes, options);
  if (!chosen.ok()) return WithContext(chosen.status(), "--layout auto");
  report << ExplainPlan(*chosen);
  return MeshAndRules{chosen->best[0].mesh, chosen->best[0].rules};
}

}  // namespace meshrt
