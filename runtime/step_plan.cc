#include "runtime/step_plan.h"

#include <algorithm>
#include <utility>

namespace meshrt {
namespace {

// Buffer indices of one program: the plan's vectors have one entry per valid buffer.
struct Buffers {
  int n;
  bool Valid(int b) const { return b >= 0 && b < n; }
};

// Whether output `name` is fetched; `key`: the fetched names, sorted without repeats.
bool Fetched(const std::vector<std::string>& key, const std::string& name) {
  return std::binary_search(key.begin(), key.end(), name);
}

// Backwards from what the step must produce: an instruction runs when a later running one (or the
// step's result) needs what it writes. Conservative for a buffer written twice: every writer of a
// needed buffer runs.
std::vector<bool> PrunedRuns(const v1::Program& program, const std::vector<std::string>& key,
                             Buffers buffers) {
  std::vector<bool> needed(buffers.n, false);
  auto need = [&](int b) {
    if (buffers.Valid(b)) needed[b] = true;
  };
  for (const v1::ProgramTensor& t : program.inputs()) need(t.buffer());
  for (const v1::ProgramTensor& t : program.outputs()) {
    if (Fetched(key, t.name())) need(t.buffer());
  }
  for (const v1::ProgramVariable& v : program.variables()) need(v.update_buffer());
  std::vector<bool> runs(program.instructions_size(), false);
  for (int i = program.instructions_size() - 1; i >= 0; --i) {
    const v1::Instruction& instr = program.instructions(i);
    if (!buffers.Valid(instr.output()) || !needed[instr.output()]) continue;
    runs[i] = true;
    for (int b : instr.inputs()) need(b);
    if (instr.has_predicate()) need(instr.predicate());
  }
  return runs;
}

// Running instructions with a predicate that no fetched output depends on: they may be skipped.
// A fetched output's producers run whatever their predicate, so every fetched value is exact.
std::vector<bool> Guarded(const v1::Program& program, const std::vector<std::string>& key,
                          const std::vector<bool>& runs, Buffers buffers) {
  std::vector<bool> fetched(buffers.n, false);
  for (const v1::ProgramTensor& t : program.outputs()) {
    if (buffers.Valid(t.buffer()) && Fetched(key, t.name())) fetched[t.buffer()] = true;
  }
  std::vector<bool> guarded(program.instructions_size(), false);
  for (int i = program.instructions_size() - 1; i >= 0; --i) {
    const v1::Instruction& instr = program.instructions(i);
    if (!runs[i] || !buffers.Valid(instr.output())) continue;
    if (!fetched[instr.output()]) {
      guarded[i] = instr.has_predicate();
      continue;
    }
    for (int b : instr.inputs()) {
      if (buffers.Valid(b)) fetched[b] = true;
    }
  }
  return guarded;
}

// What each running instruction reads and writes, its fused instructions' included.
void ReadsAndWrites(const v1::Program& program, StepPlan* plan) {
  const int count = program.instructions_size();
  plan->reads.assign(count, {});
  plan->writes.assign(count, {});
  for (int i = 0; i < count; ++i) {
    if (!plan->runs[i]) continue;
    const v1::Instruction& instr = program.instructions(i);
    plan->reads[i].assign(instr.inputs().begin(), instr.inputs().end());
    plan->writes[i].push_back(instr.output());
    auto fused = plan->fused.find(i);
    if (fused == plan->fused.end()) continue;
    for (int op : fused->second.ops()) {
      if (op < 0) continue;
      const v1::Instruction& f = program.instructions(op);
      plan->reads[i].insert(plan->reads[i].end(), f.inputs().begin(), f.inputs().end());
      plan->writes[i].push_back(f.output());
    }
  }
}

// Last readers, and the due positions of deferred allreduces (their first running reader), whose
// inputs are pinned: they are read when the bucket runs, maybe after their last reader.
void ReadersAndDeferrals(const v1::Program& program, Buffers buffers, StepPlan* plan) {
  const int count = program.instructions_size();
  plan->last_reader.assign(buffers.n, -1);
  std::vector<int> first_reader(buffers.n, count);
  for (int i = 0; i < count; ++i) {
    for (int b : plan->reads[i]) {
      if (!buffers.Valid(b)) continue;
      plan->last_reader[b] = i;
      if (first_reader[b] == count) first_reader[b] = i;
    }
  }
  plan->due.assign(count, -1);
  plan->deferred_bytes.assign(count, 0);
  for (int i = 0; i < count; ++i) {
    const v1::Instruction& instr = program.instructions(i);
    const int64_t bytes = plan->runs[i] ? DeferredAllReduceBytes(instr, buffers.n) : 0;
    if (bytes == 0) continue;  // malformed allreduces run in place and report their error there
    plan->due[i] = first_reader[instr.output()];
    plan->deferred_bytes[i] = bytes;
    plan->pinned[instr.inputs(0)] = true;
  }
}

}  // namespace

bool StepPlan::Dead(int buffer, int instruction) const {
  return buffer >= 0 && buffer < static_cast<int>(last_reader.size()) && !pinned[buffer] &&
         last_reader[buffer] == instruction;
}

std::vector<std::string> StepPlanKey(const std::vector<std::string>* fetches) {
  if (fetches == nullptr) return {"\x01all"};
  std::vector<std::string> key = *fetches;
  std::sort(key.begin(), key.end());
  key.erase(std::unique(key.begin(), key.end()), key.end());
  return key;
}

StepPlan PlanStep(const v1::Program& program, const std::vector<std::string>* fetches) {
  const Buffers buffers{std::max(program.num_buffers(), 0)};
  const int count = program.instructions_size();
  StepPlan plan;
  if (fetches == nullptr) {
    plan.runs.assign(count, true);
    plan.guarded.assign(count, false);
    plan.pinned = StepPinnedBuffers(program, nullptr, plan.runs);
  } else {
    const std::vector<std::string> key = StepPlanKey(fetches);
    plan.runs = PrunedRuns(program, key, buffers);
    // Never freed early (and never fused away): the set the cost model derives the same way.
    plan.pinned = StepPinnedBuffers(program, &key, plan.runs);
    plan.guarded = Guarded(program, key, plan.runs, buffers);
    plan.fused = FindFusions(program, plan.pinned, &plan.runs);
    for (const auto& [s, f] : plan.fused) {
      plan.fused_instructions.emplace(s, FusedInstruction(program, s, f));
    }
  }
  ReadsAndWrites(program, &plan);
  ReadersAndDeferrals(program, buffers, &plan);
  return plan;
}

}  // namespace meshrt
