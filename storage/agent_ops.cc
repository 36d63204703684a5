#include "storage/agent_ops.h"

#include <algorithm>
#include <utility>

#include "status/status.h"
#include "storage/membership.h"

namespace hub::storage {

absl::StatusOr<std::string> ClaimOwnerWith(AgentRows& rows,
                                           absl::string_view agent_id,
                                           absl::string_view principal,
                                           int64_t now_ms) {
  if (absl::Status s = rows.InsertOwner(agent_id, principal, now_ms); !s.ok())
    return s;
  absl::StatusOr<std::optional<std::string>> owner = rows.Owner(agent_id);
  if (!owner.ok()) return owner.status();
  if (!owner->has_value()) {
    return ReasonError(absl::StatusCode::kInternal, "STORE_INTERNAL",
                       "agent owner row vanished");
  }
  return std::move(**owner);
}

absl::StatusOr<AgentRecord> RegisteredAgent(
    absl::StatusOr<std::optional<AgentRecord>> row,
    const std::optional<HubSeat>& seat) {
  if (!row.ok()) return row.status();
  if (row->has_value()) return std::move(**row);
  if (seat.has_value()) return SeatLostError(seat->hub_id);
  return ReasonError(absl::StatusCode::kInternal, "STORE_INTERNAL",
                     "agent upsert returned no row");
}

absl::StatusOr<AgentRecord> RegisterWith(AgentRows& rows,
                                         const AgentRegistration& r) {
  if (r.owner.has_value()) {
    absl::StatusOr<std::string> owner =
        ClaimOwnerWith(rows, r.agent_id, *r.owner, r.now_ms);
    if (!owner.ok()) return owner.status();
    if (*owner != *r.owner) return OwnedByAnotherError(r.agent_id, *r.owner);
  }
  return RegisteredAgent(rows.Upsert(r), rows.seat());
}

absl::StatusOr<PresenceWrite> PresenceOutcomeWith(
    AgentRows& rows, absl::StatusOr<std::optional<AgentRecord>> written,
    absl::string_view agent_id) {
  if (!written.ok()) return written.status();
  PresenceWrite w;
  if (written->has_value()) {
    w.outcome = PresenceOutcome::kApplied;
    w.agent = std::move(*written);
    return w;
  }
  absl::StatusOr<std::optional<AgentRecord>> row = rows.Load(agent_id);
  if (!row.ok()) return row.status();
  w.outcome = row->has_value() ? PresenceOutcome::kStaleGeneration
                               : PresenceOutcome::kNotFound;
  w.agent = std::move(*row);
  return w;
}

absl::StatusOr<PresenceWrite> ClaimWith(AgentRows& rows,
                                        absl::string_view agent_id,
                                        int64_t generation, int64_t now_ms,
                                        int64_t lease_ttl_ms) {
  absl::StatusOr<PresenceWrite> w = PresenceOutcomeWith(
      rows, rows.Claim(agent_id, generation, now_ms, lease_ttl_ms), agent_id);
  if (!w.ok()) return w.status();
  const std::optional<HubSeat>& seat = rows.seat();
  if (seat.has_value() && w->outcome != PresenceOutcome::kApplied &&
      w->agent.has_value() && w->agent->presence_generation == generation &&
      w->agent->status != AgentStatus::kOffline) {
    return SeatLostError(seat->hub_id);
  }
  return w;
}

absl::StatusOr<std::vector<PresenceTransition>> SweepWith(
    AgentRows& rows, int64_t now_ms, int64_t offline_after_ms) {
  absl::StatusOr<std::vector<PresenceTransition>> moved =
      rows.Sweep(now_ms, offline_after_ms);
  if (!moved.ok()) return moved.status();
  std::sort(moved->begin(), moved->end(),
            [](const PresenceTransition& a, const PresenceTransition& b) {
              return a.agent_id < b.agent_id;
            });
  return moved;
}

absl::StatusOr<AgentRecord> GetWith(AgentRows& rows,
                                    absl::string_view agent_id) {
  absl::StatusOr<std::optional<AgentRecord>> row = rows.Load(agent_id);
  if (!row.ok()) return row.status();
  if (!row->has_value()) return AgentNotFound(agent_id);
  return std::move(**row);
}

}  // namespace hub::storage
