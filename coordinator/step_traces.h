// Completing the workers' step timelines (runtime/step_trace.h) for the client: names from the
// program, each processor's place in the mesh, and each collective's wait for its peers.
//
// Waiting vs transfer: a COLLECTIVE event's wait_us is the time from this processor entering the
// collective until the last member of its group (the processors whose coordinates differ from
// this one only along the collective's mesh axes) entered the same instruction in the same step:
// no member can hold the result before then, so that much of the call was spent waiting for
// peers, however the communicator moves the data. The rest (dur_us - wait_us) is transfer:
// moving and reducing the data, including waiting for data in flight. It is computed only where
// every member's trace reads the same monotonic clock (StepTrace.clock: workers on one host);
// otherwise wait_us is -1 (unknown): processors on different hosts are not clock-synchronised.
#ifndef MESHRT_COORDINATOR_STEP_TRACES_H_
#define MESHRT_COORDINATOR_STEP_TRACES_H_

#include <string>
#include <vector>

#include "core/ir/mesh.h"
#include "proto/program.pb.h"
#include "proto/session.pb.h"

namespace meshrt {

// `per_processor[p]`: processor p's traces of one request (one per traced repetition, in order),
// `worker_ids[p]` its worker. Returns them ordered by step, then processor, each with processor,
// coordinate, worker_id and mesh set, every event's name (the instruction's source_op) and what
// (its kind: "local op 'einsum'", "collective ALLREDUCE over [rows]"; a WAIT: "waiting for
// <the collective's>"), and every collective's wait_us (above). An event whose instruction is
// out of the program's range keeps empty names (a mismatched program is not an error here).
std::vector<v1::StepTrace> CompleteStepTraces(
    const v1::Program& program, const Mesh& mesh, const std::vector<int>& worker_ids,
    std::vector<std::vector<v1::StepTrace>> per_processor);

}  // namespace meshrt

#endif  // MESHRT_COORDINATOR_STEP_TRACES_H_
