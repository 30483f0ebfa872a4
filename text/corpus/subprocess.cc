#include "text/corpus/subprocess.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace meshrt {
namespace text {
namespace {

absl::Status ErrnoStatus(int err, const std::string& what) {
  const std::string message = absl::StrCat(what, ": ", strerror(err));
  switch (err) {
    case ENOENT:
      return absl::NotFoundError(message);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(message);
    default:
      return absl::InternalError(message);
  }
}

void CloseIfOpen(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

}  // namespace

absl::StatusOr<ProcessResult> RunProcess(const std::vector<std::string>& argv,
                                         absl::Duration timeout) {
  if (argv.empty()) return absl::InvalidArgumentError("RunProcess: empty argv");
  const std::string& program = argv[0];
  std::vector<char*> cargv;
  for (const std::string& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);

  // out/err carry the child's output; exec_err reports exec's errno (it closes on a successful
  // exec, so reading it returns 0 bytes then).
  int out[2], err[2], exec_err[2];
  if (pipe2(out, O_CLOEXEC) != 0) return ErrnoStatus(errno, "pipe");
  if (pipe2(err, O_CLOEXEC) != 0) {
    const int e = errno;
    close(out[0]);
    close(out[1]);
    return ErrnoStatus(e, "pipe");
  }
  if (pipe2(exec_err, O_CLOEXEC) != 0) {
    const int e = errno;
    for (int fd : {out[0], out[1], err[0], err[1]}) close(fd);
    return ErrnoStatus(e, "pipe");
  }
  const pid_t pid = fork();
  if (pid < 0) {
    const int e = errno;
    for (int fd : {out[0], out[1], err[0], err[1], exec_err[0], exec_err[1]}) close(fd);
    return ErrnoStatus(e, "fork");
  }
  if (pid == 0) {
    // The child: only async-signal-safe calls until exec.
    const int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (devnull >= 0) dup2(devnull, STDIN_FILENO);
    dup2(out[1], STDOUT_FILENO);
    dup2(err[1], STDERR_FILENO);
    execvp(program.c_str(), cargv.data());
    const int e = errno;
    (void)!write(exec_err[1], &e, sizeof(e));
    _exit(127);
  }
  close(out[1]);
  close(err[1]);
  close(exec_err[1]);
  int child_errno = 0;
  ssize_t n;
  do {
    n = read(exec_err[0], &child_errno, sizeof(child_errno));
  } while (n < 0 && errno == EINTR);
  close(exec_err[0]);
  if (n == sizeof(child_errno)) {
    close(out[0]);
    close(err[0]);
    waitpid(pid, nullptr, 0);
    return ErrnoStatus(child_errno, absl::StrCat("cannot run ", program));
  }

  ProcessResult result;
  int fds[2] = {out[0], err[0]};
  std::string* sinks[2] = {&result.stdout_text, &result.stderr_text};
  const absl::Time deadline = absl::Now() + timeout;
  bool timed_out = false;
  char buf[1 << 16];
  while (fds[0] >= 0 || fds[1] >= 0) {
    pollfd p[2];
    int np = 0;
    int which[2];
    for (int i = 0; i < 2; ++i) {
      if (fds[i] < 0) continue;
      p[np] = {fds[i], POLLIN, 0};
      which[np++] = i;
    }
    const int64_t left_ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (left_ms <= 0) {
      timed_out = true;
      break;
    }
    const int ready = poll(p, np, static_cast<int>(std::min<int64_t>(left_ms, 1 << 30)));
    if (ready < 0) {
      if (errno == EINTR) continue;
      timed_out = true;  // cannot wait any more: treat like a timeout, the child is killed below
      break;
    }
    for (int k = 0; k < np; ++k) {
      if (p[k].revents == 0) continue;
      const ssize_t got = read(p[k].fd, buf, sizeof(buf));
      if (got > 0) {
        sinks[which[k]]->append(buf, static_cast<size_t>(got));
      } else if (got == 0 || errno != EINTR) {
        CloseIfOpen(fds[which[k]]);
      }
    }
  }
  CloseIfOpen(fds[0]);
  CloseIfOpen(fds[1]);
  if (timed_out) kill(pid, SIGKILL);
  int wstatus = 0;
  while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    return absl::DeadlineExceededError(absl::StrCat(
        program, " did not finish within ", absl::FormatDuration(timeout), " and was killed"));
  }
  result.exit_code = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -WTERMSIG(wstatus);
  return result;
}

}  // namespace text
}  // namespace meshrt
