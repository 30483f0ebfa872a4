// The default hardware profile of `meshrt explain`: measured once in this process, quickly.
#ifndef MESHRT_CLIENT_HARDWARE_PROBE_H_
#define MESHRT_CLIENT_HARDWARE_PROBE_H_

#include "core/planning/cost_model.h"

namespace meshrt {

// Measures, in well under a second, on the calling thread: sgemm throughput (kernels/blas.h
// GetBlas()) of a small (64^3) and a large (384^3) product, an elementwise multiply-add rate on a
// cache-resident buffer, and memcpy bandwidth over 32 MiB. The collective α/β are the documented
// placeholders (core/planning/cost_model.h DefaultCollectiveLinks; collectives_measured false) until
// `meshrt calibrate` exists. Logs one line with the figures. The first call measures; later calls
// return the same profile. Thread-safe.
const HardwareProfile& MeasuredHardwareProfile();

}  // namespace meshrt

#endif  // MESHRT_CLIENT_HARDWARE_PROBE_H_
