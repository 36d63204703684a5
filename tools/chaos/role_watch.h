// RoleWatch: a WatchRoles stream on every hub (client::RoleWatcher, which
// follows it across restarts of the hub), and the checks on what they saw,
// which cover every version of every role, not only the acknowledged ones:
//   - each watcher sees a role's versions in increasing order, each once;
//   - every watcher that sees a version sees the same epoch and holder;
//   - a role's epoch never goes back as its version grows, and no epoch of
//     a role ever names two holders;
//   - by the end, every watcher has caught up with the stored rows (each
//     hub publishes every hub's role changes).
// Not responsible for writing roles (the load does). Thread-safe.
#ifndef TOOLS_CHAOS_ROLE_WATCH_H_
#define TOOLS_CHAOS_ROLE_WATCH_H_

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "clients/cpp/hub_client.h"
#include "clients/cpp/role_watcher.h"

namespace hub::chaos {

class RoleWatch {
 public:
  // One watcher per address (hub slot).
  explicit RoleWatch(const std::vector<std::string>& addresses);
  // Stops the watchers.
  ~RoleWatch();

  void Start();
  void Stop();
  // Waits until every watcher has seen each role of `versions` (wire ->
  // stored version) at that version or a later one; false after `timeout`,
  // with the watchers that lag described in `lagging`.
  bool WaitCaughtUp(const std::map<std::string, int64_t>& versions,
                    absl::Duration timeout, std::string* lagging) const;
  // Appends one line per violation seen so far to `violations`.
  void Check(std::vector<std::string>* violations) const;
  // "versions=N reconnects=N" for the summary.
  std::string Summary() const;

 private:
  struct Seen {
    int64_t epoch = 0;
    std::string holder;
    int slot = 0;  // the first watcher that saw it
  };
  void OnChange(int slot, const hub::v1::RoleChange& change);

  std::vector<std::unique_ptr<client::HubClient>> clients_;
  std::vector<std::unique_ptr<client::RoleWatcher>> watchers_;

  mutable absl::Mutex mu_;
  // Per slot: wire -> the last version it saw.
  std::vector<std::map<std::string, int64_t>> last_ ABSL_GUARDED_BY(mu_);
  // wire -> version -> what the first watcher to see it saw.
  std::map<std::string, std::map<int64_t, Seen>> versions_ ABSL_GUARDED_BY(mu_);
  // wire -> epoch -> the holders named at it.
  std::map<std::string, std::map<int64_t, std::set<std::string>>> holders_
      ABSL_GUARDED_BY(mu_);
  std::vector<std::string> violations_ ABSL_GUARDED_BY(mu_);
  int64_t changes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t disconnects_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace hub::chaos

#endif  // TOOLS_CHAOS_ROLE_WATCH_H_
