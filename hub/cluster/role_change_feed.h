// RoleChangeFeed: hubd's role publication on a store with a role change log
// (PostgreSQL, which several hubs share; docs/design/multi-hub.md, "Role
// changes across hubs").
//
// One RoleChangeFollower publishes the log into the RoleRegistry (whose
// publication is RolePublication::kChangeLog), woken by this hub's own
// commits (Committed, a local kick: local watchers wait for one read, not
// for a round trip through another hub's hint), by other hubs' hints on
// kRoleChangesChannel and the resync after every (re)connect (ChangeHints,
// the mechanism reservation changes use too), and by the follower's slow
// poll. A hint's payload is this hub's instance id, so a hub ignores the
// hints of its own commits (its kick came first). Failures are logged (once
// per outage), never fatal: the poll covers for lost hints. Thread-safe.
#ifndef HUB_HUB_CLUSTER_ROLE_CHANGE_FEED_H_
#define HUB_HUB_CLUSTER_ROLE_CHANGE_FEED_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "hub/cluster/change_hints.h"
#include "registry/role_change_follower.h"
#include "registry/role_registry.h"
#include "storage/store.h"

namespace hub {

// The signal channel of role changes.
inline constexpr char kRoleChangesChannel[] = "hub_role_changes";

struct RoleChangeFeedOptions {
  // The store's signals (Store::signals()); must outlive the feed.
  storage::Signals* signals = nullptr;
  // This hub's id: the payload of its hints.
  std::string hub_instance_id;
  RoleChangeFollowerOptions follower;
};

class RoleChangeFeed {
 public:
  // The sender starts at once; the follower and the listener at Start.
  // `roles` must outlive the feed and have a role change log.
  RoleChangeFeed(storage::RoleStore* roles, RoleChangeFeedOptions options);
  // Stop().
  ~RoleChangeFeed();
  RoleChangeFeed(const RoleChangeFeed&) = delete;
  RoleChangeFeed& operator=(const RoleChangeFeed&) = delete;

  // Starts publishing into `roles` every change committed from now on (the
  // log's head is read first: errors are the store's), then listens for
  // other hubs' hints. `roles` must outlive the feed (or its Stop).
  absl::Status Start(RoleRegistry* roles);
  // This hub committed a role write: read the log now, and hint the other
  // hubs. Any thread, never blocks on the database.
  void Committed();
  // Stops listening, hinting and publishing; nothing is published once it
  // returns, and Committed does nothing. Idempotent.
  void Stop();

 private:
  const RoleChangeFeedOptions options_;
  RoleChangeFollower follower_;
  ChangeHints hints_;
};

}  // namespace hub

#endif  // HUB_HUB_CLUSTER_ROLE_CHANGE_FEED_H_
