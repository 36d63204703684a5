#include "registry/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/time/clock.h"

extern char** environ;

namespace hub {
namespace {

constexpr size_t kMaxOutput = 64 * 1024;

void Decode(int wait_status, CommandResult* result) {
  if (WIFEXITED(wait_status)) result->exit_code = WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) result->term_signal = WTERMSIG(wait_status);
}

}  // namespace

CommandResult RunCommand(const std::vector<std::string>& argv,
                         absl::Duration timeout) {
  CommandResult result;
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    result.spawn_errno = errno;
    return result;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 2);
  std::vector<char*> args;
  for (const std::string& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  // posix_spawnp reports an exec failure (ENOENT, EACCES) as its result.
  const int rc =
      posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(pipe_fds[1]);
  if (rc != 0) {
    close(pipe_fds[0]);
    result.spawn_errno = rc;
    return result;
  }

  const absl::Time deadline = absl::Now() + timeout;
  bool eof = false;
  int wait_status = 0;
  bool reaped = false;
  while (!reaped) {
    const int64_t left_ms =
        std::max<int64_t>(0, absl::ToInt64Milliseconds(deadline - absl::Now()));
    if (!eof) {
      pollfd fd{pipe_fds[0], POLLIN, 0};
      if (poll(&fd, 1, static_cast<int>(std::min<int64_t>(left_ms, 50))) > 0) {
        char buf[4096];
        const ssize_t n = read(pipe_fds[0], buf, sizeof(buf));
        if (n <= 0) {
          eof = true;
        } else if (result.output.size() < kMaxOutput) {
          result.output.append(buf,
                               std::min(static_cast<size_t>(n),
                                        kMaxOutput - result.output.size()));
        }
      }
    } else {
      usleep(2000);
    }
    const pid_t done = waitpid(pid, &wait_status, WNOHANG);
    if (done == pid) {
      reaped = true;
    } else if (absl::Now() >= deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &wait_status, 0);
      result.timed_out = true;
      reaped = true;
    }
  }
  // Whatever the program wrote just before exiting. A daemon it left behind
  // may hold the pipe open, so never wait for end of file.
  pollfd fd{pipe_fds[0], POLLIN, 0};
  while (!eof && poll(&fd, 1, 0) > 0 && result.output.size() < kMaxOutput) {
    char buf[4096];
    const ssize_t n = read(pipe_fds[0], buf, sizeof(buf));
    if (n <= 0) break;
    result.output.append(buf, std::min(static_cast<size_t>(n),
                                       kMaxOutput - result.output.size()));
  }
  close(pipe_fds[0]);
  if (!result.timed_out) Decode(wait_status, &result);
  return result;
}

}  // namespace hub
