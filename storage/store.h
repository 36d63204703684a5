// The Store: every durable thing in hub goes through this interface.
//
// A Store persists agents, roles, role candidates and messages and offers the
// fenced primitives the registry decides authority with. It does not decide
// anything itself: no role transitions, no eligibility, no wire decoding (the
// caller passes decoded fields). Plain C++ types and absl::Status only, so a
// PostgreSQL implementation can follow without changing callers.
//
// Contracts shared by every method:
//  - Thread-safe. A write that returns (OK or a fence outcome) is committed
//    with the configured durability; a write that returns a storage error
//    changed nothing, except STORE_COMMIT_UNKNOWN: the connection to the
//    database broke while the write was committing and whether it committed
//    could not be learned (PostgreSQL; docs/design/postgres.md).
//  - A fenced write carries its fence in the SQL WHERE clause and checks the
//    changed-row count; losing the fence is an outcome value (with the latest
//    row), not a storage error, and changes nothing.
//  - Storage errors carry a reason (status/status.h): STORE_BUSY,
//    STORE_READ_ONLY, STORE_UNAVAILABLE, STORE_COMMIT_UNKNOWN (UNAVAILABLE);
//    STORE_FULL (RESOURCE_EXHAUSTED); STORE_CONSTRAINT (FAILED_PRECONDITION,
//    a row broke a schema constraint); STORE_CORRUPT, STORE_NOT_SQLITE,
//    SCHEMA_TOO_NEW, STORE_UNRECOGNIZED (FAILED_PRECONDITION, at open).
//  - Times are milliseconds since the Unix epoch (triflux's *_ms columns).
#ifndef HUB_STORAGE_STORE_H_
#define HUB_STORAGE_STORE_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <iterator>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "records/agent.h"
#include "records/hub.h"
#include "records/message.h"
#include "records/role.h"
#include "storage/reservations.h"

namespace hub::storage {

// A field of a patch: keep the stored value (default), set a value, or clear
// it (SQL NULL). Keeps "absent" and "explicit null" apart (triflux bug #22).
template <typename T>
class Patch {
 public:
  Patch() = default;  // keep
  template <typename U,
            typename = std::enable_if_t<std::is_constructible_v<T, U&&>>>
  Patch(U&& value)  // NOLINT(google-explicit-constructor): set
      : kind_(Kind::kSet), value_(std::forward<U>(value)) {}
  static Patch Clear() {
    Patch p;
    p.kind_ = Kind::kClear;
    return p;
  }
  bool keep() const { return kind_ == Kind::kKeep; }
  bool clear() const { return kind_ == Kind::kClear; }
  bool set() const { return kind_ == Kind::kSet; }
  // REQUIRES: set().
  const T& value() const { return *value_; }
  // Applies the patch to a nullable stored value.
  std::optional<T> ApplyTo(const std::optional<T>& current) const {
    if (keep()) return current;
    return value_;
  }

 private:
  enum class Kind { kKeep, kSet, kClear };
  Kind kind_ = Kind::kKeep;
  std::optional<T> value_;
};

// ---- agents ----------------------------------------------------------------

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
// One keyset page of agents (Store::ListAgentsPage), by agent_id. Filters
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

// ---- roles -----------------------------------------------------------------

// Mutable role columns. Keep = current value; Clear = NULL. For the NOT NULL
// columns (state, retry_count, last_reason) Clear means keep, as in triflux.
struct RolePatch {
  Patch<RoleState> state;
  Patch<std::string> holder_agent_id;
  Patch<std::string> previous_holder_agent_id;
  Patch<std::string> activation_id;
  Patch<int64_t> activation_deadline_ms;
  Patch<int64_t> holder_lease_expires_ms;
  Patch<std::string> charter_version;
  Patch<int64_t> charter_acked_epoch;
  Patch<int64_t> retry_count;
  Patch<int64_t> next_probe_ms;
  Patch<std::string> blocked_reason;
  std::optional<int64_t> last_transition_ms;  // default: now_ms
  Patch<std::string> last_reason;
};

// ReserveRole input (TRIFLUX-HUB.md §5.3).
struct RoleReservation {
  std::string role_key_wire;
  std::string project_id;
  std::string role_kind;
  std::string scope_id;
  std::optional<int64_t> expected_version;  // default: current
  std::optional<int64_t> expected_epoch;    // default: current
  // If given, must be exactly current + 1 (else kStaleEpoch /
  // kStaleActivationSeq); they exist so a caller can assert the value.
  std::optional<int64_t> next_epoch;
  std::optional<int64_t> next_activation_seq;
  // Defaults: state = elected-probing if a holder is set, else electable;
  // activation_id = a new UUIDv7 if a holder is set, else current;
  // previous_holder = the old holder when the holder changes; last_reason =
  // "role_reserved"; last_transition = now_ms.
  RolePatch patch;
  int64_t now_ms = 0;
};

// CompareAndSetRole input (§5.4). The four guards are all required; an
// expected activation value may be null (compared null-safely).
struct RoleCas {
  std::string role_key_wire;
  std::optional<int64_t> expected_version;
  std::optional<int64_t> expected_epoch;
  std::optional<std::optional<int64_t>> expected_activation_seq;
  std::optional<std::optional<std::string>> expected_activation_id;
  RolePatch patch;
  int64_t now_ms = 0;
};

enum class RoleOutcome {
  kApplied,
  kNotFound,
  kStaleVersion,
  kStaleEpoch,
  kStaleActivationSeq,
  kStaleActivationId,
  kInvalidCas,   // a CAS guard was missing
  kCasConflict,  // lost a race that the pre-check did not explain
};
struct RoleWrite {
  RoleOutcome outcome = RoleOutcome::kNotFound;
  std::optional<RoleRecord> role;  // the updated row, or the latest row
};
// triflux's lower-case reason string for an outcome ("stale_epoch", ...).
absl::string_view RoleOutcomeName(RoleOutcome outcome);

struct RoleFilter {
  std::optional<std::string> project_id;
  std::optional<std::string> role_kind;
  std::optional<std::string> scope_id;
  std::vector<RoleState> states;  // empty = any
  // Keyset paging: only role_key_wire > after_wire (bytes), only rows whose
  // project is one of `projects` when set (empty list: none), and at most
  // `limit` rows when limit > 0.
  std::optional<std::string> after_wire;
  std::optional<std::vector<std::string>> projects;
  int64_t limit = 0;
};

// One committed change of a role row, as a store's role change log records
// it (Store::ReadRoleChanges).
struct RoleChange {
  enum class Kind { kCreated, kUpdated, kRemoved };
  // The change's place in commit order: 1, 2, 3, ... with no hole.
  int64_t seq = 0;
  Kind kind = Kind::kUpdated;
  // The row after the change; for kRemoved, the row as it was.
  RoleRecord role;
  // When it committed, by the database's clock.
  int64_t committed_at_ms = 0;
};

// One read of the role change log (Store::ReadRoleChanges).
struct RoleChangePage {
  std::vector<RoleChange> changes;  // by seq
  // The newest seq committed as of the read (the same snapshot).
  int64_t head = 0;
};

// One keyset page of candidates (Store::ListCandidatesPage), ordered by
// role_key_wire, then the activator's order: priority DESC, updated_at_ms
// DESC, agent_id ASC. Filters combine with AND; unset matches all.
struct CandidatePageQuery {
  std::optional<std::string> role_key_wire;
  std::optional<std::string> agent_id;
  // Only candidates of roles whose project is one of these (empty: none).
  // Without role_key_wire, only candidates whose role row exists are listed.
  std::optional<std::vector<std::string>> projects;
  struct Key {
    std::string role_key_wire;
    int64_t priority = 0;
    int64_t updated_at_ms = 0;
    std::string agent_id;
  };
  std::optional<Key> after;
  int64_t limit = 0;  // 0 = every row
};

// UpsertCandidate input (§5.6): absent fields keep the stored value (or take
// the column default on insert: source "operator", priority 0).
struct CandidateUpsert {
  std::string role_key_wire;
  std::string agent_id;
  std::optional<std::string> source;
  std::optional<int64_t> priority;
  std::optional<std::string> transport_locators_json;
  std::optional<int64_t> consecutive_probe_failures;
  Patch<int64_t> excluded_until_ms;
  Patch<int64_t> last_probe_ms;
  Patch<std::string> last_probe_code;
  int64_t now_ms = 0;
};

struct ReachabilityUpdate {
  enum class Failures { kKeep, kSet, kIncrement, kReset };
  std::string role_key_wire;
  std::string agent_id;
  Failures failures = Failures::kKeep;
  int64_t failures_value = 0;  // used with kSet
  Patch<int64_t> excluded_until_ms;
  // When set, the exclusion end is decided inside the write, from the row's
  // failure count after this update (`excluded_until_ms` is then ignored), so
  // concurrent updates each derive it from the count they commit. Runs on
  // the writer thread: must be cheap and must not call the store.
  std::function<int64_t(int64_t failures_after)> excluded_until_for;
  std::optional<int64_t> last_probe_ms;  // default: now_ms
  Patch<std::string> last_probe_code;
  int64_t now_ms = 0;
};

// ---- messages --------------------------------------------------------------

// One message claimed by SweepExpiredMessages (or dead-lettered by
// CloseLeadScope).
struct ExpiryTransition {
  std::string message_id;
  MessageStatus previous_status = MessageStatus::kQueued;  // or delivered
  std::string reason;  // "ttl_expired" (or "ROLE_SCOPE_CLOSED")
  int64_t failed_at_ms = 0;
  bool dlq_inserted = false;  // false: an earlier dead letter row was kept
};

// Keyset pages of message listings. Each `after` is the listing's key of the
// last row already returned (rows strictly after it come back); limit 0 =
// every row.

// ListPendingPage: the agent's unacked queued|delivered messages with
// expires > now, priority DESC, created ASC, id ASC.
struct PendingPageQuery {
  std::string agent_id;
  int64_t now_ms = 0;
  std::optional<std::string> topic;
  struct Key {
    int64_t priority = 0;
    int64_t created_at_ms = 0;
    std::string id;
  };
  std::optional<Key> after;
  int64_t limit = 0;
};

// ListTraceMessages: one trace's messages, any status, created ASC, id ASC.
struct TracePageQuery {
  std::string trace_id;
  struct Key {
    int64_t created_at_ms = 0;
    std::string id;
  };
  std::optional<Key> after;
  int64_t limit = 0;
};

// ListDeadLetters: failed_at DESC, message_id ASC.
struct DeadLetterPageQuery {
  std::optional<std::string> reason;
  // Only dead letters whose message exists and was sent by this agent.
  std::optional<std::string> from_agent;
  struct Key {
    int64_t failed_at_ms = 0;
    std::string message_id;
  };
  std::optional<Key> after;
  int64_t limit = 0;
};

// A dead letter and its message, when the message row still exists.
struct DeadLetterRow {
  DeadLetterRecord dead_letter;
  std::optional<MessageRecord> message;
};

struct RecoveryResult {
  std::vector<RoleRecord> recovered;  // rows RecoverRoles changed, after
  std::vector<RoleRecord> roles;      // every row, after recovery
  std::vector<MessageRecord> pending_role_messages;
};

// ---- closed lead scopes (hub_closed_scopes, hub_schema_version 3) ----------

// The dead letter reason of a closed scope's role messages.
inline constexpr char kScopeClosedReason[] = "ROLE_SCOPE_CLOSED";

// ListClosedScopes filters; they combine with AND, unset matches all.
struct ClosedScopeFilter {
  std::optional<std::string> project_id;
  std::optional<std::string> scope_id;
  // Keyset paging, as in RoleFilter: role_key_wire > after_wire, projects
  // among `projects` when set, at most `limit` rows when limit > 0.
  std::optional<std::string> after_wire;
  std::optional<std::vector<std::string>> projects;
  int64_t limit = 0;
};

// CloseLeadScope input: the lead key's decoded fields and canonical wire.
struct ScopeClose {
  std::string project_id;
  std::string scope_id;
  std::string role_key_wire;
  std::string closed_by;
  std::string reason;
  int64_t now_ms = 0;
};

// A pending message CloseLeadScope dead-lettered.
struct ClaimedMessage {
  MessageRecord message;        // as it was (queued | delivered)
  ExpiryTransition transition;  // reason ROLE_SCOPE_CLOSED
};

struct ScopeCloseResult {
  // The record on file: the new one, or the earlier one when already closed.
  ClosedScopeRecord closed;
  bool already_closed = false;             // then nothing was changed
  std::optional<RoleRecord> removed_role;  // the deleted row, as it was
  int64_t candidates_removed = 0;
  std::vector<ClaimedMessage> dead_lettered;
};

// ---- re-driving a dead letter (Store::RedriveDeadLetter) -----------------

struct DeadLetterRedrive {
  std::string message_id;
  int64_t now_ms = 0;
  // An agent to make a recipient in the same write unless it is one already
  // (a role message's live holder).
  std::optional<std::string> add_recipient;
  // When > 0, as a publish's: a recipient it would make pending again (or
  // add) that already has this many unacknowledged messages refuses the
  // re-drive before anything is written (InboxFullError).
  int64_t max_pending_per_inbox = 0;
};

struct RedriveResult {
  // The message after the re-drive: status queued, expires_at now + its ttl.
  MessageRecord message;
  // The dead letter the re-drive removed (nullopt if it had none).
  std::optional<DeadLetterRecord> dead_letter;
  // Every recipient that had not acknowledged the message (add_recipient
  // included), by agent_id: each row is pending again, delivered_at cleared.
  std::vector<std::string> recipients;
};

// FAILED_PRECONDITION / MESSAGE_NOT_DEAD_LETTER (metadata message_id,
// status): the message is not (or no longer) a dead letter.
absl::Status NotDeadLetterError(absl::string_view message_id,
                                MessageStatus status);

// FAILED_PRECONDITION / ROLE_SCOPE_CLOSED (metadata role_key_wire): the lead
// scope of `wire` is closed.
absl::Status ScopeClosedError(absl::string_view wire);

// A store's group-commit counters, for metrics.
struct WriteStats {
  int64_t groups = 0;
  int64_t ops = 0;
  // Groups run a second time, with savepoints, because an operation
  // failed after writing.
  int64_t replays = 0;
  // Operations run again in a later group because the database refused
  // them (or their group's COMMIT) for a lock conflict with another hub.
  int64_t lock_retries = 0;
  // Groups committed by a caller's thread leading the writer (SQLite:
  // CommitOnThisThread), and the times the writer thread took the queue
  // from a leader that had held it without committing for a while.
  int64_t led_groups = 0;
  int64_t leader_stalls = 0;
};

struct StoreInfo {
  std::string store_type;  // "sqlite"
  // SQLite: the file's absolute path; PostgreSQL: postgresql://USER@HOST:
  // PORT/DATABASE, without a password.
  std::string db_path;
  // "sqlite:" + sha256(db_path) hex; "postgres:" + sha256(the cluster's
  // system identifier and the database name) hex.
  std::string fingerprint;
  std::string schema_version;      // triflux-compatible, "8"
  std::string hub_schema_version;  // hub's own, "4"
};

// OK, or FAILED_PRECONDITION / STALE_PRESENCE_OWNER when an acknowledging
// caller's `claimed` generation is not the agent's `current` one.
absl::Status CheckAckGeneration(int64_t current,
                                std::optional<int64_t> claimed);

// RESOURCE_EXHAUSTED / LIMIT_EXCEEDED: `agent_id` already has `limit`
// pending messages (limit max_pending_per_inbox, metadata agent_id).
absl::Status InboxFullError(absl::string_view agent_id, int64_t limit);

// PERMISSION_DENIED: `agent_id` is owned by another principal than `owner`
// (a registration's claim lost; metadata agent_id).
absl::Status OwnedByAnotherError(absl::string_view agent_id,
                                 absl::string_view owner);

// ---- hubs sharing one database (docs/design/multi-hub.md) -----------------

// A message waiting for its first delivery to one of its recipients
// (Store::ListUndelivered).
struct UndeliveredMessage {
  std::string agent_id;
  MessageRecord message;
};

// An agent whose presence a dead hub held, now held by this hub.
struct TakenAgent {
  std::string agent_id;
  int64_t presence_generation = 0;
  std::string from_hub_id;
};

enum class RenewOutcome {
  kRenewed,
  // The seat is gone: another hub declared this one dead (its lease ran
  // out in the database's clock) or it left. Join again.
  kLost,
};

// Membership of the hubs sharing a database. Every write a hub makes on
// behalf of the presence it holds is fenced in SQL by its seat (hub id,
// incarnation, state live); a seat another hub declared dead fences them
// all at once. Times are the database's clock, never a hub's. Thread-safe;
// its statements run on a connection of their own, so a slow group commit
// never delays a renewal.
class Membership {
 public:
  virtual ~Membership() = default;
  // Takes a seat under a new incarnation (a number never handed out
  // before, cluster-wide), live until now + ttl in the database's clock.
  // Writes made for presence carry it from then on. A hub that joins again
  // (it lost its seat) moves, in the same transaction, the agents its
  // previous incarnation still held to the new one and returns them: it
  // dropped their streams, so it runs their detach grace.
  struct Joined {
    HubSeat seat;
    std::vector<TakenAgent> taken;
  };
  virtual absl::StatusOr<Joined> Join(absl::string_view address,
                                      int64_t ttl_ms) = 0;
  // Extends the seat's lease to now + ttl, fenced by the incarnation and
  // state live.
  virtual absl::StatusOr<RenewOutcome> Renew(int64_t ttl_ms) = 0;
  // Declares dead every other hub whose lease ran out (or that left), each
  // fenced by the incarnation read, and takes over, in the same
  // transaction, the presence of the agents they held (not offline). Only
  // while this hub's own seat is live. Each dead hub is declared once,
  // whichever hub runs this first.
  virtual absl::StatusOr<std::vector<TakenAgent>> TakeOverDeadHubs() = 0;
  // The agents whose presence this seat holds (not offline), by agent_id:
  // what a takeover whose answer was lost took.
  virtual absl::StatusOr<std::vector<TakenAgent>> HeldAgents() = 0;
  // Gives up the seat (state left, lease ended) so that the other hubs take
  // over its agents at once instead of after the lease.
  virtual absl::Status Leave() = 0;
  // The seat writes are fenced by now (incarnation 0 before Join).
  virtual HubSeat seat() const = 0;
  // Every row of the membership table, by hub_id.
  virtual absl::StatusOr<std::vector<HubMember>> ListHubs() = 0;
  // The other hubs whose seats hold any of `agent_ids` now (where a message
  // for them is to be pushed), by hub_id.
  virtual absl::StatusOr<std::vector<std::string>> HubsHolding(
      const std::vector<std::string>& agent_ids) = 0;
  // Which of `agent_ids` (not offline) another hub's live seat (lease not
  // over in the database's clock) holds now, with that hub's id: where the
  // work of reaching them belongs (an activation's probe and push).
  // Agents this hub holds, or no live seat holds, are absent.
  struct Holding {
    std::string agent_id;
    std::string hub_id;
  };
  virtual absl::StatusOr<std::vector<Holding>> LiveHoldersElsewhere(
      const std::vector<std::string>& agent_ids) = 0;
};

class Store {
 public:
  // Receives a write's result once it is durable (or failed).
  template <typename T>
  using Callback = absl::AnyInvocable<void(absl::StatusOr<T>) &&>;

  virtual ~Store() = default;

  virtual StoreInfo Info() const = 0;
  // Group-commit counters (metrics).
  virtual WriteStats write_stats() const = 0;
  // Writes a consistent copy of the database, as of one moment, to `path`
  // (which must not exist), for AdminService.BackupStore. A store that
  // cannot (PostgreSQL: use its own tools) answers FAILED_PRECONDITION /
  // BACKUP_UNSUPPORTED.
  virtual absl::Status BackupTo(const std::string& path);

  // ---- agents
  // Upserts the agent: status online, last_seen = now, lease = now + ttl,
  // cli/pid/capabilities/topics/metadata replaced; generation 1 on insert,
  // +1 on conflict; identity patched in the same statement. Returns the row.
  // With a membership, the registering hub holds the agent's presence from
  // then on, and a hub whose seat is not live writes nothing (UNAVAILABLE /
  // HUB_SEAT_LOST).
  virtual absl::StatusOr<AgentRecord> RegisterAgent(
      const AgentRegistration& registration) = 0;
  // RegisterAgent without parking the caller: `done` runs once, later, on
  // a store thread. Stores without asynchronous writes keep this default,
  // which runs the blocking call and then `done` on the caller's thread.
  virtual void RegisterAgentAsync(const AgentRegistration& registration,
                                  Callback<AgentRecord> done) {
    std::move(done)(RegisterAgent(registration));
  }
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
  // The hubs sharing this database, or nullptr when one hub holds it
  // (SQLite: the lock file).
  virtual Membership* membership() { return nullptr; }
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

  // ---- closed lead scopes (hub_closed_scopes, hub_schema_version 3)
  // Closes a lead scope in one transaction: records it, deletes its role row
  // and candidates, and dead-letters every queued or delivered message whose
  // role_key_wire is the scope's (reason ROLE_SCOPE_CLOSED, first writer
  // wins, each claim fenced by the status it read, as the expiry sweep
  // does). A scope already closed changes nothing (already_closed).
  // From then on the store refuses, inside each write, everything that would
  // bring the scope back (ROLE_SCOPE_CLOSED): ReserveRole of that project and
  // scope, CompareAndSetRole, UpsertCandidate and UpdateCandidateReachability
  // of its wire when no row exists, and a message addressed to its wire.
  virtual absl::StatusOr<ScopeCloseResult> CloseLeadScope(
      const ScopeClose& close) = 0;
  // The closed-scope record of a lead wire, or nullopt when it is open.
  virtual absl::StatusOr<std::optional<ClosedScopeRecord>> GetClosedScope(
      absl::string_view wire) = 0;
  // The closed-scope records matching `filter`, by role_key_wire (bytes).
  virtual absl::StatusOr<std::vector<ClosedScopeRecord>> ListClosedScopes(
      const ClosedScopeFilter& filter) = 0;

  // ---- roles
  // §5.3: inserts (epoch 0, seq 0, version 0) or updates WHERE version and
  // epoch match, setting epoch, activation_seq and version to exactly +1.
  // ROLE_SCOPE_CLOSED for a lead whose scope is closed.
  virtual absl::StatusOr<RoleWrite> ReserveRole(
      const RoleReservation& reservation) = 0;
  // §5.4: applies the patch WHERE version, epoch, activation_seq and
  // activation_id (IS) all match; version +1, epoch and seq unchanged. A
  // missing row of a closed scope is ROLE_SCOPE_CLOSED, not kNotFound.
  virtual absl::StatusOr<RoleWrite> CompareAndSetRole(const RoleCas& cas) = 0;
  // The two above without parking the caller (see RegisterAgentAsync).
  virtual void ReserveRoleAsync(const RoleReservation& reservation,
                                Callback<RoleWrite> done) {
    std::move(done)(ReserveRole(reservation));
  }
  virtual void CompareAndSetRoleAsync(const RoleCas& cas,
                                      Callback<RoleWrite> done) {
    std::move(done)(CompareAndSetRole(cas));
  }
  // §5.7 on every row, each update fenced by version and epoch; never
  // restores active. Also returns every row and the pending role messages.
  virtual absl::StatusOr<RecoveryResult> RecoverRoles(int64_t now_ms) = 0;
  // Deletes the row; candidates cascade. kNotFound if absent. (Closing a
  // scope is CloseLeadScope.)
  virtual absl::StatusOr<RoleOutcome> DeleteRole(absl::string_view wire) = 0;
  // NotFound (ROLE_NOT_FOUND) when absent.
  virtual absl::StatusOr<RoleRecord> GetRole(absl::string_view wire) = 0;
  // Matching rows ordered by wire (bytes).
  virtual absl::StatusOr<std::vector<RoleRecord>> ListRoles(
      const RoleFilter& filter) = 0;
  // Rows in elected-probing or active whose holder lease is NULL or <= now,
  // ordered by wire (unreachable/quarantined keep their backoff, bug #23).
  virtual absl::StatusOr<std::vector<RoleRecord>> ListRolesWithExpiredHolder(
      int64_t now_ms) = 0;
  // ---- the role change log (docs/design/multi-hub.md)
  // Whether the store records every committed change of a role row, by
  // whoever made it, in a log read by cursor (PostgreSQL, whose database
  // several hubs share: each publishes every hub's changes from the log).
  // false (SQLite, one hub per database): there is no log, the hub
  // publishes its own writes, and the three calls below answer
  // UNIMPLEMENTED / ROLE_CHANGE_LOG_UNSUPPORTED.
  virtual bool HasRoleChangeLog() const { return false; }
  // The seq of the newest committed change (0 before the first): every
  // change up to it is readable, unless pruned.
  virtual absl::StatusOr<int64_t> RoleChangeHead();
  // At most `limit` (> 0, else INVALID_ARGUMENT / REQUEST_INVALID) changes
  // with seq > after_seq, by seq, and the head, read from one snapshot.
  // Seqs are consecutive and every change up to the head is visible, so the
  // page holds after_seq + 1, after_seq + 2, ... up to the head or the
  // limit, unless changes were pruned: a reader whose page starts above
  // after_seq + 1, or is empty below a head above after_seq, has missed
  // changes and must re-read the roles.
  virtual absl::StatusOr<RoleChangePage> ReadRoleChanges(int64_t after_seq,
                                                         int64_t limit);
  // Deletes the changes committed more than `keep_ms` ago (the database's
  // clock), oldest first, at most `limit` of them; returns how many.
  virtual absl::StatusOr<int64_t> PruneRoleChanges(int64_t keep_ms,
                                                   int64_t limit);
  // §5.6 merge upsert; NotFound (ROLE_NOT_FOUND) when the role is absent.
  virtual absl::StatusOr<CandidateRecord> UpsertCandidate(
      const CandidateUpsert& upsert) = 0;
  // Deletes the candidate row; true when there was one.
  virtual absl::StatusOr<bool> DeleteCandidate(absl::string_view wire,
                                               absl::string_view agent_id) = 0;
  // §5.6 probe result; NotFound (CANDIDATE_NOT_FOUND) when absent.
  virtual absl::StatusOr<CandidateRecord> UpdateCandidateReachability(
      const ReachabilityUpdate& update) = 0;
  // Priority DESC, updated_at_ms DESC, agent_id ASC.
  virtual absl::StatusOr<std::vector<CandidateRecord>> ListCandidates(
      absl::string_view wire) = 0;
  // One keyset page of candidates (see CandidatePageQuery).
  virtual absl::StatusOr<std::vector<CandidateRecord>> ListCandidatesPage(
      const CandidatePageQuery& query) = 0;
  // ListCandidates of every role in `wires`, one after the other in the
  // order given (a wire given twice is listed once): for a reader that
  // needs several roles' candidates at once, in one read where the engine
  // can (PostgreSQL: one statement, not one round trip per role).
  virtual absl::StatusOr<std::vector<CandidateRecord>> ListCandidatesOfRoles(
      const std::vector<std::string>& wires) {
    std::vector<CandidateRecord> all;
    std::vector<absl::string_view> listed;
    for (const std::string& wire : wires) {
      if (std::find(listed.begin(), listed.end(), wire) != listed.end()) {
        continue;
      }
      listed.push_back(wire);
      absl::StatusOr<std::vector<CandidateRecord>> some = ListCandidates(wire);
      if (!some.ok()) return some.status();
      all.insert(all.end(), std::make_move_iterator(some->begin()),
                 std::make_move_iterator(some->end()));
    }
    return all;
  }

  // ---- messages
  // Inserts the message and one inbox row per distinct recipient, atomically.
  // AlreadyExists (MESSAGE_EXISTS) if the id is taken.
  virtual absl::Status InsertMessage(
      const MessageRecord& message,
      const std::vector<std::string>& recipients) = 0;
  // InsertMessage and, in the same transaction, a first delivery attempt
  // (MarkDeliveredIfUnacked) for each of `deliver_to`, a subset of
  // `recipients`: the ones the caller is about to push the message to. Returns
  // their inbox rows in `deliver_to` order. One sync for the whole publish.
  //
  // When `max_pending_per_inbox` > 0, a recipient that already has that many
  // pending messages (unacknowledged, not yet expired by the sweep) refuses
  // the whole message before anything is written: RESOURCE_EXHAUSTED
  // LIMIT_EXCEEDED, limit max_pending_per_inbox, metadata agent_id. An
  // implementation decides this inside the write (no overshoot by concurrent
  // publishes); this default counts first and may overshoot by the
  // publishes in flight.
  virtual absl::StatusOr<std::vector<InboxRecord>> InsertMessageDelivering(
      const MessageRecord& message, const std::vector<std::string>& recipients,
      const std::vector<std::string>& deliver_to, int64_t now_ms,
      int64_t max_pending_per_inbox) {
    if (max_pending_per_inbox > 0) {
      for (const std::string& agent : recipients) {
        absl::StatusOr<int64_t> pending =
            CountPendingForAgent(agent, now_ms, max_pending_per_inbox);
        if (!pending.ok()) return pending.status();
        if (*pending >= max_pending_per_inbox)
          return InboxFullError(agent, max_pending_per_inbox);
      }
    }
    if (absl::Status s = InsertMessage(message, recipients); !s.ok()) return s;
    std::vector<InboxRecord> rows;
    for (const std::string& agent : deliver_to) {
      absl::StatusOr<std::optional<InboxRecord>> row =
          MarkDeliveredIfUnacked(message.id, agent, now_ms);
      if (!row.ok()) return row.status();
      if (row->has_value()) rows.push_back(**std::move(row));
    }
    return rows;
  }
  // The above without parking the caller (see RegisterAgentAsync).
  virtual void InsertMessageDeliveringAsync(
      const MessageRecord& message, const std::vector<std::string>& recipients,
      const std::vector<std::string>& deliver_to, int64_t now_ms,
      int64_t max_pending_per_inbox, Callback<std::vector<InboxRecord>> done) {
    std::move(done)(InsertMessageDelivering(message, recipients, deliver_to,
                                            now_ms, max_pending_per_inbox));
  }
  // Adds an inbox row if absent (role backlog handed to a new holder).
  // True when it added one, false when the agent was a recipient already.
  virtual absl::StatusOr<bool> AddRecipient(absl::string_view message_id,
                                            absl::string_view agent_id) = 0;
  // Records a delivery attempt (attempts +1, first delivered_at kept) and
  // moves the message queued -> delivered, fenced in the UPDATE's WHERE:
  // only a row still unacknowledged, of a message still queued or delivered,
  // changes. Callers read what to push before they mark it, and another
  // path may deliver it and the agent acknowledge it in between; the fence
  // makes that late mark change nothing, so nothing is pushed after an ack.
  // Returns the row as marked (what to push), or nullopt when the fence
  // held (acknowledged, or the message is terminal). NotFound
  // (DELIVERY_NOT_FOUND) when the agent is not a recipient.
  virtual absl::StatusOr<std::optional<InboxRecord>> MarkDeliveredIfUnacked(
      absl::string_view message_id, absl::string_view agent_id,
      int64_t now_ms) = 0;
  // MarkDeliveredIfUnacked for each (message id, agent id) of `deliveries`,
  // in one write: the rows it marked, in any order (a pair whose row is gone
  // or was acknowledged, or whose message is terminal, is left out).
  // Default: one MarkDeliveredIfUnacked per pair.
  struct Delivery {
    std::string message_id;
    std::string agent_id;
  };
  virtual absl::StatusOr<std::vector<InboxRecord>> MarkDeliveredManyIfUnacked(
      const std::vector<Delivery>& deliveries, int64_t now_ms);
  // Acks a delivered inbox row; when every recipient has acked, the message
  // becomes acked. Returns false if there was nothing to ack (not delivered
  // to that agent, already acked, or the message is terminal).
  virtual absl::StatusOr<bool> AckMessage(absl::string_view message_id,
                                          absl::string_view agent_id,
                                          int64_t now_ms) = 0;
  // AckMessage for each of `message_ids` (distinct) in one write, by the
  // agent's current owner: the agent must exist (AGENT_NOT_FOUND) and, when
  // `presence_generation` is given, still be at that generation
  // (STALE_PRESENCE_OWNER), checked in the same transaction as the acks.
  // Returns, in `message_ids` order, whether the agent's row is acknowledged
  // now: true when this call acked it or it was acked before, false when
  // there is nothing of this agent's to ack (never delivered to it, or the
  // message is terminal). The default checks, then acks one by one (not
  // atomic with the check).
  virtual absl::StatusOr<std::vector<bool>> AckMessages(
      absl::string_view agent_id, const std::vector<std::string>& message_ids,
      int64_t now_ms, std::optional<int64_t> presence_generation) {
    absl::StatusOr<AgentRecord> agent = GetAgent(agent_id);
    if (!agent.ok()) return agent.status();
    if (absl::Status s =
            CheckAckGeneration(agent->presence_generation, presence_generation);
        !s.ok()) {
      return s;
    }
    std::vector<bool> acked;
    for (const std::string& id : message_ids) {
      absl::StatusOr<bool> now = AckMessage(id, agent_id, now_ms);
      if (!now.ok()) return now.status();
      bool ok = *now;
      if (!ok) {
        absl::StatusOr<std::vector<InboxRecord>> inbox = ListInbox(id);
        if (!inbox.ok()) return inbox.status();
        for (const InboxRecord& row : *inbox) {
          if (row.agent_id == agent_id && row.acked_at_ms.has_value())
            ok = true;
        }
      }
      acked.push_back(ok);
    }
    return acked;
  }
  // The above without parking the caller (see RegisterAgentAsync).
  virtual void AckMessagesAsync(absl::string_view agent_id,
                                const std::vector<std::string>& message_ids,
                                int64_t now_ms,
                                std::optional<int64_t> presence_generation,
                                Callback<std::vector<bool>> done) {
    std::move(done)(
        AckMessages(agent_id, message_ids, now_ms, presence_generation));
  }
  // Pending messages (queued|delivered, unacked, expires > now) never
  // delivered to any of `agent_ids`: what a hub that holds their streams
  // still has to push when another hub took the publish. By agent_id, then
  // pending order; at most `limit`. A read of state, not a cursor: a row
  // that commits late is found by the next read. Stores one hub holds
  // (SQLite: every publish pushes to attached recipients itself) answer
  // UNIMPLEMENTED.
  virtual absl::StatusOr<std::vector<UndeliveredMessage>> ListUndelivered(
      const std::vector<std::string>& agent_ids, int64_t now_ms,
      int64_t limit) {
    (void)agent_ids;
    (void)now_ms;
    (void)limit;
    return absl::UnimplementedError(
        "this store has one hub: nothing is routed between hubs");
  }
  // NotFound (MESSAGE_NOT_FOUND) when absent.
  virtual absl::StatusOr<MessageRecord> GetMessage(absl::string_view id) = 0;
  virtual absl::StatusOr<std::vector<InboxRecord>> ListInbox(
      absl::string_view message_id) = 0;
  // Unacked messages for the agent, status queued|delivered, expires > now;
  // priority DESC, created ASC, id ASC.
  virtual absl::StatusOr<std::vector<MessageRecord>> ListPendingForAgent(
      absl::string_view agent_id, int64_t now_ms, int limit) = 0;
  // One keyset page of them (see PendingPageQuery).
  virtual absl::StatusOr<std::vector<MessageRecord>> ListPendingPage(
      const PendingPageQuery& query) = 0;
  // How many messages ListPendingForAgent would return, counting at most
  // `limit` (the answer is min(count, limit)).
  virtual absl::StatusOr<int64_t> CountPendingForAgent(
      absl::string_view agent_id, int64_t now_ms, int64_t limit) = 0;
  // CountPendingForAgent of every agent with a pending message, in one read
  // (no limit), by agent_id: the console's fleet view.
  virtual absl::StatusOr<std::vector<std::pair<std::string, int64_t>>>
  CountPendingByAgent(int64_t now_ms) = 0;
  // Role-addressed backlog: role_key_wire = wire, queued|delivered,
  // expires > now; priority DESC, created ASC, id ASC.
  virtual absl::StatusOr<std::vector<MessageRecord>> ListPendingRoleMessages(
      absl::string_view wire, int64_t now_ms) = 0;
  // §6.6 B0: claims every queued|delivered message with expires_at <= now
  // exactly once (fenced by its previous status) and inserts its dead letter
  // first-writer-wins, atomically per message.
  virtual absl::StatusOr<std::vector<ExpiryTransition>> SweepExpiredMessages(
      int64_t now_ms) = 0;
  // Moves a queued|delivered message to dead_letter with `reason`, atomic
  // with a first-writer-wins dead letter row. Returns false if the message
  // was already terminal. NotFound (MESSAGE_NOT_FOUND).
  virtual absl::StatusOr<bool> DeadLetterMessage(
      absl::string_view message_id, absl::string_view reason, int64_t now_ms,
      std::optional<std::string> last_error) = 0;
  // Puts a dead-lettered message back in the queue, in one write: its
  // status moves dead_letter -> queued in an UPDATE whose WHERE requires
  // dead_letter (the changed-row count checked: a second or concurrent
  // re-drive changes nothing and is FAILED_PRECONDITION /
  // MESSAGE_NOT_DEAD_LETTER), expires_at becomes now + ttl, every
  // unacknowledged inbox row is pending again (delivered_at cleared,
  // attempts kept), `add_recipient` gets a row, and the dead letter row is
  // deleted. NOT_FOUND / MESSAGE_NOT_FOUND when the message row is gone;
  // FAILED_PRECONDITION / ROLE_SCOPE_CLOSED for a message of a closed lead
  // scope (decided inside the write); RESOURCE_EXHAUSTED / LIMIT_EXCEEDED
  // (limit max_pending_per_inbox, metadata agent_id) when a recipient's
  // inbox is full (`max_pending_per_inbox`), also decided inside the write.
  virtual absl::StatusOr<RedriveResult> RedriveDeadLetter(
      const DeadLetterRedrive& redrive) = 0;
  // NotFound (DEAD_LETTER_NOT_FOUND) when absent.
  virtual absl::StatusOr<DeadLetterRecord> GetDeadLetter(
      absl::string_view message_id) = 0;
  // A trace's messages, any status: created ASC, id ASC (TracePageQuery).
  virtual absl::StatusOr<std::vector<MessageRecord>> ListTraceMessages(
      const TracePageQuery& query) = 0;
  // Dead letters with their messages: failed_at DESC, message_id ASC
  // (DeadLetterPageQuery).
  virtual absl::StatusOr<std::vector<DeadLetterRow>> ListDeadLetters(
      const DeadLetterPageQuery& query) = 0;

  // ---- path reservations (storage/reservations.h) ----
  // One write: takes the project's token row (serializing every reserve of
  // the project, across hubs), reads the live candidate rows by literal
  // prefix, decides conflicts (DecideConflicts), then inserts the
  // reservation with the next token, or writes nothing and returns the
  // conflicts. The holder must be present: NOT_FOUND / AGENT_NOT_FOUND,
  // FAILED_PRECONDITION / AGENT_OFFLINE or STALE_PRESENCE_OWNER otherwise;
  // limits as ReservationRequest says.
  virtual absl::StatusOr<ReservationOutcome> Reserve(
      const ReservationRequest& request) = 0;
  // What Reserve would conflict with, from a read (no write, no token).
  virtual absl::StatusOr<std::vector<ReservationConflict>> CheckReservations(
      const ReservationCheck& check) = 0;
  // Moves a live reservation's expiry to now + ttl, fenced in SQL by its
  // id, holder and token. RESERVATION_NOT_FOUND when no live reservation has
  // the id; FAILED_PRECONDITION / RESERVATION_NOT_HOLDER for another agent,
  // RESERVATION_STALE_TOKEN for another token.
  virtual absl::StatusOr<ReservationRecord> RenewReservation(
      const ReservationRenewal& renewal) = 0;
  // Releases some patterns of a reservation, or all of it (fenced as
  // Renew unless forced). Returns what is left, nullopt when the
  // reservation ended. Patterns it does not hold are ignored.
  virtual absl::StatusOr<std::optional<ReservationRecord>> ReleaseReservation(
      const ReservationRelease& release) = 0;
  // Deletes every reservation of `agent_id` (at `generation`, when set):
  // its holder is gone (logged at `now_ms`). Returns how many ended.
  virtual absl::StatusOr<int64_t> ReleaseAgentReservations(
      absl::string_view agent_id, std::optional<int64_t> generation,
      int64_t now_ms) = 0;
  // A live reservation, or nullopt.
  virtual absl::StatusOr<std::optional<ReservationRecord>> GetReservation(
      absl::string_view reservation_id, int64_t now_ms) = 0;
  virtual absl::StatusOr<std::vector<ReservationRecord>> ListReservations(
      const ReservationFilter& filter) = 0;
  // Deletes reservations that ended (expired, holder gone) at `now_ms`.
  // Returns how many, by reason: {expired, holder_gone}.
  virtual absl::StatusOr<std::pair<int64_t, int64_t>> SweepReservations(
      int64_t now_ms) = 0;
  // The reservation change log (hub_reservation_changes): every write above
  // appends, in its own transaction, one change per reservation it grants,
  // renews, narrows or ends. At most `limit` (> 0, else INVALID_ARGUMENT /
  // REQUEST_INVALID) changes with seq > after_seq, by seq, and the head.
  // Seq order is commit order, so a reader paging by seq misses nothing.
  virtual absl::StatusOr<ReservationChangePage> ReadReservationChanges(
      int64_t after_seq, int64_t limit) = 0;
  // Every live reservation of the filter's project and agent (its limit and
  // keyset ignored) and the log's head, from one read snapshot.
  virtual absl::StatusOr<ReservationSnapshot> SnapshotReservations(
      const ReservationFilter& filter) = 0;
  // Queues a waiting reserve in its project (under the project's token
  // row: seq = the project's last + 1) and logs kWaiting. Returns it with
  // its seq.
  virtual absl::StatusOr<ReservationWaiter> EnqueueReservationWaiter(
      const ReservationWaiter& waiter) = 0;
  // Takes a waiter out of its queue (its wait ended without a grant) and
  // logs kWaitEnded; false when it was not queued.
  virtual absl::StatusOr<bool> RemoveReservationWaiter(
      absl::string_view waiter_id, int64_t now_ms) = 0;
  // Deletes changes written before `before_ms`, among the `limit` oldest;
  // returns how many.
  virtual absl::StatusOr<int64_t> PruneReservationChanges(int64_t before_ms,
                                                          int64_t limit) = 0;
};

// The reason-coded status for a fence outcome, for callers that only need
// a status: stale fences -> FAILED_PRECONDITION (STALE_PRESENCE_OWNER,
// STALE_VERSION, STALE_EPOCH, STALE_ACTIVATION_SEQ, STALE_ACTIVATION_ID),
// kCasConflict -> ABORTED (CAS_CONFLICT), kInvalidCas -> INVALID_ARGUMENT,
// kNotFound -> NOT_FOUND. kApplied -> OK.
absl::Status ToStatus(RoleOutcome outcome);
absl::Status ToStatus(PresenceOutcome outcome, absl::string_view agent_id);

// NOT_FOUND / AGENT_NOT_FOUND for an agent id nobody registered, naming it
// (metadata agent_id).
absl::Status AgentNotFound(absl::string_view agent_id);

// The wall clock in milliseconds since the epoch.
int64_t SystemNowMs();

// A new UUIDv7 (RFC 9562), lower-case text; monotonic within the process.
std::string NewUuidV7();

}  // namespace hub::storage

#endif  // HUB_STORAGE_STORE_H_
