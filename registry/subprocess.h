// Running a helper program (tmux, an adapter command) with an argv, never a
// shell, and a deadline. Used by transport adapters; never call it with a
// lock held or inside a database transaction.
#ifndef HUB_REGISTRY_SUBPROCESS_H_
#define HUB_REGISTRY_SUBPROCESS_H_

#include <string>
#include <vector>

#include "absl/time/time.h"

namespace hub {

struct CommandResult {
  // The program could not be started (not found, not executable):
  // spawn_errno is the errno of the failed exec; nothing else is set.
  int spawn_errno = 0;
  bool timed_out = false;  // killed (SIGKILL) at the deadline
  int exit_code = -1;      // when it exited normally
  int term_signal = 0;     // when a signal ended it
  std::string output;      // stdout and stderr, interleaved, at most 64 KiB
  bool ok() const {
    return spawn_errno == 0 && !timed_out && term_signal == 0 && exit_code == 0;
  }
};

// Runs argv[0] (looked up in PATH) with `argv`, stdin from /dev/null, and
// waits at most `timeout`. Thread-safe.
// REQUIRES: !argv.empty().
CommandResult RunCommand(const std::vector<std::string>& argv,
                         absl::Duration timeout);

}  // namespace hub

#endif  // HUB_REGISTRY_SUBPROCESS_H_
