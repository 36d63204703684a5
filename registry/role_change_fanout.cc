#include "registry/role_change_fanout.h"

#include <string>
#include <utility>
#include <vector>

namespace hub {

RoleChangeFanout::RoleChangeFanout(RoleRegistry* roles,
                                   PresenceRegistry* presence,
                                   storage::RoleStore* store,
                                   UuidV7Generator* ids, Executor executor)
    : roles_(roles),
      presence_(presence),
      store_(store),
      ids_(ids),
      executor_(std::move(executor)) {}

RoleChangeFanout::~RoleChangeFanout() { Stop(); }

absl::Status RoleChangeFanout::Start() {
  absl::StatusOr<RoleWatchStart> start = roles_->Watch(
      RoleWatchFilter{}, [this](const RoleEvent& event) { OnEvent(event); });
  if (!start.ok()) return start.status();
  watch_ = std::move(start->watch);
  absl::MutexLock lock(&mu_);
  // A change delivered while the snapshot was read is newer: keep it.
  for (const RoleRecord& row : start->snapshot) {
    Seen& seen = seen_[row.role_key_wire];
    if (row.version > seen.version) {
      seen = Seen{row.version, row.state, row.holder_agent_id};
    }
  }
  return absl::OkStatus();
}

void RoleChangeFanout::Stop() {
  if (watch_ != nullptr) watch_->Cancel();
}

// Runs on the registry's dispatcher: memory only, never blocks.
void RoleChangeFanout::OnEvent(const RoleEvent& event) {
  if (event.kind == RoleChangeKind::kSnapshot) return;
  const RoleRecord& row = event.role;
  Pending change;
  change.event = event;
  {
    absl::MutexLock lock(&mu_);
    if (event.kind == RoleChangeKind::kRemoved) {
      // The row is gone (its scope closed, for good): its last holder and
      // the one before are told; its candidates went with it.
      if (auto it = seen_.find(row.role_key_wire); it != seen_.end()) {
        change.previous_state = it->second.state;
        change.previous_holder = it->second.holder;
        seen_.erase(it);
      }
    } else {
      auto [it, inserted] = seen_.try_emplace(row.role_key_wire);
      Seen& seen = it->second;
      if (!inserted && row.version <= seen.version) return;  // already had it
      if (!inserted) {
        change.previous_state = seen.state;
        change.previous_holder = seen.holder;
      } else if (row.version > 0) {
        // Never seen (a row written before Start finished): the row's own
        // record of its previous holder is the best there is.
        change.previous_holder = row.previous_holder_agent_id;
      }
      seen = Seen{row.version, row.state, row.holder_agent_id};
    }
    queue_.push_back(std::move(change));
    if (draining_) return;  // the running drain takes it
    draining_ = true;
  }
  executor_([this] { Drain(); });
}

void RoleChangeFanout::Drain() {
  for (;;) {
    std::deque<Pending> batch;
    {
      absl::MutexLock lock(&mu_);
      if (queue_.empty()) {
        draining_ = false;
        return;
      }
      batch.swap(queue_);
    }
    // The candidates of the batch's roles as they are now, in one read; a
    // removed role's went with its row. A failed read only leaves them out.
    std::vector<std::string> wires;
    for (const Pending& change : batch) {
      if (change.event.kind != RoleChangeKind::kRemoved) {
        wires.push_back(change.event.role.role_key_wire);
      }
    }
    absl::flat_hash_map<std::string, std::vector<std::string>> candidates;
    if (!wires.empty()) {
      absl::StatusOr<std::vector<CandidateRecord>> read =
          store_->ListCandidatesOfRoles(wires);
      if (read.ok()) {
        for (CandidateRecord& c : *read) {
          candidates[c.role_key_wire].push_back(std::move(c.agent_id));
        }
      }
    }
    static const std::vector<std::string> kNone;
    for (const Pending& change : batch) {
      auto it = candidates.find(change.event.role.role_key_wire);
      Push(change, it != candidates.end() ? it->second : kNone);
    }
  }
}

void RoleChangeFanout::Push(const Pending& change,
                            const std::vector<std::string>& candidates) {
  const RoleRecord& row = change.event.role;
  std::vector<std::string> agents;
  auto add = [&agents](const std::string& agent_id) {
    if (agent_id.empty()) return;
    for (const std::string& a : agents) {
      if (a == agent_id) return;
    }
    agents.push_back(agent_id);
  };
  if (row.holder_agent_id) add(*row.holder_agent_id);
  if (change.previous_holder) add(*change.previous_holder);
  for (const std::string& agent_id : candidates) add(agent_id);
  for (const std::string& agent_id : agents) {
    RoleChangeNotice notice;
    notice.event_id = ids_->Next();
    notice.event = change.event;
    notice.previous_state = change.previous_state;
    presence_->DeliverRoleChange(agent_id, notice);
  }
}

}  // namespace hub
