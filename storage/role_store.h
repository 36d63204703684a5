// RoleStore: role rows, their candidates, the lead scopes closed for good,
// and (PostgreSQL) the log of every committed role change. It offers the
// fenced primitives the registry decides authority with (TRIFLUX-HUB.md §5:
// ReserveRole, CompareAndSetRole); the transitions themselves are
// registry/role_transitions.h's. The contracts every store method keeps are
// in storage/store.h.
#ifndef HUB_STORAGE_ROLE_STORE_H_
#define HUB_STORAGE_ROLE_STORE_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "records/message.h"
#include "records/role.h"
#include "storage/message_store.h"
#include "storage/store_types.h"

namespace hub::storage {

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
// it (RoleStore::ReadRoleChanges).
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

// One read of the role change log (RoleStore::ReadRoleChanges).
struct RoleChangePage {
  std::vector<RoleChange> changes;  // by seq
  // The newest seq committed as of the read (the same snapshot).
  int64_t head = 0;
};

// One keyset page of candidates (RoleStore::ListCandidatesPage), ordered by
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

// FAILED_PRECONDITION / ROLE_SCOPE_CLOSED (metadata role_key_wire): the lead
// scope of `wire` is closed.
absl::Status ScopeClosedError(absl::string_view wire);

// The reason-coded status for a role fence's outcome, for callers that only
// need a status: stale fences -> FAILED_PRECONDITION (STALE_VERSION,
// STALE_EPOCH, STALE_ACTIVATION_SEQ, STALE_ACTIVATION_ID), kCasConflict ->
// ABORTED (CAS_CONFLICT), kInvalidCas -> INVALID_ARGUMENT, kNotFound ->
// NOT_FOUND. kApplied -> OK.
absl::Status ToStatus(RoleOutcome outcome);

class RoleStore {
 public:
  virtual ~RoleStore() = default;

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
  // The two above without parking the caller (as
  // AgentStore::RegisterAgentAsync).
  virtual void ReserveRoleAsync(const RoleReservation& reservation,
                                Callback<RoleWrite> done) = 0;
  virtual void CompareAndSetRoleAsync(const RoleCas& cas,
                                      Callback<RoleWrite> done) = 0;
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
};

}  // namespace hub::storage

#endif  // HUB_STORAGE_ROLE_STORE_H_
