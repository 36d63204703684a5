// RoleStore's operations, written once for both engines. Each engine
// implements RoleRows, the statements of one transaction over role_registry,
// role_candidates, hub_closed_scopes and a closed scope's backlog in its own
// SQL; the operations below decide the rest the same way on SQLite and
// PostgreSQL, over storage/role_updates.h's pure decisions: what a write
// reads first and under which lock, which refusal a lost fence means, when a
// closed scope refuses a write, and what closing a scope removes.
//
// Every role update is fenced in its UPDATE's WHERE clause (version, epoch,
// activation_seq, activation_id) and decided by the row it changed, never by
// the read before it: on PostgreSQL another hub may write the same row.
//
// Locks (PostgreSQL's; SQLite's one writer holds the whole database, so its
// rows take none) in one order: the scope's advisory lock of the wire, then
// the role row, then its candidates, then its messages. A write that could
// bring a closed scope back takes the scope's lock shared before its first
// row lock and its closed-scope check; CloseLeadScope takes it exclusively.
// So a close either committed before the check (which sees it) or waits for
// the write to commit (and then removes what it wrote).
#ifndef HUB_STORAGE_ROLE_OPS_H_
#define HUB_STORAGE_ROLE_OPS_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "storage/role_store.h"
#include "storage/role_updates.h"

namespace hub::storage {

// How a read locks the row it returns until the transaction ends.
enum class RowLock { kNone, kUpdate };

class RoleRows {
 public:
  virtual ~RoleRows() = default;

  // The scope's advisory lock of `wire` until the transaction ends: shared
  // for a write that could bring the scope back, exclusive for its close.
  virtual absl::Status LockScope(absl::string_view wire, bool exclusive) = 0;

  // ---- role_registry
  // The role row of `wire`, if any.
  virtual absl::StatusOr<std::optional<RoleRecord>> Load(absl::string_view wire,
                                                         RowLock lock) = 0;
  // LockScope(wire, false), then Load(wire, RowLock::kUpdate).
  virtual absl::StatusOr<std::optional<RoleRecord>> LockScopeAndLoad(
      absl::string_view wire) = 0;
  // Inserts a role's first row. nullopt when a row of its wire, or of its
  // project, kind and scope, was inserted meanwhile by another writer (an
  // engine whose writer is alone reports the constraint as an error).
  virtual absl::StatusOr<std::optional<RoleRecord>> Insert(
      const RoleRecord& first) = 0;
  // Writes `next` (every mutable column; version becomes version + 1) WHERE
  // the row still matches `fence`: the new row, or nullopt when the fence
  // was lost.
  virtual absl::StatusOr<std::optional<RoleRecord>> UpdateIfFence(
      const RoleRecord& next, const roles::RoleFence& fence) = 0;
  // Deletes the role row (its candidates cascade); whether there was one.
  virtual absl::StatusOr<bool> Delete(absl::string_view wire) = 0;
  // Every role row, by wire (bytes).
  virtual absl::StatusOr<std::vector<RoleRecord>> All(RowLock lock) = 0;
  // RoleStore::ListRoles and ListRolesWithExpiredHolder.
  virtual absl::StatusOr<std::vector<RoleRecord>> Page(
      const RoleFilter& filter) = 0;
  virtual absl::StatusOr<std::vector<RoleRecord>> WithExpiredHolder(
      int64_t now_ms) = 0;
  // Every role's unexpired pending messages, in delivery order (priority
  // DESC, created_at_ms ASC, id ASC).
  virtual absl::StatusOr<std::vector<MessageRecord>> Backlogs(
      int64_t now_ms) = 0;

  // ---- role_candidates
  virtual absl::StatusOr<std::optional<CandidateRecord>> LoadCandidate(
      absl::string_view wire, absl::string_view agent_id, RowLock lock) = 0;
  // The merge of roles::CandidateMerge in one upsert; the row written.
  virtual absl::StatusOr<std::optional<CandidateRecord>> MergeCandidate(
      const roles::CandidateMerge& merge) = 0;
  // Writes the probe columns (failures, exclusion, last probe ms and code)
  // of the candidate row `c` names; the row written, nullopt without one.
  virtual absl::StatusOr<std::optional<CandidateRecord>> UpdateProbe(
      const CandidateRecord& c) = 0;
  // Deletes one candidate (whether there was one) or a role's (how many).
  virtual absl::StatusOr<bool> DeleteCandidate(absl::string_view wire,
                                               absl::string_view agent_id) = 0;
  virtual absl::StatusOr<int64_t> DeleteCandidates(absl::string_view wire) = 0;
  // RoleStore::ListCandidates; one page of ListCandidatesPage from `start`
  // (roles::CandidatePageStart).
  virtual absl::StatusOr<std::vector<CandidateRecord>> Candidates(
      absl::string_view wire) = 0;
  virtual absl::StatusOr<std::vector<CandidateRecord>> CandidatePage(
      const CandidatePageQuery& query,
      const CandidatePageQuery::Key& start) = 0;

  // ---- hub_closed_scopes
  // The record whose wire is `wire`, or whose project and scope are
  // `project_id` and `scope_id` ("" matches by wire only).
  virtual absl::StatusOr<std::optional<ClosedScopeRecord>> LoadClosedScope(
      absl::string_view wire, absl::string_view project_id,
      absl::string_view scope_id) = 0;
  virtual absl::Status InsertClosedScope(const ClosedScopeRecord& closed) = 0;
  // RoleStore::ListClosedScopes.
  virtual absl::StatusOr<std::vector<ClosedScopeRecord>> ClosedScopePage(
      const ClosedScopeFilter& filter) = 0;

  // ---- a closed scope's backlog
  // Every pending message of `wire` (queued | delivered, expired or not),
  // in delivery order, locked until the transaction ends.
  virtual absl::StatusOr<std::vector<MessageRecord>> ScopeBacklog(
      absl::string_view wire) = 0;
  // Moves `m` to dead_letter WHERE its status is still m.status, and
  // inserts its dead letter row unless one exists (first writer wins).
  // nullopt: the status fence was lost; else whether the row is this call's.
  virtual absl::StatusOr<std::optional<bool>> DeadLetter(
      const MessageRecord& m, absl::string_view reason, int64_t now_ms,
      const std::string& last_error) = 0;
  // After DeadLetter moved `ids` out of pending: their unacknowledged inbox
  // rows stop counting as pending.
  virtual absl::Status Settled(const std::vector<std::string>& ids) = 0;
  // The write fails after DeadLetter or Settled ran, and its transaction
  // undoes them: whatever the engine keeps outside the database about the
  // counts they changed is dropped.
  virtual void Undone() = 0;
};

// ScopeClosedError when `wire` (or the project and scope) is closed.
absl::Status RefuseClosedScope(RoleRows& rows, absl::string_view wire,
                               absl::string_view project_id = "",
                               absl::string_view scope_id = "");
// Takes the scope's lock of `wire` shared, then RefuseClosedScope: what a
// write addressed to a role (a message, a re-drive) does before it writes.
absl::Status GuardOpenScope(RoleRows& rows, absl::string_view wire);

// RoleStore::ReserveRole: the row read under the scope's lock, the closed
// scope refused, roles::PlanReservation, then the insert or the fenced
// update. A first insert that meets another writer's plans again from the
// row it finds; `new_id` draws activation ids.
absl::StatusOr<RoleWrite> ReserveRoleWith(
    RoleRows& rows, const RoleReservation& r,
    const std::function<std::string()>& new_id);

// Whether `cas` names all four guards (else it is kInvalidCas).
bool NamesEveryGuard(const RoleCas& cas);
// The answer of an engine's one-statement compare-and-set, already run: the
// scope's lock, then `cas.patch` applied (as roles::PlanCas would) WHERE
// the whole fence `cas` names matches; the row written, or nullopt.
using CasAnswer = absl::StatusOr<std::optional<RoleRecord>>;
// RoleStore::CompareAndSetRole. Without `one_statement`: the row read under
// the scope's lock, roles::PlanCas, the fenced update. With it (the CAS
// names every guard): its row, or, when it changed none, the reason read
// from the latest row (kCasConflict when that row matches the fence: the
// race was lost in between). A missing row of a closed scope is
// ROLE_SCOPE_CLOSED.
absl::StatusOr<RoleWrite> CompareAndSetRoleWith(
    RoleRows& rows, const RoleCas& cas,
    std::optional<CasAnswer> one_statement = std::nullopt);

// RoleStore::RecoverRoles: §5.7 on every row (locked, in wire order), each
// fenced by the row it read; then every row and every role's backlog.
absl::StatusOr<RecoveryResult> RecoverRolesWith(
    RoleRows& rows, int64_t now_ms, const std::function<std::string()>& new_id);
// RoleStore::DeleteRole and GetRole.
absl::StatusOr<RoleOutcome> DeleteRoleWith(RoleRows& rows,
                                           absl::string_view wire);
absl::StatusOr<RoleRecord> GetRoleWith(RoleRows& rows, absl::string_view wire);

// RoleStore::UpsertCandidate: the role row locked (so a close or a delete
// waits for the candidate and removes it too), then the merge.
absl::StatusOr<CandidateRecord> UpsertCandidateWith(RoleRows& rows,
                                                    const CandidateUpsert& u);
// RoleStore::UpdateCandidateReachability: the candidate row locked, then
// roles::ApplyReachability on it.
absl::StatusOr<CandidateRecord> UpdateReachabilityWith(
    RoleRows& rows, const ReachabilityUpdate& u);
// RoleStore::CloseLeadScope in one transaction.
absl::StatusOr<ScopeCloseResult> CloseScopeWith(RoleRows& rows,
                                                const ScopeClose& close);

}  // namespace hub::storage

#endif  // HUB_STORAGE_ROLE_OPS_H_
