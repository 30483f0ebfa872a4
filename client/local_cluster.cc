#include "client/local_cluster.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/client.h"
#include "rpc/auth.h"
#include "util/logging.h"
#include "util/status_macros.h"

namespace meshrt {
namespace {

// The positive port number in `path`, else 0.
int ReadPortFile(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  int port = 0;
  if (in >> text && absl::SimpleAtoi(text, &port) && port > 0) return port;
  return 0;
}

std::string WorkerHttpPortFile(const std::string& port_file, int i) {
  return absl::StrCat(port_file, ".worker", i, ".http");
}

bool Exited(pid_t pid) {
  int status = 0;
  return waitpid(pid, &status, WNOHANG) == pid;
}

void Stop(pid_t pid) {
  if (pid <= 0) return;
  kill(pid, SIGTERM);
  for (int i = 0; i < 60; ++i) {  // 3 s
    if (Exited(pid)) return;
    absl::SleepFor(absl::Milliseconds(50));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

}  // namespace

absl::StatusOr<pid_t> LocalCluster::Spawn(const std::vector<std::string>& argv,
                                         const std::string& log_name) {
  std::string log_path =
      options_.log_dir.empty() ? "" : absl::StrCat(options_.log_dir, "/", log_name, ".log");
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("fork failed: ", strerror(errno)));
  if (pid == 0) {
    // Die with the parent, so a crashed test or CLI leaves no daemons behind.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    if (!log_path.empty()) {
      int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
      }
    }
    execv(args[0], args.data());
    std::fprintf(stderr, "cannot start %s: %s\n", args[0], strerror(errno));
    _exit(127);
  }
  return pid;
}

absl::StatusOr<std::unique_ptr<LocalCluster>> LocalCluster::Start(
    const LocalClusterOptions& options) {
  if (options.workers < 0) return absl::InvalidArgumentError("a cluster needs >= 0 workers");
  std::unique_ptr<LocalCluster> cluster(new LocalCluster());
  cluster->options_ = options;
  char dir_template[] = "/tmp/meshrt-local-XXXXXX";
  if (mkdtemp(dir_template) == nullptr) return absl::InternalError("cannot make a temp dir");
  const std::string port_file = absl::StrCat(dir_template, "/port");
  cluster->credentials_dir_ = options.credentials_dir;
  if (cluster->credentials_dir_.empty()) {
    cluster->own_dir_ = dir_template;
    cluster->credentials_dir_ = absl::StrCat(dir_template, "/credentials");
  }

  cluster->port_file_ = port_file;
  cluster->http_port_file_ = absl::StrCat(port_file, ".http");
  const absl::Time deadline = absl::Now() + options.startup_timeout;
  RETURN_IF_ERROR(cluster->StartCoordinator(options.port, deadline));
  for (int i = 0; i < options.workers; ++i) {
    absl::Status s = cluster->AddWorker(-1);
    if (!s.ok()) return s;
  }
  absl::Status s = cluster->WaitForWorkers(options.workers, deadline - absl::Now());
  if (!s.ok()) return s;
  return cluster;
}

absl::Status LocalCluster::StartCoordinator(int port, absl::Time deadline) {
  std::vector<std::string> argv = options_.coordinator_command;
  argv.push_back(absl::StrCat("--port=", port));
  argv.push_back("--host=127.0.0.1");
  argv.push_back(absl::StrCat("--port_file=", port_file_));
  argv.push_back(absl::StrCat("--credentials_dir=", credentials_dir_));
  if (!options_.checkpoint_root.empty()) {
    argv.push_back(absl::StrCat("--checkpoint_root=", options_.checkpoint_root));
  }
  if (options_.http) {
    argv.push_back(absl::StrCat("--metrics_port=", options_.http_port_base > 0
                                                       ? options_.http_port_base
                                                       : -1));
    argv.push_back(absl::StrCat("--metrics_port_file=", http_port_file_));
    if (!options_.metrics_token_file.empty()) {
      argv.push_back(absl::StrCat("--metrics_token_file=", options_.metrics_token_file));
    }
    std::remove(http_port_file_.c_str());
  }
  for (const std::string& f : options_.coordinator_flags) argv.push_back(f);
  auto pid = Spawn(argv, "coordinator");
  if (!pid.ok()) return pid.status();
  coordinator_ = *pid;

  std::remove(port_file_.c_str());
  int bound = 0;
  while (bound == 0) {
    std::ifstream in(port_file_);
    std::string text;
    if (in >> text && absl::SimpleAtoi(text, &bound) && bound > 0) break;
    bound = 0;
    if (Exited(coordinator_)) {
      coordinator_ = -1;
      return absl::InternalError(absl::StrCat("the coordinator (", absl::StrJoin(argv, " "),
                                              ") exited at start"));
    }
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError("the coordinator did not start listening in time");
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  std::remove(port_file_.c_str());
  port_ = bound;
  address_ = absl::StrCat("127.0.0.1:", bound);
  // The coordinator writes its HTTP port before its gRPC port (coordinator_main.cc), so it is
  // there by now; a coordinator whose HTTP server failed has exited naming why.
  http_port_ = options_.http ? ReadPortFile(http_port_file_) : 0;
  if (options_.http && http_port_ == 0) {
    return absl::InternalError(absl::StrCat("the coordinator listens on ", address_,
                                            " but wrote no HTTP port to ", http_port_file_));
  }
  return absl::OkStatus();
}

absl::Status LocalCluster::RestartCoordinator(absl::Duration down) {
  if (coordinator_ > 0) {
    kill(coordinator_, SIGKILL);
    waitpid(coordinator_, nullptr, 0);
    coordinator_ = -1;
  }
  absl::SleepFor(down);
  return StartCoordinator(port_, absl::Now() + options_.startup_timeout);
}

LocalCluster::~LocalCluster() {
  for (pid_t w : workers_) Stop(w);
  Stop(coordinator_);
  std::remove(http_port_file_.c_str());
  for (size_t i = 0; i < workers_.size(); ++i) {
    std::remove(WorkerHttpPortFile(port_file_, static_cast<int>(i)).c_str());
  }
  if (own_dir_.empty()) {
    rmdir(std::filesystem::path(port_file_).parent_path().c_str());  // the port file's dir
  } else {
    std::error_code ignored;  // <tmp>/credentials/<port>/*.token, then <tmp>
    std::filesystem::remove_all(own_dir_, ignored);
  }
}

SecurityOptions LocalCluster::client_security() const {
  SecurityOptions s;
  s.auth_token_file = GeneratedTokenPath(credentials_dir_, port_, kClientTokenFile);
  return s;
}

SecurityOptions LocalCluster::operator_security() const {
  SecurityOptions s;
  s.auth_token_file = !options_.operator_token_file.empty()
                          ? options_.operator_token_file
                          : GeneratedTokenPath(credentials_dir_, port_, kOperatorTokenFile);
  return s;
}

std::string LocalCluster::cluster_token_file() const {
  return GeneratedTokenPath(credentials_dir_, port_, kClusterTokenFile);
}

std::string LocalCluster::dashboard_url() const {
  if (http_port_ == 0) return "";
  absl::StatusOr<std::vector<Credential>> tokens =
      ReadTokenFile(operator_security().auth_token_file, "operator_token_file", "operator");
  if (!tokens.ok() || tokens->empty()) return "";
  return absl::StrCat("http://127.0.0.1:", http_port_, "/?token=", tokens->front().token);
}

int LocalCluster::worker_http_port(int i) const {
  if (!options_.http || i < 0 || i >= num_workers()) return 0;
  return ReadPortFile(WorkerHttpPortFile(port_file_, i));
}

ClientOptions LocalCluster::client_options() const {
  ClientOptions o;
  o.address = address_;
  o.security = client_security();
  return o;
}

absl::Status LocalCluster::KillWorker(int i) {
  if (i < 0 || i >= num_workers() || workers_[i] <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("no running worker ", i));
  }
  kill(workers_[i], SIGKILL);
  waitpid(workers_[i], nullptr, 0);
  workers_[i] = -1;
  return absl::OkStatus();
}

absl::StatusOr<int> LocalCluster::TerminateWorker(int i, absl::Duration timeout) {
  if (i < 0 || i >= num_workers() || workers_[i] <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("no running worker ", i));
  }
  const pid_t pid = workers_[i];
  kill(pid, SIGTERM);
  const absl::Time deadline = absl::Now() + timeout;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) != pid) {
    if (absl::Now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      workers_[i] = -1;
      return absl::DeadlineExceededError(absl::StrCat(
          "worker ", i, " (pid ", pid, ") did not exit within ", absl::FormatDuration(timeout),
          " of SIGTERM"));
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  workers_[i] = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

absl::Status LocalCluster::AddWorker(int expected_alive) {
  std::vector<std::string> argv = options_.worker_command;
  argv.push_back(absl::StrCat("--coordinator=", address_));
  argv.push_back("--advertise_address=127.0.0.1");
  argv.push_back(absl::StrCat("--credentials_dir=", credentials_dir_));
  // Rank = start order, so sessions use the workers in that order.
  argv.push_back(absl::StrCat("--rank=", workers_.size()));
  for (const std::string& d : options_.data_dirs) argv.push_back(absl::StrCat("--data_dir=", d));
  if (!options_.checkpoint_root.empty()) {
    argv.push_back(absl::StrCat("--checkpoint_root=", options_.checkpoint_root));
  }
  if (options_.http) {
    const int index = static_cast<int>(workers_.size());
    argv.push_back(absl::StrCat("--metrics_port=", options_.http_port_base > 0
                                                       ? options_.http_port_base + 1 + index
                                                       : -1));
    argv.push_back(absl::StrCat("--metrics_port_file=", WorkerHttpPortFile(port_file_, index)));
    if (!options_.metrics_token_file.empty()) {
      argv.push_back(absl::StrCat("--metrics_token_file=", options_.metrics_token_file));
    }
  }
  for (const std::string& f : options_.worker_flags) argv.push_back(f);
  auto pid = Spawn(argv, absl::StrCat("worker", workers_.size()));
  if (!pid.ok()) return pid.status();
  workers_.push_back(*pid);
  if (expected_alive < 0) return absl::OkStatus();
  return WaitForWorkers(expected_alive, options_.startup_timeout);
}

absl::Status LocalCluster::WaitForWorkers(int n, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  ClientOptions co;
  co.address = address_;
  co.security = operator_security();
  co.connect_timeout = std::max(timeout, absl::Seconds(1));
  auto client = Client::Connect(co);
  if (!client.ok()) return client.status();
  int seen = 0;
  while (true) {
    auto list = (*client)->ListWorkers();
    if (list.ok()) {
      seen = list->workers_size();
      if (seen >= n) return absl::OkStatus();
    }
    if (absl::Now() > deadline) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return absl::DeadlineExceededError(absl::StrCat("only ", seen, " of ", n,
                                                  " workers registered with ", address_,
                                                  " within ", absl::FormatDuration(timeout)));
}

}  // namespace meshrt
