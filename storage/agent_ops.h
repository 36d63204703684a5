// AgentStore's operations, written once for both engines. Each engine
// implements AgentRows, the statements of one transaction over the agents
// and hub_agent_owners tables in its own SQL; the operations below decide
// the rest the same way on SQLite and PostgreSQL: what a fenced presence
// write that changed no row means, who owns an agent id after a claim, and
// when a refused write means that this hub's seat is gone.
//
// A presence write is fenced in its statement's WHERE clause (the presence
// generation, the status and, with a seat, this hub's live seat) and
// decided by the row it changed, never by a read before it: another hub may
// write the same agent at any moment.
#ifndef HUB_STORAGE_AGENT_OPS_H_
#define HUB_STORAGE_AGENT_OPS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "records/agent.h"
#include "records/hub.h"
#include "storage/agent_store.h"

namespace hub::storage {

class AgentRows {
 public:
  virtual ~AgentRows() = default;

  // The seat this transaction's presence writes are fenced by: this hub's
  // (PostgreSQL, once its membership joined), else nullopt.
  virtual const std::optional<HubSeat>& seat() const = 0;

  // The agent's row, nullopt without one.
  virtual absl::StatusOr<std::optional<AgentRecord>> Load(
      absl::string_view agent_id) = 0;
  // AgentStore::RegisterAgent's upsert, one statement (the generation bump
  // and the identity patch together), after any owner claim. Returns the
  // row written, or nullopt when the seat's fence refused it.
  virtual absl::StatusOr<std::optional<AgentRecord>> Upsert(
      const AgentRegistration& registration) = 0;
  // The fenced UPDATEs of AgentStore's presence writes. Each returns the
  // row it changed, or nullopt when its fence refused it.
  virtual absl::StatusOr<std::optional<AgentRecord>> Refresh(
      absl::string_view agent_id, std::optional<int64_t> generation,
      int64_t now_ms, int64_t lease_ttl_ms) = 0;
  virtual absl::StatusOr<std::optional<AgentRecord>> SetStatus(
      absl::string_view agent_id, std::optional<int64_t> generation,
      AgentStatus status) = 0;
  // Refresh, also fenced by status not offline and the seat, and recording
  // the seat as the presence's holder. Without a seat, Refresh.
  virtual absl::StatusOr<std::optional<AgentRecord>> Claim(
      absl::string_view agent_id, int64_t generation, int64_t now_ms,
      int64_t lease_ttl_ms) = 0;
  // Ends the seat's hold (the seat is set); whether the row changed.
  virtual absl::StatusOr<bool> Release(const LeaseCheckpoint& last) = 0;
  // AgentStore::SweepAgentPresence's transitions, each fenced by what it
  // moves from, in any order.
  virtual absl::StatusOr<std::vector<PresenceTransition>> Sweep(
      int64_t now_ms, int64_t offline_after_ms) = 0;
  // AgentStore::CheckpointLeases on a non-empty batch.
  virtual absl::StatusOr<std::vector<bool>> Checkpoint(
      const std::vector<LeaseCheckpoint>& leases) = 0;
  // Every agent, by agent_id; one keyset page of them.
  virtual absl::StatusOr<std::vector<AgentRecord>> All() = 0;
  virtual absl::StatusOr<std::vector<AgentRecord>> Page(
      const AgentPageQuery& query) = 0;

  // hub_agent_owners. Inserts (agent_id, principal) unless the agent has
  // an owner; a concurrent insert by another hub waits for the first and
  // then does nothing.
  virtual absl::Status InsertOwner(absl::string_view agent_id,
                                   absl::string_view principal,
                                   int64_t now_ms) = 0;
  // The agent's owner on record, nullopt without one.
  virtual absl::StatusOr<std::optional<std::string>> Owner(
      absl::string_view agent_id) = 0;
  // Every (agent_id, owner), by agent_id.
  virtual absl::StatusOr<std::vector<std::pair<std::string, std::string>>>
  Owners() = 0;
};

// AgentStore::RegisterAgent: the owner claim (when the registration names
// an owner), then the upsert (RegisteredAgent).
absl::StatusOr<AgentRecord> RegisterWith(AgentRows& rows,
                                         const AgentRegistration& r);
// The registration's answer from the upsert's row: no row is HUB_SEAT_LOST
// with a seat (its fence refused the write), else STORE_INTERNAL.
absl::StatusOr<AgentRecord> RegisteredAgent(
    absl::StatusOr<std::optional<AgentRecord>> row,
    const std::optional<HubSeat>& seat);
// A fenced presence write's outcome from the row it changed: applied, or
// (no row changed) stale generation or not found, with the latest row.
absl::StatusOr<PresenceWrite> PresenceOutcomeWith(
    AgentRows& rows, absl::StatusOr<std::optional<AgentRecord>> written,
    absl::string_view agent_id);
// AgentStore::ClaimPresence: as above, and HUB_SEAT_LOST when the claim was
// refused though the generation is current and the agent not offline (only
// the seat's fence can have refused it).
absl::StatusOr<PresenceWrite> ClaimWith(AgentRows& rows,
                                        absl::string_view agent_id,
                                        int64_t generation, int64_t now_ms,
                                        int64_t lease_ttl_ms);
// AgentStore::SweepAgentPresence: the transitions by agent_id.
absl::StatusOr<std::vector<PresenceTransition>> SweepWith(
    AgentRows& rows, int64_t now_ms, int64_t offline_after_ms);
// AgentStore::GetAgent: AGENT_NOT_FOUND without a row.
absl::StatusOr<AgentRecord> GetWith(AgentRows& rows,
                                    absl::string_view agent_id);
// AgentStore::ClaimAgentOwner: the owner on record after the claim.
absl::StatusOr<std::string> ClaimOwnerWith(AgentRows& rows,
                                           absl::string_view agent_id,
                                           absl::string_view principal,
                                           int64_t now_ms);

}  // namespace hub::storage

#endif  // HUB_STORAGE_AGENT_OPS_H_
