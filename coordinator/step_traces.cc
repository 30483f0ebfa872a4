#include "coordinator/step_traces.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace meshrt {
namespace {

std::string Describe(const v1::Instruction& instr, const Mesh& mesh) {
  auto axes = [&](const std::vector<int>& list) {
    std::vector<std::string> names;
    for (int a : list) {
      names.push_back(a >= 0 && a < mesh.ndims() ? mesh.dims()[a].name : absl::StrCat(a));
    }
    return absl::StrCat("[", absl::StrJoin(names, ","), "]");
  };
  switch (instr.kind_case()) {
    case v1::Instruction::kLocal:
      return absl::StrCat("local op '", instr.local().type(), "'");
    case v1::Instruction::kLocalSlice:
      return absl::StrCat("local_slice of axis ", instr.local_slice().axis(), " over ",
                          axes({instr.local_slice().mesh_axis()}));
    case v1::Instruction::kCollective:
      return absl::StrCat("collective ",
                          v1::Collective::Kind_Name(instr.collective().kind()), " over ",
                          axes({instr.collective().mesh_axes().begin(),
                                instr.collective().mesh_axes().end()}));
    case v1::Instruction::KIND_NOT_SET:
      break;
  }
  return "instruction without a kind";
}

}  // namespace

std::vector<v1::StepTrace> CompleteStepTraces(
    const v1::Program& program, const Mesh& mesh, const std::vector<int>& worker_ids,
    std::vector<std::vector<v1::StepTrace>> per_processor) {
  const int n = static_cast<int>(per_processor.size());
  std::vector<v1::StepTrace*> all;
  for (int p = 0; p < n; ++p) {
    const std::vector<int64_t> coord =
        p < mesh.num_processors() ? mesh.Coordinate(p) : std::vector<int64_t>{};
    for (v1::StepTrace& t : per_processor[p]) {
      t.set_processor(p);
      t.clear_coordinate();
      for (int64_t c : coord) t.add_coordinate(c);
      if (p < static_cast<int>(worker_ids.size())) t.set_worker_id(worker_ids[p]);
      t.set_mesh(mesh.ToString());
      for (v1::TraceEvent& e : *t.mutable_events()) {
        if (e.instruction() < 0 || e.instruction() >= program.instructions_size()) continue;
        const v1::Instruction& instr = program.instructions(e.instruction());
        e.set_name(instr.source_op());
        e.set_what(e.kind() == v1::TraceEvent::WAIT
                       ? absl::StrCat("waiting for ", Describe(instr, mesh))
                       : Describe(instr, mesh));
      }
      all.push_back(&t);
    }
  }
  // Entries into each collective: (step, instruction) -> processor -> (clock, absolute start).
  struct Entry {
    const std::string* clock;
    int64_t start_us;
  };
  std::map<std::pair<int64_t, int>, std::map<int, Entry>> entries;
  for (const v1::StepTrace* t : all) {
    for (const v1::TraceEvent& e : t->events()) {
      if (e.kind() != v1::TraceEvent::COLLECTIVE) continue;
      entries[{t->step(), e.instruction()}][t->processor()] =
          Entry{&t->clock(), t->start_us() + e.start_us()};
    }
  }
  for (v1::StepTrace* t : all) {
    const std::vector<int64_t> coord(t->coordinate().begin(), t->coordinate().end());
    for (v1::TraceEvent& e : *t->mutable_events()) {
      if (e.kind() != v1::TraceEvent::COLLECTIVE) continue;
      e.set_wait_us(-1);
      if (e.instruction() < 0 || e.instruction() >= program.instructions_size() ||
          static_cast<int>(coord.size()) != mesh.ndims()) {
        continue;
      }
      const v1::Collective& c = program.instructions(e.instruction()).collective();
      std::vector<bool> along(mesh.ndims(), false);
      for (int a : c.mesh_axes()) {
        if (a >= 0 && a < mesh.ndims()) along[a] = true;
      }
      const std::map<int, Entry>& members = entries[{t->step(), e.instruction()}];
      const int64_t mine = t->start_us() + e.start_us();
      int64_t last = mine;
      bool known = true;
      for (int q = 0; q < mesh.num_processors() && known; ++q) {
        const std::vector<int64_t> other = mesh.Coordinate(q);
        bool member = true;
        for (int a = 0; a < mesh.ndims(); ++a) member = member && (along[a] || other[a] == coord[a]);
        if (!member) continue;
        auto m = members.find(q);
        known = m != members.end() && *m->second.clock == t->clock();
        if (known) last = std::max(last, m->second.start_us);
      }
      if (known) e.set_wait_us(std::min(last - mine, e.dur_us()));
    }
  }
  std::vector<v1::StepTrace> out;
  for (v1::StepTrace* t : all) out.push_back(std::move(*t));
  std::stable_sort(out.begin(), out.end(), [](const v1::StepTrace& a, const v1::StepTrace& b) {
    return a.step() != b.step() ? a.step() < b.step() : a.processor() < b.processor();
  });
  return out;
}

}  // namespace meshrt
