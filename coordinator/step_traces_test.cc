// CompleteStepTraces: names and places from the program and the mesh, and each collective's wait
// for the last member of its group, on a shared clock only.
#include "coordinator/step_traces.h"

#include <string>
#include <vector>

#include "core/testing/test_util.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "util/logging.h"

namespace meshrt {
namespace {

v1::Program TwoInstructions() {
  v1::Program program;
  MESHRT_CHECK(google::protobuf::TextFormat::ParseFromString(R"pb(
    instructions { source_op: "layer1" local { type: "einsum" } }
    instructions { source_op: "grad/w" collective { kind: ALLREDUCE mesh_axes: 0 } }
  )pb", &program), "bad program text");
  return program;
}

v1::TraceEvent Event(v1::TraceEvent::Kind kind, int instruction, int64_t start, int64_t dur) {
  v1::TraceEvent e;
  e.set_kind(kind);
  e.set_instruction(instruction);
  e.set_start_us(start);
  e.set_dur_us(dur);
  return e;
}

// Processor p's step 5, started at `origin` on `clock`: the einsum, then the allreduce entered at
// origin + `entry` for 100 us.
v1::StepTrace Trace(const std::string& clock, int64_t origin, int64_t entry) {
  v1::StepTrace t;
  t.set_step(5);
  t.set_clock(clock);
  t.set_start_us(origin);
  t.set_dur_us(entry + 100);
  *t.add_events() = Event(v1::TraceEvent::OP, 0, 0, entry);
  *t.add_events() = Event(v1::TraceEvent::COLLECTIVE, 1, entry, 100);
  return t;
}

const v1::TraceEvent& Collective(const v1::StepTrace& t) { return t.events(1); }

TEST(StepTracesTest, NamesPlacesAndWaitsForTheLastMemberOfEachGroup) {
  // rows:2,cols:2; the allreduce is over rows: groups {0, 2} and {1, 3}.
  const Mesh mesh = *Mesh::Parse("rows:2,cols:2");
  std::vector<std::vector<v1::StepTrace>> in(4);
  in[0].push_back(Trace("boot:a", 1000, 10));  // enters at 1010
  in[1].push_back(Trace("boot:a", 1000, 50));  // 1050
  in[2].push_back(Trace("boot:a", 1030, 20));  // 1050: 40 us after processor 0
  in[3].push_back(Trace("boot:a", 990, 40));   // 1030: 20 us before processor 1
  const std::vector<v1::StepTrace> out =
      CompleteStepTraces(TwoInstructions(), mesh, {7, 8, 9, 10}, std::move(in));
  ASSERT_EQ(out.size(), 4u);
  for (int p = 0; p < 4; ++p) {
    EXPECT_EQ(out[p].processor(), p);
    EXPECT_EQ(out[p].worker_id(), 7 + p);
    EXPECT_EQ(out[p].mesh(), "rows:2,cols:2");
    ASSERT_EQ(out[p].coordinate_size(), 2);
    EXPECT_EQ(out[p].coordinate(0), p / 2);
    EXPECT_EQ(out[p].coordinate(1), p % 2);
    EXPECT_EQ(out[p].events(0).name(), "layer1");
    EXPECT_EQ(out[p].events(0).what(), "local op 'einsum'");
    EXPECT_EQ(Collective(out[p]).name(), "grad/w");
    EXPECT_EQ(Collective(out[p]).what(), "collective ALLREDUCE over [rows]");
  }
  EXPECT_EQ(Collective(out[0]).wait_us(), 40);
  EXPECT_EQ(Collective(out[2]).wait_us(), 0);
  EXPECT_EQ(Collective(out[1]).wait_us(), 0);
  EXPECT_EQ(Collective(out[3]).wait_us(), 20);
}

TEST(StepTracesTest, WaitIsUnknownAcrossClocksAndCappedByTheCall) {
  const Mesh mesh = *Mesh::Parse("x:2");
  std::vector<std::vector<v1::StepTrace>> in(2);
  in[0].push_back(Trace("boot:a", 0, 10));
  in[1].push_back(Trace("boot:b", 0, 20));
  std::vector<v1::StepTrace> out = CompleteStepTraces(TwoInstructions(), mesh, {0, 1}, in);
  EXPECT_EQ(Collective(out[0]).wait_us(), -1);
  EXPECT_EQ(Collective(out[1]).wait_us(), -1);

  in[1][0].set_clock("boot:a");
  in[1][0].set_start_us(1000);  // enters 990 us after processor 0, whose call lasts 100 us
  out = CompleteStepTraces(TwoInstructions(), mesh, {0, 1}, in);
  EXPECT_EQ(Collective(out[0]).wait_us(), 100);
  EXPECT_EQ(Collective(out[1]).wait_us(), 0);
}

TEST(StepTracesTest, OrdersByStepThenProcessor) {
  const Mesh mesh = *Mesh::Parse("x:2");
  std::vector<std::vector<v1::StepTrace>> in(2);
  for (int p = 0; p < 2; ++p) {
    for (int step : {3, 4}) {
      in[p].push_back(Trace("boot:a", 0, 10));
      in[p].back().set_step(step);
    }
  }
  const std::vector<v1::StepTrace> out = CompleteStepTraces(TwoInstructions(), mesh, {0, 1}, in);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0].step(), 3);
  EXPECT_EQ(out[0].processor(), 0);
  EXPECT_EQ(out[1].step(), 3);
  EXPECT_EQ(out[1].processor(), 1);
  EXPECT_EQ(out[2].step(), 4);
  EXPECT_EQ(Collective(out[3]).wait_us(), 0);  // equal entries
}

}  // namespace
}  // namespace meshrt
