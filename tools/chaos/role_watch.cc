#include "tools/chaos/role_watch.h"

#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"

namespace hub::chaos {

namespace v1 = ::hub::v1;

RoleWatch::RoleWatch(const std::vector<std::string>& addresses)
    : last_(addresses.size()) {
  for (int slot = 0; slot < static_cast<int>(addresses.size()); ++slot) {
    client::HubClientOptions options;
    options.address = addresses[slot];
    clients_.push_back(std::make_unique<client::HubClient>(options));
    client::RoleWatcherCallbacks callbacks;
    callbacks.on_change = [this, slot](const v1::RoleChange& change) {
      OnChange(slot, change);
    };
    callbacks.on_disconnect = [this](const absl::Status&, bool) {
      absl::MutexLock lock(&mu_);
      ++disconnects_;
    };
    client::RoleWatcherOptions watch;
    watch.backoff.initial = absl::Milliseconds(50);
    watch.backoff.max = absl::Milliseconds(500);
    watchers_.push_back(std::make_unique<client::RoleWatcher>(
        clients_.back().get(), watch, std::move(callbacks)));
  }
}

RoleWatch::~RoleWatch() { Stop(); }

void RoleWatch::Start() {
  for (const auto& watcher : watchers_) (void)watcher->Start();
}

void RoleWatch::Stop() {
  for (const auto& watcher : watchers_) watcher->Stop();
}

void RoleWatch::OnChange(int slot, const v1::RoleChange& change) {
  if (change.kind() == v1::ROLE_CHANGE_KIND_REMOVED) return;
  const v1::Role& role = change.role();
  const std::string& wire = role.role_key_wire();
  absl::MutexLock lock(&mu_);
  ++changes_;
  // A role's first version may be 0.
  auto [last, first_seen] = last_[slot].emplace(wire, role.version());
  if (!first_seen) {
    if (role.version() <= last->second) {
      violations_.push_back(absl::StrCat(
          "hub ", slot, "'s watch delivered version ", role.version(), " of ",
          wire, " after version ", last->second));
      return;
    }
    last->second = role.version();
  }
  auto [it, first] = versions_[wire].emplace(
      role.version(), Seen{role.epoch(), role.holder_agent_id(), slot});
  if (!first && (it->second.epoch != role.epoch() ||
                 it->second.holder != role.holder_agent_id())) {
    violations_.push_back(absl::StrCat(
        wire, " version ", role.version(), ": hub ", it->second.slot,
        "'s watch read epoch ", it->second.epoch, " holder '",
        it->second.holder, "', hub ", slot, "'s epoch ", role.epoch(),
        " holder '", role.holder_agent_id(), "'"));
  }
  if (!role.holder_agent_id().empty()) {
    std::set<std::string>& holders = holders_[wire][role.epoch()];
    if (holders.insert(role.holder_agent_id()).second && holders.size() == 2) {
      violations_.push_back(absl::StrCat("epoch ", role.epoch(), " of ", wire,
                                         " was held by ",
                                         absl::StrJoin(holders, " and ")));
    }
  }
}

bool RoleWatch::WaitCaughtUp(const std::map<std::string, int64_t>& versions,
                             absl::Duration timeout,
                             std::string* lagging) const {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    std::vector<std::string> behind;
    {
      absl::MutexLock lock(&mu_);
      for (int slot = 0; slot < static_cast<int>(last_.size()); ++slot) {
        for (const auto& [wire, version] : versions) {
          auto seen = last_[slot].find(wire);
          const int64_t at = seen == last_[slot].end() ? -1 : seen->second;
          if (at < version) {
            behind.push_back(absl::StrCat("hub ", slot, " saw ", wire,
                                          " at version ", at, " of ", version));
          }
        }
      }
    }
    if (behind.empty()) return true;
    if (absl::Now() >= deadline) {
      *lagging = absl::StrJoin(behind, "; ");
      return false;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
}

void RoleWatch::Check(std::vector<std::string>* violations) const {
  absl::MutexLock lock(&mu_);
  violations->insert(violations->end(), violations_.begin(), violations_.end());
  for (const auto& [wire, versions] : versions_) {
    for (auto it = versions.begin(); std::next(it) != versions.end(); ++it) {
      auto next = std::next(it);
      if (next->second.epoch < it->second.epoch) {
        violations->push_back(
            absl::StrCat(wire, "'s epoch went back from ", it->second.epoch,
                         " at version ", it->first, " to ", next->second.epoch,
                         " at version ", next->first));
      }
    }
  }
}

std::string RoleWatch::Summary() const {
  absl::MutexLock lock(&mu_);
  int64_t versions = 0;
  for (const auto& [wire, seen] : versions_) versions += seen.size();
  return absl::StrCat("chaos: role watchers: ", last_.size(), " hubs, ",
                      changes_, " changes seen, ", versions,
                      " distinct versions of ", versions_.size(), " roles, ",
                      disconnects_, " reconnects");
}

}  // namespace hub::chaos
