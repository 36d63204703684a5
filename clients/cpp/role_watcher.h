// RoleWatcher: follows RoleService.WatchRoles for one filter, across
// disconnects.
//
// The first connection delivers the hub's snapshot (kind SNAPSHOT), then
// snapshot_end, then live changes. When the stream breaks (hub restart,
// network), the watcher reconnects (as soon as the channel has reconnected;
// after a backoff when a reachable hub ends the watch) and resumes: the new
// stream's snapshot is compared with the last version seen of each role, and
// only roles that changed while disconnected are delivered (still with kind
// SNAPSHOT, since the hub reports their current state, not the steps), so a
// callback sees each version at most once. Roles that vanished while
// disconnected are not reported. One thread per watcher runs the stream and
// every callback.
#ifndef HUB_CLIENTS_CPP_ROLE_WATCHER_H_
#define HUB_CLIENTS_CPP_ROLE_WATCHER_H_

#include <grpcpp/client_context.h>

#include <functional>
#include <map>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "clients/cpp/backoff.h"
#include "clients/cpp/hub_client.h"

namespace hub::client {

struct RoleWatcherOptions {
  // Which roles to watch (project, kind, or one key); empty watches all.
  hub::v1::WatchRolesRequest filter;
  // Delays between reconnects; reset once a stream delivers snapshot_end.
  BackoffPolicy backoff;
};

// Every callback runs on the watcher thread, one at a time. Any may be empty.
struct RoleWatcherCallbacks {
  // A role's state (snapshot) or a change of it.
  std::function<void(const hub::v1::RoleChange&)> on_change;
  // The end of a stream's snapshot: the watcher is live. `resumed` is false
  // for the first stream, true after a reconnect.
  std::function<void(const hub::v1::RoleSnapshotEnd&, bool resumed)>
      on_snapshot_end;
  // The stream ended with `status`; the watcher reconnects unless the
  // failure is permanent (INVALID_ARGUMENT and the like: the watcher stops,
  // `permanent` true).
  std::function<void(const absl::Status& status, bool permanent)> on_disconnect;
};

class RoleWatcher {
 public:
  // `client` must outlive the watcher. Nothing happens before Start().
  RoleWatcher(const HubClient* client, RoleWatcherOptions options,
              RoleWatcherCallbacks callbacks);
  // Stops the watcher (see Stop()).
  ~RoleWatcher();

  RoleWatcher(const RoleWatcher&) = delete;
  RoleWatcher& operator=(const RoleWatcher&) = delete;

  // Starts the watcher thread. INVALID_ARGUMENT for a bad backoff policy,
  // FAILED_PRECONDITION if already started.
  absl::Status Start();
  // Cancels the stream and joins the thread. Idempotent; not from a
  // callback (there it only requests the stop).
  void Stop();

  // Number of streams that reached snapshot_end so far.
  int live_streams() const;

 private:
  void Run();
  // One stream; returns how it ended.
  absl::Status WatchOnce(Backoff& backoff, bool resumed);

  const HubClient* const client_;
  const RoleWatcherOptions options_;
  const RoleWatcherCallbacks callbacks_;

  mutable absl::Mutex mu_;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ClientContext* context_ ABSL_GUARDED_BY(mu_) = nullptr;
  int live_streams_ ABSL_GUARDED_BY(mu_) = 0;
  // Last version delivered per role_key_wire (watcher thread only).
  std::map<std::string, int64_t> versions_;
  std::thread worker_;
};

}  // namespace hub::client

#endif  // HUB_CLIENTS_CPP_ROLE_WATCHER_H_
