// AgentStore: the agents table, their presence leases and their owners
// (hub_agent_owners). Every presence write is fenced in its UPDATE's WHERE
// clause by the presence generation (and, with a membership, by this hub's
// seat) and decided by the rows it changed. The contracts every store
// method keeps (durability, fences as values, error reasons) are in
// storage/store.h.
#ifndef HUB_STORAGE_AGENT_STORE_H_
#define HUB_STORAGE_AGENT_STORE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "records/agent.h"
#include "storage/store_types.h"

namespace hub::storage {

struct AgentRegistration {
  std::string agent_id;
  std::string cli;
  std::optional<int64_t> pid;
  std::string capabilities_json = "[]";  // replaced wholesale
  std::string topics_json = "[]";
  std::string metadata_json = "{}";
  int64_t now_ms = 0;
  int64_t lease_ttl_ms = 30'000;
  // Identity, written in the same statement as the upsert. Keep = leave the
  // stored value; Clear = NULL (locators: "[]").
  Patch<std::string> project_id;
  Patch<std::string> session_id;
  Patch<std::string> host_id;
  Patch<std::string> transport_locators_json;
  // The principal registering (tokens on). The registration then also
  // claims the agent id for it in the same transaction, first claimant wins
  // (hub_agent_owners): when another principal owns the id nothing is
  // written and the answer is PERMISSION_DENIED / PERMISSION_DENIED with
  // metadata agent_id. nullopt: no ownership (anonymous callers).
  std::optional<std::string> owner;
};

// Outcome of a write fenced by presence_generation.
enum class PresenceOutcome {
  kApplied,
  kNotFound,         // no row with that agent_id
  kStaleGeneration,  // the row's generation differs from the caller's
};
struct PresenceWrite {
  PresenceOutcome outcome = PresenceOutcome::kNotFound;
  std::optional<AgentRecord> agent;  // the row after the call, if it exists
};

// One row changed by SweepAgentPresence.
struct PresenceTransition {
  std::string agent_id;
  int64_t presence_generation = 0;
  AgentStatus from_status = AgentStatus::kOffline;
  AgentStatus to_status = AgentStatus::kOffline;
};

// A lease renewed in memory (heartbeats, attached presence streams), written
// back in batches by CheckpointLeases.
// One keyset page of agents (AgentStore::ListAgentsPage), by agent_id. Filters
// combine with AND; unset matches all.
struct AgentPageQuery {
  std::string after_agent_id;     // only agent_id > this ("" = from the start)
  std::vector<std::string> clis;  // empty = any
  std::optional<std::string> project_id;
  // When set, only agents whose project is one of these: an empty list
  // matches nothing, and agents without a project never match.
  std::optional<std::vector<std::string>> projects;
  // Only agents whose topics_json is an array holding this string.
  std::optional<std::string> topic;
  int64_t limit = 100;  // rows at most; must be > 0
};

struct LeaseCheckpoint {
  std::string agent_id;
  int64_t presence_generation = 0;
  int64_t last_seen_ms = 0;
  int64_t lease_expires_ms = 0;
  int64_t lease_ttl_ms = 0;
};

// NOT_FOUND / AGENT_NOT_FOUND for an agent id nobody registered, naming it
// (metadata agent_id).
absl::Status AgentNotFound(absl::string_view agent_id);

// PERMISSION_DENIED: `agent_id` is owned by another principal than `owner`
// (a registration's claim lost; metadata agent_id).
absl::Status OwnedByAnotherError(absl::string_view agent_id,
                                 absl::string_view owner);

// The reason-coded status of a presence fence's outcome: kStaleGeneration
// -> FAILED_PRECONDITION / STALE_PRESENCE_OWNER, kNotFound -> NOT_FOUND /
// AGENT_NOT_FOUND, kApplied -> OK.
absl::Status ToStatus(PresenceOutcome outcome, absl::string_view agent_id);

class AgentStore {
 public:
  virtual ~AgentStore() = default;

  // Upserts the agent: status online, last_seen = now, lease = now + ttl,
  // cli/pid/capabilities/topics/metadata replaced; generation 1 on insert,
  // +1 on conflict; identity patched in the same statement. Returns the row.
  // With a membership, the registering hub holds the agent's presence from
  // then on, and a hub whose seat is not live writes nothing (UNAVAILABLE /
  // HUB_SEAT_LOST).
  virtual absl::StatusOr<AgentRecord> RegisterAgent(
      const AgentRegistration& registration) = 0;
  // RegisterAgent without parking the caller: `done` runs once, when the
  // write is durable or failed, on a store thread (or on the caller's
  // thread, when the write failed before it was queued).
  virtual void RegisterAgentAsync(const AgentRegistration& registration,
                                  Callback<AgentRecord> done) = 0;
  // Sets last_seen = now, lease = now + ttl, status online, WHERE the row's
  // generation equals `generation`; an absent generation is triflux's legacy
  // unguarded call. Fence: a superseded owner cannot extend the new owner's
  // lease.
  virtual absl::StatusOr<PresenceWrite> RefreshLeaseForGeneration(
      absl::string_view agent_id, std::optional<int64_t> generation,
      int64_t now_ms, int64_t lease_ttl_ms) = 0;
  // Records that this hub holds the agent's presence stream (an attach or a
  // heartbeat through a hub that did not hold it), renewing the lease like
  // RefreshLeaseForGeneration, fenced by the generation, status not
  // offline and, with a membership, this hub's live seat. Another hub's
  // hold ends then: its writes for the agent no longer apply. A store one
  // hub holds (no membership) only renews the lease.
  virtual absl::StatusOr<PresenceWrite> ClaimPresence(
      absl::string_view agent_id, int64_t generation, int64_t now_ms,
      int64_t lease_ttl_ms) {
    return RefreshLeaseForGeneration(agent_id, generation, now_ms,
                                     lease_ttl_ms);
  }
  // Ends this hub's hold of the agent's presence (its stream's detach grace
  // ran out), writing its last lease (`last`) in the same statement, fenced
  // by the generation, status not offline and, with a membership, by this
  // hub's seat still holding it. False: another hub holds it now (or the
  // generation moved on), so the agent is not gone. Without a membership,
  // true (the lease is checkpointed as usual).
  virtual absl::StatusOr<bool> ReleasePresence(const LeaseCheckpoint& last) {
    (void)last;
    return true;
  }
  // Sets status under the same fence as above.
  virtual absl::StatusOr<PresenceWrite> SetAgentStatusForGeneration(
      absl::string_view agent_id, std::optional<int64_t> generation,
      AgentStatus status) = 0;
  // One step per row: online -> stale when lease < now; stale -> offline
  // when lease < now - offline_after_ms (triflux: 300'000). Each row is
  // updated WHERE agent_id, generation and status still equal what was read,
  // so a concurrent re-registration is never knocked stale. Returns the rows
  // changed.
  virtual absl::StatusOr<std::vector<PresenceTransition>> SweepAgentPresence(
      int64_t now_ms, int64_t offline_after_ms) = 0;
  // Writes leases renewed in memory, all in one operation (one sync). Each
  // row is updated only WHERE its generation still matches and it is not
  // offline, so a superseded or departed owner's lease is never written
  // back; with a membership, also only while this hub's seat holds the
  // agent's presence. Returns, per entry in order, whether its row was
  // written. With a membership whose seat is not live when the statement
  // runs (its lease ran out by the database's clock, or it was declared
  // dead), writes nothing and fails with HUB_SEAT_LOST: a refused row thus
  // always means the row names another holder, generation or status.
  virtual absl::StatusOr<std::vector<bool>> CheckpointLeases(
      const std::vector<LeaseCheckpoint>& leases) = 0;
  // NotFound (AGENT_NOT_FOUND) when absent.
  virtual absl::StatusOr<AgentRecord> GetAgent(absl::string_view agent_id) = 0;
  // Every agent, by agent_id.
  virtual absl::StatusOr<std::vector<AgentRecord>> ListAgents() = 0;
  // At most query.limit agents matching the query, by agent_id: one keyset
  // page, so its cost follows the page, not the table.
  virtual absl::StatusOr<std::vector<AgentRecord>> ListAgentsPage(
      const AgentPageQuery& query) = 0;

  // ---- agent owners (hub_agent_owners, hub_schema_version 2)
  // Records `principal` as the owner of `agent_id` unless the agent already
  // has one, and returns the owner on record afterwards: the first claimant
  // wins, later claims change nothing.
  virtual absl::StatusOr<std::string> ClaimAgentOwner(
      absl::string_view agent_id, absl::string_view principal,
      int64_t now_ms) = 0;
  // Every (agent_id, owner) pair, by agent_id.
  virtual absl::StatusOr<std::vector<std::pair<std::string, std::string>>>
  ListAgentOwners() = 0;
};

}  // namespace hub::storage

#endif  // HUB_STORAGE_AGENT_STORE_H_
