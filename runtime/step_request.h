// StepRequest: what one worker is asked to run in one RunStep call, the same struct on every hop
// (Coordinator -> WorkerClient -> the wire's v1::RunStepRequest -> GrpcWorkerService -> Worker).
// The tensors travel beside it, in each hop's own form (slices of the whole feeds and places in
// the whole fetches on the coordinator; received tensors on the worker). Plain data; no gRPC.
#ifndef MESHRT_RUNTIME_STEP_REQUEST_H_
#define MESHRT_RUNTIME_STEP_REQUEST_H_

#include <cstdint>
#include <string>
#include <vector>

namespace meshrt {

struct StepRequest {
  std::string session;
  // The number of the first step run (the session's steps count from 1).
  int64_t step = 0;
  // Repetitions, each a step of its own (at least one runs).
  int64_t num_steps = 1;
  // The tensors whose slices this worker returns.
  std::vector<std::string> fetches;
  // The step's whole fetch list, the same on every worker: what each repetition computes (with
  // the variable updates). Empty: `fetches`.
  std::vector<std::string> step_fetches;
  // Repetitions trace_first..trace_last (1-based, inclusive; 0: none) record their timelines.
  int64_t trace_first = 0;
  int64_t trace_last = 0;
};

}  // namespace meshrt

#endif  // MESHRT_RUNTIME_STEP_REQUEST_H_
