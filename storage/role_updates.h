// The engine-neutral half of the role and candidate writes: how a
// reservation, a compare-and-set, a recovery step and a probe result turn
// the row read into the row to write, and which refusal a lost fence means.
// Pure functions over records, shared by SqliteStore and PostgresStore so
// both engines decide alike; the SQL that reads and writes the rows stays in
// each store. Internal to storage/.
#ifndef HUB_STORAGE_ROLE_UPDATES_H_
#define HUB_STORAGE_ROLE_UPDATES_H_

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "storage/store.h"

namespace hub::storage::roles {

// The fence a role update must still satisfy (its UPDATE's WHERE clause).
struct RoleFence {
  int64_t version = 0;
  int64_t epoch = 0;
  int64_t activation_seq = 0;
  std::optional<std::string> activation_id;
};
RoleFence FenceOf(const RoleRecord& row);

// A write decided before the UPDATE: either refused (with the latest row)
// or `next`, to be written WHERE the row still matches `fence`. `insert`:
// there was no row, `next` is the first one (epoch, seq, version 0).
struct RolePlan {
  std::optional<RoleWrite> refused;
  RoleRecord next;
  RoleFence fence;
  bool insert = false;
};

RoleWrite Refused(RoleOutcome outcome, std::optional<RoleRecord> latest);

// §5.3 on the row read (nullopt: none yet): the refusal in the documented
// order (stale_version, stale_epoch, stale_activation_seq) or the row with
// epoch and seq +1 and the defaults applied. `new_id` draws an activation id
// when a holder is set.
absl::StatusOr<RolePlan> PlanReservation(
    const std::optional<RoleRecord>& current, const RoleReservation& r,
    const std::function<std::string()>& new_id);

// §5.4 on the row read: kInvalidCas when a guard is missing, kNotFound when
// there is no row (the caller then checks for a closed scope), else the
// first stale guard, or the patched row.
absl::StatusOr<RolePlan> PlanCas(const std::optional<RoleRecord>& current,
                                 const RoleCas& cas);

// §5.7 for one row: the recovered row, or nullopt when it is kept as it is
// (electable, unreachable, quarantined keep their state and backoff).
std::optional<RoleRecord> RecoveredRole(
    const RoleRecord& current, int64_t now_ms,
    const std::function<std::string()>& new_id);

// Why a fenced UPDATE changed no row, from the latest row: kNotFound,
// the first stale guard, else kCasConflict.
RoleOutcome LostFenceOutcome(const std::optional<RoleRecord>& latest,
                             const RoleFence& fence);

// UpsertCandidate's write (§5.6), one statement on every engine: the row to
// insert when there is none (the upsert's fields over the column defaults),
// and for a row that exists, which of its fields stay as stored (the others
// take `insert`'s value; updated_at_ms always does). The merge happens
// against the row the statement conflicts with, so two writers of one
// candidate each keep what the other wrote to the fields they left alone.
struct CandidateMerge {
  CandidateRecord insert;
  bool keep_source = false;
  bool keep_priority = false;
  bool keep_transport_locators = false;
  bool keep_probe_failures = false;
  bool keep_excluded_until = false;
  bool keep_last_probe_ms = false;
  bool keep_last_probe_code = false;
};
CandidateMerge CandidateMergeOf(const CandidateUpsert& upsert);

// §5.6 probe result applied to the candidate row read: the failure count,
// the exclusion (derived from the new count when excluded_until_for is
// set), last_probe_ms (default now) and last_probe_code.
void ApplyReachability(const ReachabilityUpdate& update, CandidateRecord* c);

// Where a ListCandidatesPage page starts: the key its rows must follow
// (from the start: the role's wire or "", then (max, max, "") which precedes
// every row in the activator's order), or nullopt when no row can follow
// (`after` is a key of a later role than the one asked for).
std::optional<CandidatePageQuery::Key> CandidatePageStart(
    const CandidatePageQuery& q);

// ---- closing a lead scope (CloseLeadScope)

// The last_error of the dead letters a close writes.
std::string ScopeClosedLastError(const ScopeClose& close);
// A pending message the close dead-lettered (it was `message.status`).
ClaimedMessage ScopeClosedClaim(MessageRecord message, int64_t now_ms,
                                bool dlq_inserted);
// The record a close writes.
ClosedScopeRecord ClosedScopeOf(const ScopeClose& close,
                                int64_t dead_lettered_count);

}  // namespace hub::storage::roles

#endif  // HUB_STORAGE_ROLE_UPDATES_H_
