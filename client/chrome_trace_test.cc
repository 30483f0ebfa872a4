// The Chrome trace writer: a parseable JSON document (checked with /usr/bin/python3's json module)
// with one process per rank, the step spans, the events inside them and the wait/transfer split.
#include "client/chrome_trace.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "core/testing/test_util.h"
#include "gtest/gtest.h"

namespace meshrt {
namespace {

v1::TraceEvent Event(v1::TraceEvent::Kind kind, v1::TraceEvent::Thread thread, int64_t start,
                     int64_t dur, const std::string& name, const std::string& what) {
  v1::TraceEvent e;
  e.set_kind(kind);
  e.set_thread(thread);
  e.set_start_us(start);
  e.set_dur_us(dur);
  e.set_name(name);
  e.set_what(what);
  return e;
}

v1::StepTrace Step(int64_t step, int rank, int64_t start, const std::string& clock) {
  v1::StepTrace t;
  t.set_step(step);
  t.set_processor(rank);
  t.add_coordinate(rank);
  t.set_worker_id(10 + rank);
  t.set_mesh("x:2");
  t.set_clock(clock);
  t.set_start_us(start);
  t.set_dur_us(500);
  // A name that needs escaping.
  *t.add_events() = Event(v1::TraceEvent::OP, v1::TraceEvent::STEP, 0, 100, "layer\"1\\a",
                          "local op 'einsum'");
  v1::TraceEvent c = Event(v1::TraceEvent::COLLECTIVE, v1::TraceEvent::COMM, 100, 300, "grad/w",
                           "collective ALLREDUCE over [x]");
  c.set_bytes(4096);
  c.set_fused(2);
  c.set_wait_us(rank == 0 ? 120 : 0);
  *t.add_events() = c;
  *t.add_events() = Event(v1::TraceEvent::WAIT, v1::TraceEvent::STEP, 110, 290, "grad/w",
                          "waiting for collective ALLREDUCE over [x]");
  return t;
}

// Runs a python3 check over the file `path`; true when it exits 0.
bool PythonCheck(const std::string& path, const std::string& script) {
  const std::string py = testing::TempDir() + "/check.py";
  std::ofstream(py) << script;
  const std::string cmd = "/usr/bin/python3 " + py + " " + path;
  return std::system(cmd.c_str()) == 0;
}

TEST(ChromeTraceTest, WritesJsonThatParsesWithOneProcessPerRankAndEveryEvent) {
  const std::string path = testing::TempDir() + "/trace.json";
  // Steps 3 and 4 of two ranks on one clock; step 3 of rank 1 given twice (the last wins).
  std::vector<v1::StepTrace> traces = {Step(3, 0, 1000, "boot:a"), Step(3, 1, 1040, "boot:a"),
                                       Step(4, 0, 2000, "boot:a"), Step(4, 1, 2010, "boot:a"),
                                       Step(3, 1, 1020, "boot:a")};
  ASSERT_OK(WriteChromeTrace(path, traces));
  EXPECT_TRUE(PythonCheck(path, R"py(
import json, sys
d = json.load(open(sys.argv[1]))
assert d["displayTimeUnit"] == "ms"
ev = d["traceEvents"]
names = {e["pid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
assert names == {1: "rank 0 (x=0) worker 10", 2: "rank 1 (x=1) worker 11"}, names
steps = sorted((e["pid"], e["name"], e["ts"]) for e in ev if e.get("cat") == "step")
# the earliest start is 0; rank 1's step 3 is the one given last (start 1020)
assert steps == [(1, "step 3", 0), (1, "step 4", 1000), (2, "step 3", 20), (2, "step 4", 1010)], steps
ops = [e for e in ev if e.get("cat") == "op"]
assert len(ops) == 4 and ops[0]["name"] == 'layer"1\\a', ops[0]
coll = [e for e in ev if e.get("cat") == "collective"]
assert len(coll) == 4 and all(e["name"] == "ALLREDUCE grad/w" and e["tid"] == 2 for e in coll)
assert all(e["args"]["bytes"] == 4096 and e["args"]["fused"] == 2 for e in coll)
r0 = [e for e in coll if e["pid"] == 1]
assert all(e["args"]["wait_us"] == 120 and e["args"]["transfer_us"] == 180 for e in r0)
waits = [e for e in ev if e.get("cat") == "collective.wait"]
transfers = [e for e in ev if e.get("cat") == "collective.transfer"]
assert len(waits) == 2 and all(e["pid"] == 1 and e["dur"] == 120 for e in waits)  # rank 1 waited 0
assert len(transfers) == 4
for t in transfers:
    parent = [c for c in coll if c["pid"] == t["pid"] and c["ts"] <= t["ts"] and
              t["ts"] + t["dur"] == c["ts"] + c["dur"]]
    assert parent, t
assert len([e for e in ev if e.get("cat") == "wait"]) == 4
# every event inside its step span
spans = {(e["pid"], e["ts"]): e for e in ev if e.get("cat") == "step"}
for e in ev:
    if e["ph"] != "X" or e["cat"] == "step":
        continue
    assert any(p == e["pid"] and s <= e["ts"] and e["ts"] + e["dur"] <= s + sp["dur"]
               for (p, s), sp in spans.items()), e
assert "one monotonic clock" in d["otherData"]["clocks"]
)py"));
}

TEST(ChromeTraceTest, RanksOnAnotherClockStartEachStepWithTheFirstRank) {
  const std::string path = testing::TempDir() + "/two_clocks.json";
  v1::StepTrace other = Step(3, 1, 999999, "boot:b");
  other.mutable_events(1)->set_wait_us(-1);
  ASSERT_OK(WriteChromeTrace(path, {Step(3, 0, 1000, "boot:a"), other}));
  EXPECT_TRUE(PythonCheck(path, R"py(
import json, sys
d = json.load(open(sys.argv[1]))
ev = d["traceEvents"]
steps = sorted((e["pid"], e["ts"]) for e in ev if e.get("cat") == "step")
assert steps == [(1, 0), (2, 0)], steps
c = [e for e in ev if e.get("cat") == "collective" and e["pid"] == 2][0]
assert c["args"]["wait_us"].startswith("unknown"), c
assert not [e for e in ev if e.get("cat") == "collective.wait" and e["pid"] == 2]
assert "not synchronised" in d["otherData"]["clocks"]
)py"));
}

TEST(ChromeTraceTest, ParsesTraceSteps) {
  ASSERT_OK_AND_ASSIGN(auto range, ParseTraceSteps("2:5"));
  EXPECT_EQ(range.first, 2);
  EXPECT_EQ(range.second, 5);
  ASSERT_OK_AND_ASSIGN(range, ParseTraceSteps("7"));
  EXPECT_EQ(range.first, 7);
  EXPECT_EQ(range.second, 7);
  for (const char* bad : {"5:2", "0:3", "a:b", "1:2:3", "", "-1:2"}) {
    EXPECT_TRUE(StatusIs(ParseTraceSteps(bad).status(), absl::StatusCode::kInvalidArgument,
                         {"--trace_steps"}))
        << bad;
  }
}

TEST(ChromeTraceTest, AnUnwritableFileIsRefusedByName) {
  const absl::Status s = CheckTraceFileWritable("/nonexistent-dir/trace.json");
  EXPECT_TRUE(StatusIs(s, absl::StatusCode::kPermissionDenied, {"/nonexistent-dir/trace.json"}));
  EXPECT_TRUE(StatusIs(WriteChromeTrace("/nonexistent-dir/trace.json", {}),
                       absl::StatusCode::kPermissionDenied, {"/nonexistent-dir/trace.json"}));
  ASSERT_OK(CheckTraceFileWritable(testing::TempDir() + "/ok.json"));
}

}  // namespace
}  // namespace meshrt
