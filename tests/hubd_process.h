// HubdProcess: the real hubd binary as a child process of a test, on a free
// loopback port and a given database. It can be killed with SIGKILL and
// restarted on the same address and database, as an operator's supervisor
// would after a crash. Also the chaos driver's hubs (tools/chaos).
#ifndef HUB_TESTS_HUBD_PROCESS_H_
#define HUB_TESTS_HUBD_PROCESS_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace hub::testing {

// The hubd binary of the test's runfiles ($TEST_SRCDIR/<workspace>/hub/hubd).
std::string HubdRunfilesPath();

// A fresh path under $TEST_TMPDIR for a database (no file is created).
std::string TempDbPath(const std::string& name);

struct HubdProcessOptions {
  // The hubd binary. Empty: HubdRunfilesPath().
  std::string binary;
  // A file hubd's stderr is appended to. Empty: the caller's stderr.
  std::string stderr_path;
};

class HubdProcess {
 public:
  // `extra_args` are passed to every start (e.g. "--detach_grace=1s").
  explicit HubdProcess(std::string db_path,
                       std::vector<std::string> extra_args = {},
                       HubdProcessOptions options = {});
  // Kills a running hubd (SIGKILL) and reaps it.
  ~HubdProcess();

  HubdProcess(const HubdProcess&) = delete;
  HubdProcess& operator=(const HubdProcess&) = delete;

  // Starts hubd and waits (up to 60 s) for its "serving on" line. The first
  // start picks a free port; later starts reuse the same address.
  absl::Status Start();
  // SIGKILL, then reap. No-op when not running.
  void Kill();
  // SIGTERM (clean shutdown), then reap; returns the exit status.
  int Terminate();
  // SIGSTOP / SIGCONT: a hub that hangs (connections stay open, nothing is
  // answered) and comes back.
  void Pause();
  void Resume();

  bool running() const { return pid_ > 0; }
  const std::string& address() const { return address_; }
  const std::string& instance_id() const { return instance_id_; }
  const std::string& db_path() const { return db_path_; }

 private:
  std::string db_path_;
  std::vector<std::string> extra_args_;
  HubdProcessOptions options_;
  std::string address_;  // "" until the first start
  std::string instance_id_;
  pid_t pid_ = -1;
};

}  // namespace hub::testing

#endif  // HUB_TESTS_HUBD_PROCESS_H_
