// The version every meshrt binary reports with --version (and the Python package as
// meshrt.__version__). Bumped by hand when a release is cut.
#ifndef MESHRT_UTIL_VERSION_H_
#define MESHRT_UTIL_VERSION_H_

namespace meshrt {

inline constexpr char kMeshrtVersion[] = "0.1.0";

}  // namespace meshrt

#endif  // MESHRT_UTIL_VERSION_H_
