// Activator: elections across hubs sharing a database
// (docs/design/multi-hub.md, "Elections across hubs"). Any hub may reserve
// a role for any candidate (the reservation is fenced by the row's version
// and epoch, so hubs ensuring at once still make one); only the hub that
// holds the reserved holder's presence can probe it and push its
// activation, so the reserving hub hands the flight to that hub, which
// finds it by its scan of reservations waiting for agents it holds.
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "registry/activator.h"

namespace hub {

std::map<std::string, std::string> PresenceStreamReach::HeldElsewhere(
    const std::vector<std::string>& agent_ids) {
  std::map<std::string, std::string> out;
  if (membership_ == nullptr || agent_ids.empty()) return out;
  absl::StatusOr<std::vector<storage::Membership::Holding>> held =
      membership_->LiveHoldersElsewhere(agent_ids);
  // Unknown (the database is unreachable): nobody is known to hold them,
  // which can only make a candidate look unreachable for this decision.
  if (!held.ok()) return out;
  for (const storage::Membership::Holding& h : *held) {
    out[h.agent_id] = h.hub_id;
  }
  return out;
}

bool Activator::HandOverFlight(const ResolvedRoleKey& key,
                               const RoleRecord& reserved) {
  if (!streams_->Shared()) return false;
  const std::string holder = reserved.holder_agent_id.value_or("");
  if (streams_->Attached(holder)) return false;
  // Without a stream here, where the holder is reached is the store's
  // answer, not this hub's memory: a hub that holds an agent (it registered
  // or heartbeated through it) is not told when another hub claims it (an
  // attach there), and learns it only at its next fenced write for the
  // agent, which an agent with no stream here may never cause. Probing from
  // that memory fails at once and counts against the candidate.
  const std::map<std::string, std::string> elsewhere =
      streams_->HeldElsewhere({holder});
  auto it = elsewhere.find(holder);
  // Held by no live seat (its hub died and no takeover ran yet, or nothing
  // ever held it, e.g. a database copied from SQLite): no hub has a stream
  // of it, so this one tries what it can reach (its locators) as one hub
  // would.
  if (it == elsewhere.end()) return false;
  streams_->HandOver(it->second);
  Land(key.wire);
  return true;
}

bool Activator::OwnsAckTimeout(const std::string& holder) {
  if (!streams_->Shared() || streams_->Attached(holder)) return true;
  // Held here by the store's answer (not by memory, which may not know that
  // another hub claimed the agent: HandOverFlight), or held by no live
  // seat: whichever hub sees it first (two at once may both count it, only
  // in that window).
  return streams_->HeldElsewhere({holder}).empty();
}

void Activator::ContinueHandedFlights() {
  if (!streams_->Shared()) return;
  const int64_t now = UnixMillis(clock_->Now());
  RoleListFilter filter;
  filter.states = {RoleState::kElectedProbing};
  std::string token;
  std::vector<RoleRecord> waiting;
  absl::flat_hash_set<std::string> probing;  // every role waiting for an ACK
  uint64_t scan_began;
  {
    absl::MutexLock lock(&mu_);
    scan_began = flights_;
  }
  while (true) {
    absl::StatusOr<RolePage> page = roles_->List(filter, 1000, token);
    if (!page.ok()) return;
    for (const RoleRecord& r : page->roles) {
      probing.insert(r.role_key_wire);
      if (!r.holder_agent_id.has_value()) continue;
      // Past its deadline: the tick's ACK timeout, not a flight.
      if (r.activation_deadline_ms.has_value() &&
          *r.activation_deadline_ms <= now) {
        continue;
      }
      if (!streams_->HeldHere(*r.holder_agent_id)) continue;
      waiting.push_back(r);
    }
    if (page->next_page_token.empty()) break;
    token = page->next_page_token;
  }
  {
    // A role no longer waiting for an ACK needs no memory of its flight
    // (one recorded since the scan began may be newer than what it read).
    absl::MutexLock lock(&mu_);
    absl::erase_if(flown_, [&](const auto& entry) {
      return entry.second.flight <= scan_began &&
             !probing.contains(entry.first);
    });
  }
  for (const RoleRecord& r : waiting) {
    RoleKeyRef ref;
    ref.wire = r.role_key_wire;
    absl::StatusOr<ResolvedRoleKey> key = ResolveRoleKey(ref);
    if (!key.ok()) continue;
    {
      absl::MutexLock lock(&mu_);
      auto flown = flown_.find(r.role_key_wire);
      if (flown != flown_.end() &&
          flown->second.activation_id == r.activation_id.value_or("")) {
        continue;  // this hub carried this activation already
      }
      if (!flying_.insert(r.role_key_wire).second) continue;
    }
    options_.executor([this, key = *key, r] {
      Fly(key, r, {*r.holder_agent_id}, "hygiene_changed");
    });
  }
}

}  // namespace hub
