#include "hub/cluster/role_change_feed.h"

#include <utility>

#include "hub/observability/log.h"
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

ChangeHintsOptions HintsFor(const RoleChangeFeedOptions& options) {
  ChangeHintsOptions o;
  o.signals = options.signals;
  o.hub_instance_id = options.hub_instance_id;
  o.channel = kRoleChangesChannel;
  o.what = "role_change";
  return o;
}

}  // namespace

RoleChangeFeed::RoleChangeFeed(storage::RoleStore* roles,
                               RoleChangeFeedOptions options)
    : options_(std::move(options)),
      follower_(roles, Logged(options_.follower)),
      hints_(HintsFor(options_)) {}

RoleChangeFeed::~RoleChangeFeed() { Stop(); }

absl::Status RoleChangeFeed::Start(RoleRegistry* roles) {
  if (absl::Status s =
          follower_.Start([roles](const storage::RoleChange& change) {
            roles->PublishLogged(change);
          });
      !s.ok()) {
    return s;
  }
  // Whatever was hinted while the listener was not connected is in the
  // log after the follower's cursor: a resync kicks the follower too.
  RoleChangeFollower* follower = &follower_;
  hints_.Start([follower] { follower->Kick(); });
  // Roles this hub recovered at start are news to the other hubs.
  hints_.Committed();
  return absl::OkStatus();
}

void RoleChangeFeed::Committed() {
  follower_.Kick();
  hints_.Committed();
}

void RoleChangeFeed::Stop() {
  hints_.Stop();
  follower_.Stop();
}

}  // namespace hub
