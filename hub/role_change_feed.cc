#include "hub/role_change_feed.h"

#include <utility>

#include "hub/log.h"
#include "status/status.h"

namespace hub {
namespace {

void LogFailure(absl::string_view event, const absl::Status& status) {
  log::Warn(event,
            {{"reason", ReasonOf(status)}, {"message", status.message()}});
}

RoleChangeFollowerOptions Logged(RoleChangeFollowerOptions options) {
  if (!options.on_error) {
    options.on_error = [](const absl::Status& status) {
      LogFailure("role_changes_unread", status);
    };
  }
  return options;
}

storage::pg::NotifierOptions NotifierFor(const RoleChangeFeedOptions& options) {
  storage::pg::NotifierOptions o;
  o.conninfo = options.conninfo;
  // Under load, one hint per 5 ms at most (the others' poll is 200 ms).
  o.min_interval = absl::Milliseconds(5);
  o.on_error = [](const absl::Status& status) {
    LogFailure("role_change_hint_not_sent", status);
  };
  return o;
}

}  // namespace

RoleChangeFeed::RoleChangeFeed(storage::Store* store,
                               RoleChangeFeedOptions options)
    : store_(store),
      options_(std::move(options)),
      follower_(&store_->roles(), Logged(options_.follower)),
      notifier_(NotifierFor(options_)) {}

RoleChangeFeed::~RoleChangeFeed() { Stop(); }

absl::Status RoleChangeFeed::Start(RoleRegistry* roles) {
  if (absl::Status s =
          follower_.Start([roles](const storage::RoleChange& change) {
            roles->PublishLogged(change);
          });
      !s.ok()) {
    return s;
  }
  storage::pg::ListenerOptions o;
  o.conninfo = options_.conninfo;
  o.channels = {kRoleChangesChannel};
  RoleChangeFollower* follower = &follower_;
  o.on_notify = [follower, self = options_.hub_instance_id](
                    const storage::pg::Notification& n) {
    if (n.payload != self) follower->Kick();
  };
  // Whatever was hinted while the listener was not connected is in the
  // log after the follower's cursor.
  std::atomic<bool>* lost = &hints_lost_;
  o.on_resync = [follower, lost] {
    follower->Kick();
    if (lost->exchange(false)) log::Info("role_change_hints_restored", {});
  };
  // Logged once per outage, not per retry (the listener retries every 2 s
  // at most): until the resync, the poll carries the changes.
  o.on_error = [lost](const absl::Status& status) {
    if (!lost->exchange(true)) LogFailure("role_change_hints_lost", status);
  };
  listener_ = std::make_unique<storage::pg::Listener>(std::move(o));
  // Roles this hub recovered at start are news to the other hubs.
  notifier_.Notify(kRoleChangesChannel, options_.hub_instance_id);
  return absl::OkStatus();
}

void RoleChangeFeed::Committed() {
  follower_.Kick();
  notifier_.Notify(kRoleChangesChannel, options_.hub_instance_id);
}

void RoleChangeFeed::Stop() {
  if (listener_ != nullptr) listener_->Stop();
  notifier_.Stop();
  follower_.Stop();
}

}  // namespace hub
