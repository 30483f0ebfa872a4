#include "kernels/blas_probe.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"

extern char** environ;

namespace meshrt {
namespace kernels {
namespace {

constexpr char kProbeCoreVar[] = "MESHRT_BLAS_PROBE_CORE";
constexpr char kProbeLibraryVar[] = "MESHRT_BLAS_PROBE_LIBRARY";
constexpr int kTimedSize = 1024;

// ---- the child: runs from a static initializer, before main(), so: libc and the STL only ----

using RawSgemm = void (*)(CBLAS_ORDER, CBLAS_TRANSPOSE, CBLAS_TRANSPOSE, int, int, int, float,
                          const float*, int, const float*, int, float, float*, int);

// Worst |C - ref| / (|alpha| * sum_p |a||b| + |beta * C0|) over a product, the reference in double.
double CheckedError(RawSgemm sgemm, bool ta, bool tb, int m, int n, int k, float alpha, float beta,
                    int pad, std::mt19937* rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const int a_rows = ta ? k : m, a_cols = ta ? m : k;
  const int b_rows = tb ? n : k, b_cols = tb ? k : n;
  const int lda = a_cols + pad, ldb = b_cols + pad, ldc = n + pad;  // strided: a sub-matrix
  std::vector<float> a(static_cast<size_t>(a_rows) * lda), b(static_cast<size_t>(b_rows) * ldb),
      c(static_cast<size_t>(m) * ldc);
  for (float& x : a) x = u(*rng);
  for (float& x : b) x = u(*rng);
  for (float& x : c) x = u(*rng);
  const std::vector<float> c0 = c;
  sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k,
        alpha, a.data(), lda, b.data(), ldb, beta, c.data(), ldc);
  double worst = 0;
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double ref = 0, scale = 0;
      for (int p = 0; p < k; ++p) {
        const double av = ta ? a[static_cast<size_t>(p) * lda + i] : a[static_cast<size_t>(i) * lda + p];
        const double bv = tb ? b[static_cast<size_t>(j) * ldb + p] : b[static_cast<size_t>(p) * ldb + j];
        ref += av * bv;
        scale += std::abs(av * bv);
      }
      const double c_in = c0[static_cast<size_t>(i) * ldc + j];
      ref = alpha * ref + beta * c_in;
      scale = std::abs(alpha) * scale + std::abs(beta * c_in) + 1e-30;
      worst = std::max(worst, std::abs(c[static_cast<size_t>(i) * ldc + j] - ref) / scale);
    }
  }
  // Padding columns must be untouched.
  for (int i = 0; i < m; ++i) {
    for (int j = n; j < ldc; ++j) {
      if (c[static_cast<size_t>(i) * ldc + j] != c0[static_cast<size_t>(i) * ldc + j]) return 1e9;
    }
  }
  return worst;
}

void RunProbeChild(const char* library) {
  void* handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    std::printf("error=cannot load %s\n", library);
    return;
  }
  auto sgemm = reinterpret_cast<RawSgemm>(dlsym(handle, "cblas_sgemm"));
  auto corename = reinterpret_cast<char* (*)()>(dlsym(handle, "openblas_get_corename"));
  auto threads = reinterpret_cast<void (*)(int)>(dlsym(handle, "openblas_set_num_threads"));
  if (sgemm == nullptr || corename == nullptr || threads == nullptr) {
    std::printf("error=not OpenBLAS\n");
    return;
  }
  threads(1);
  std::mt19937 rng(12345);
  struct Shape {
    int m, n, k;
    bool ta, tb;
    float alpha, beta;
    int pad;
  };
  const Shape shapes[] = {
      {1, 1, 1, false, false, 1, 0, 0},      {7, 13, 5, false, false, 1, 0, 3},
      {33, 17, 129, true, false, 1, 0, 0},   {33, 17, 129, false, true, 0.5f, 1, 2},
      {33, 17, 129, true, true, 1, 0, 1},    {64, 64, 64, false, false, 1, 1, 0},
      {256, 96, 300, false, false, 1, 0, 0}, {127, 255, 63, false, true, -2, 0.25f, 5},
      {8, 1024, 16, false, false, 1, 0, 0},  {1024, 8, 16, true, false, 1, 0, 0},
  };
  double worst = 0;
  for (int batch = 0; batch < 3; ++batch) {  // repeated calls, as batched einsums make
    for (const Shape& s : shapes) {
      worst = std::max(worst, CheckedError(sgemm, s.ta, s.tb, s.m, s.n, s.k, s.alpha, s.beta,
                                           s.pad, &rng));
    }
  }
  const bool correct = worst <= 1e-5;
  const int n = kTimedSize;
  std::vector<float> a(static_cast<size_t>(n) * n, 0.5f), b(a), c(a);
  double best = 1e30;
  for (int rep = 0; rep < 4; ++rep) {  // the first is a warm-up
    const auto start = std::chrono::steady_clock::now();
    sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n,
          0.0f, c.data(), n);
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (rep > 0) best = std::min(best, s);
  }
  const char* name = corename();
  std::printf("corename=%s correct=%d error=%.3g gflops=%.1f\n", name != nullptr ? name : "?",
              correct ? 1 : 0, worst, 2.0 * n * n * n / best / 1e9);
}

// Before main(): a child started by MeasureCores measures and exits.
struct ProbeChildHook {
  ProbeChildHook() {
    const char* core = std::getenv(kProbeCoreVar);
    const char* library = std::getenv(kProbeLibraryVar);
    if (core == nullptr || library == nullptr) return;
    RunProbeChild(library);
    std::fflush(stdout);
    _exit(0);
  }
};
ProbeChildHook probe_child_hook;

// ---- the parent ----

// One child: its stdout line, or an error.
CoreMeasurement MeasureOne(const std::string& library, const std::string& core,
                           absl::Duration timeout) {
  CoreMeasurement m;
  m.requested = core;
  // The environment, built before fork (the child only execs).
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string var = *e;
    if (absl::StartsWith(var, "OPENBLAS_CORETYPE=") || absl::StartsWith(var, "OPENBLAS_NUM_THREADS=") ||
        absl::StartsWith(var, "MESHRT_BLAS_PROBE_")) {
      continue;
    }
    env_strings.push_back(var);
  }
  env_strings.push_back(absl::StrCat("OPENBLAS_CORETYPE=", core));
  env_strings.push_back("OPENBLAS_NUM_THREADS=1");
  env_strings.push_back(absl::StrCat(kProbeCoreVar, "=", core));
  env_strings.push_back(absl::StrCat(kProbeLibraryVar, "=", library));
  std::vector<char*> envp;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  char exe[] = "/proc/self/exe";
  char* argv[] = {exe, nullptr};
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    m.error = absl::StrCat("pipe: ", std::strerror(errno));
    return m;
  }
  const int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
  const pid_t pid = fork();
  if (pid < 0) {
    m.error = absl::StrCat("fork: ", std::strerror(errno));
    close(fds[0]);
    close(fds[1]);
    if (devnull >= 0) close(devnull);
    return m;
  }
  if (pid == 0) {
    dup2(fds[1], 1);
    if (devnull >= 0) dup2(devnull, 2);
    execve(exe, argv, envp.data());
    _exit(127);
  }
  close(fds[1]);
  if (devnull >= 0) close(devnull);
  std::string out;
  const absl::Time deadline = absl::Now() + timeout;
  bool timed_out = false;
  while (true) {
    const int64_t left = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (left <= 0) {
      timed_out = true;
      break;
    }
    struct pollfd p = {fds[0], POLLIN, 0};
    const int r = poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    char buf[512];
    const ssize_t got = read(fds[0], buf, sizeof(buf));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    out.append(buf, static_cast<size_t>(got));
  }
  close(fds[0]);
  if (timed_out) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    m.error = absl::StrCat("timed out after ", absl::FormatDuration(timeout));
    return m;
  }
  if (WIFSIGNALED(status)) {
    m.error = absl::StrCat("the probe died of signal ", WTERMSIG(status),
                           WTERMSIG(status) == SIGILL ? " (an instruction this CPU lacks)" : "");
    return m;
  }
  char name[64] = {0};
  int correct = 0;
  double error = 0, gflops = 0;
  if (std::sscanf(out.c_str(), "corename=%63s correct=%d error=%lf gflops=%lf", name, &correct,
                  &error, &gflops) != 4) {
    m.error = out.empty() ? std::string("the probe printed nothing")
                          : absl::StrCat("the probe said: ", out.substr(0, out.find('\n')));
    return m;
  }
  m.corename = name;
  m.correct = correct != 0;
  m.gflops = gflops;
  if (!m.correct) m.error = absl::StrFormat("wrong results (relative error %.3g)", error);
  return m;
}

// The library's resolved file, size and mtime: a new OpenBLAS is a new cache entry.
std::string LibraryIdentity(const std::string& library) {
  void* handle = dlopen(library.c_str(), RTLD_LAZY | RTLD_NOLOAD);
  std::string path = library;
  if (handle != nullptr) {
    Dl_info info;
    void* sym = dlsym(handle, "cblas_sgemm");
    if (sym != nullptr && dladdr(sym, &info) != 0 && info.dli_fname != nullptr) {
      path = info.dli_fname;
    }
    dlclose(handle);
  }
  for (const char* dir : {"/usr/lib/x86_64-linux-gnu/", "/usr/lib/", "/usr/local/lib/"}) {
    if (path.find('/') != std::string::npos) break;
    struct stat st;
    if (stat(absl::StrCat(dir, path).c_str(), &st) == 0) path = absl::StrCat(dir, path);
  }
  char* real = realpath(path.c_str(), nullptr);
  if (real != nullptr) {
    path = real;
    free(real);
  }
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return path;
  return absl::StrCat(path, " ", st.st_size, " ", st.st_mtime);
}

std::string CacheDir() {
  const char* dir = std::getenv("MESHRT_BLAS_CACHE_DIR");
  if (dir != nullptr && *dir != '\0') return dir;
  return absl::StrCat("/tmp/meshrt-blas-", getuid());
}

}  // namespace

std::string SerializeMeasurements(const std::vector<CoreMeasurement>& cores) {
  std::string out;
  for (const CoreMeasurement& c : cores) {
    absl::StrAppend(&out, c.requested, " ", c.corename.empty() ? "-" : c.corename, " ",
                    c.correct ? 1 : 0, " ", absl::StrFormat("%.1f", c.gflops), "\n");
  }
  return out;
}

bool ReadMeasurements(const std::string& path, std::vector<CoreMeasurement>* cores) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    char requested[64], corename[64];
    int correct = 0;
    double gflops = 0;
    if (std::sscanf(line.c_str(), "%63s %63s %d %lf", requested, corename, &correct, &gflops) !=
        4) {
      return false;
    }
    CoreMeasurement c;
    c.requested = requested;
    c.corename = std::string(corename) == "-" ? "" : corename;
    c.correct = correct != 0;
    c.gflops = gflops;
    if (c.corename.empty()) c.error = "failed when measured";
    cores->push_back(c);
  }
  return !cores->empty();
}

bool WriteMeasurements(const std::string& path, const std::vector<CoreMeasurement>& cores) {
  const std::string tmp = absl::StrCat(path, ".tmp.", getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << SerializeMeasurements(cores);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

std::string CpuModelName() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (absl::StartsWith(line, "model name")) {
      return std::string(absl::StripAsciiWhitespace(line.substr(line.find(':') + 1)));
    }
  }
  return "unknown";
}

std::vector<std::string> CandidateCores(const CpuFeatures& cpu) {
  std::vector<std::string> cores;
  if (cpu.avx2 && cpu.fma) {
    cores.push_back("Haswell");
    cores.push_back("Zen");
  }
  if (cpu.HasAvx512()) {
    cores.push_back("SkylakeX");
    cores.push_back("Cooperlake");
  }
  return cores;
}

std::vector<CoreMeasurement> MeasureCores(const std::string& library,
                                          const std::vector<std::string>& candidates,
                                          absl::Duration timeout) {
  std::vector<CoreMeasurement> out;
  for (const std::string& core : candidates) out.push_back(MeasureOne(library, core, timeout));
  return out;
}

const CoreMeasurement* FastestCorrect(const std::vector<CoreMeasurement>& measured) {
  const CoreMeasurement* best = nullptr;
  for (const CoreMeasurement& m : measured) {
    if (m.correct && m.error.empty() && (best == nullptr || m.gflops > best->gflops)) best = &m;
  }
  return best;
}

std::string DescribeMeasurements(const std::vector<CoreMeasurement>& measured) {
  std::vector<const CoreMeasurement*> sorted;
  for (const CoreMeasurement& m : measured) sorted.push_back(&m);
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const CoreMeasurement* a, const CoreMeasurement* b) {
                     return a->gflops > b->gflops;
                   });
  std::vector<std::string> parts;
  for (const CoreMeasurement* m : sorted) {
    if (!m->error.empty()) {
      parts.push_back(absl::StrCat(m->requested, " (", m->error, ")"));
    } else {
      parts.push_back(absl::StrFormat("%s %.1f", m->requested, m->gflops));
    }
  }
  return absl::StrCat(absl::StrJoin(parts, ", "), " GFLOP/s (sgemm ", kTimedSize, "^3, 1 thread)");
}

absl::StatusOr<MeasuredCores> MeasuredCoresFor(const std::string& library, const CpuFeatures& cpu,
                                               bool measure) {
  const std::vector<std::string> candidates = CandidateCores(cpu);
  if (candidates.empty()) {
    return absl::FailedPreconditionError("this CPU has neither AVX-512 nor AVX2+FMA: no core to "
                                         "measure");
  }
  const std::string key = absl::StrCat(CpuModelName(), "|", LibraryIdentity(library), "|",
                                       absl::StrJoin(candidates, ","));
  MeasuredCores result;
  const std::string dir = CacheDir();
  mkdir(dir.c_str(), 0700);
  // Only a directory of our own that nobody else may write: another user's file must not pick
  // our kernel.
  struct stat st;
  const bool usable = lstat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode) &&
                      st.st_uid == getuid() && (st.st_mode & 022) == 0;
  if (!usable) {
    if (!measure) return absl::NotFoundError(absl::StrCat("no usable cache directory ", dir));
    result.cores = MeasureCores(library, candidates);
    return result;
  }
  result.cache_file =
      absl::StrFormat("%s/cores-%016x.txt", dir, std::hash<std::string>()(key));
  auto read_cache = [&]() {
    std::vector<CoreMeasurement> cores;
    const bool known = ReadMeasurements(result.cache_file, &cores) &&
                       std::all_of(cores.begin(), cores.end(), [&](const CoreMeasurement& c) {
                         return std::find(candidates.begin(), candidates.end(), c.requested) !=
                                candidates.end();
                       });
    if (known) {
      result.cores = std::move(cores);
      result.from_cache = true;
      return true;
    }
    return false;
  };
  if (read_cache()) return result;
  if (!measure) return absl::NotFoundError(absl::StrCat("no measurement cached in ", result.cache_file));
  // One process measures; the others wait for its result (and measure nothing meanwhile).
  const std::string lock_path = absl::StrCat(result.cache_file, ".lock");
  const int lock = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock >= 0) flock(lock, LOCK_EX);
  if (read_cache()) {
    if (lock >= 0) close(lock);
    return result;
  }
  result.cores = MeasureCores(library, candidates);
  if (!WriteMeasurements(result.cache_file, result.cores)) result.cache_file.clear();
  if (lock >= 0) close(lock);
  return result;
}

}  // namespace kernels
}  // namespace meshrt
