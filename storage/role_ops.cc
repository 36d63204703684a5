#include "storage/role_ops.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "status/status.h"

namespace hub::storage {
namespace {

// Writes `next` WHERE the row still matches `fence`; a lost fence is
// explained from the latest row.
absl::StatusOr<RoleWrite> ApplyFenced(RoleRows& rows, const RoleRecord& next,
                                      const roles::RoleFence& fence) {
  absl::StatusOr<std::optional<RoleRecord>> updated =
      rows.UpdateIfFence(next, fence);
  if (!updated.ok()) return updated.status();
  if (updated->has_value()) {
    return roles::Refused(RoleOutcome::kApplied, std::move(*updated));
  }
  absl::StatusOr<std::optional<RoleRecord>> latest =
      rows.Load(next.role_key_wire, RowLock::kNone);
  if (!latest.ok()) return latest.status();
  return roles::Refused(roles::LostFenceOutcome(*latest, fence),
                        std::move(*latest));
}

// A plan's refusal; a missing row of a closed scope is ROLE_SCOPE_CLOSED.
absl::StatusOr<RoleWrite> CasRefused(RoleRows& rows, const RoleCas& cas,
                                     RoleWrite refused) {
  if (refused.outcome == RoleOutcome::kNotFound) {
    if (absl::Status s = RefuseClosedScope(rows, cas.role_key_wire); !s.ok()) {
      return s;
    }
  }
  return refused;
}

absl::Status CandidateNotFound(absl::string_view wire,
                               absl::string_view agent_id) {
  return NotFoundError("CANDIDATE_NOT_FOUND",
                       absl::StrCat("candidate '", agent_id, "' of role '",
                                    wire, "' not found"));
}

// Dead-letters every pending message of the scope's wire.
absl::StatusOr<std::vector<ClaimedMessage>> DeadLetterBacklog(
    RoleRows& rows, const ScopeClose& c) {
  absl::StatusOr<std::vector<MessageRecord>> messages =
      rows.ScopeBacklog(c.role_key_wire);
  if (!messages.ok()) return messages.status();
  const std::string last_error = roles::ScopeClosedLastError(c);
  std::vector<ClaimedMessage> claimed;
  std::vector<std::string> ids;
  for (MessageRecord& m : *messages) {
    absl::StatusOr<std::optional<bool>> inserted =
        rows.DeadLetter(m, kScopeClosedReason, c.now_ms, last_error);
    if (!inserted.ok()) return inserted.status();
    if (!inserted->has_value()) continue;  // fence lost (locked: cannot)
    ids.push_back(m.id);
    claimed.push_back(
        roles::ScopeClosedClaim(std::move(m), c.now_ms, **inserted));
  }
  if (absl::Status s = rows.Settled(ids); !s.ok()) return s;
  return claimed;
}

absl::StatusOr<ScopeCloseResult> CloseScopeIn(RoleRows& rows,
                                              const ScopeClose& c) {
  if (absl::Status s = rows.LockScope(c.role_key_wire, true); !s.ok()) {
    return s;
  }
  ScopeCloseResult result;
  absl::StatusOr<std::optional<ClosedScopeRecord>> earlier =
      rows.LoadClosedScope(c.role_key_wire, c.project_id, c.scope_id);
  if (!earlier.ok()) return earlier.status();
  if (earlier->has_value()) {
    result.closed = std::move(**earlier);
    result.already_closed = true;
    return result;
  }
  // The role row (locked first), then its candidates, deleted explicitly
  // so the count does not depend on the foreign key's cascade.
  absl::StatusOr<std::optional<RoleRecord>> role =
      rows.Load(c.role_key_wire, RowLock::kUpdate);
  if (!role.ok()) return role.status();
  absl::StatusOr<int64_t> candidates = rows.DeleteCandidates(c.role_key_wire);
  if (!candidates.ok()) return candidates.status();
  result.candidates_removed = *candidates;
  if (role->has_value()) {
    absl::StatusOr<bool> removed = rows.Delete(c.role_key_wire);
    if (!removed.ok()) return removed.status();
    result.removed_role = std::move(*role);
  }
  // Every pending message of the role, expired or not: none can be
  // delivered any more.
  absl::StatusOr<std::vector<ClaimedMessage>> claimed =
      DeadLetterBacklog(rows, c);
  if (!claimed.ok()) return claimed.status();
  result.dead_lettered = std::move(*claimed);
  // The record, last, so it carries the count (the order inside the
  // transaction is invisible to every other write; the scope's lock keeps
  // any other close out, so the insert meets no conflict).
  result.closed = roles::ClosedScopeOf(
      c, static_cast<int64_t>(result.dead_lettered.size()));
  if (absl::Status s = rows.InsertClosedScope(result.closed); !s.ok()) {
    return s;
  }
  return result;
}

}  // namespace

absl::Status RefuseClosedScope(RoleRows& rows, absl::string_view wire,
                               absl::string_view project_id,
                               absl::string_view scope_id) {
  absl::StatusOr<std::optional<ClosedScopeRecord>> closed =
      rows.LoadClosedScope(wire, project_id, scope_id);
  if (!closed.ok()) return closed.status();
  if (closed->has_value()) return ScopeClosedError((*closed)->role_key_wire);
  return absl::OkStatus();
}

absl::Status GuardOpenScope(RoleRows& rows, absl::string_view wire) {
  if (absl::Status s = rows.LockScope(wire, false); !s.ok()) return s;
  return RefuseClosedScope(rows, wire);
}

absl::StatusOr<RoleWrite> ReserveRoleWith(
    RoleRows& rows, const RoleReservation& r,
    const std::function<std::string()>& new_id) {
  // Inside the write, under the scope's lock (taken with the row's): a
  // scope closed after the caller's checks is refused here, before anything
  // is written.
  absl::StatusOr<std::optional<RoleRecord>> current =
      rows.LockScopeAndLoad(r.role_key_wire);
  if (!current.ok()) return current.status();
  if (absl::Status s =
          RefuseClosedScope(rows, r.role_key_wire, r.project_id, r.scope_id);
      !s.ok()) {
    return s;
  }
  // Twice at most: when another hub inserts the first row meanwhile, our
  // insert waits for its commit, does nothing, and the row is then read.
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (attempt > 0) {
      current = rows.Load(r.role_key_wire, RowLock::kUpdate);
      if (!current.ok()) return current.status();
    }
    absl::StatusOr<roles::RolePlan> plan =
        roles::PlanReservation(*current, r, new_id);
    if (!plan.ok()) return plan.status();
    if (plan->refused) return std::move(*plan->refused);
    if (!plan->insert) return ApplyFenced(rows, plan->next, plan->fence);
    absl::StatusOr<std::optional<RoleRecord>> inserted =
        rows.Insert(plan->next);
    if (!inserted.ok()) return inserted.status();
    if (inserted->has_value()) {
      return roles::Refused(RoleOutcome::kApplied, std::move(*inserted));
    }
  }
  // No row of this wire, yet the insert conflicted: the project, kind and
  // scope belong to another wire (SQLite: a UNIQUE constraint failure).
  return FailedPreconditionError(
      "STORE_CONSTRAINT",
      absl::StrCat("UNIQUE constraint failed: role_registry.project_id, "
                   "role_kind, scope_id (role '",
                   r.role_key_wire, "')"));
}

bool NamesEveryGuard(const RoleCas& cas) {
  return cas.expected_version && cas.expected_epoch &&
         cas.expected_activation_seq && cas.expected_activation_id;
}

absl::StatusOr<RoleWrite> CompareAndSetRoleWith(
    RoleRows& rows, const RoleCas& cas,
    std::optional<CasAnswer> one_statement) {
  if (!one_statement.has_value()) {
    absl::StatusOr<std::optional<RoleRecord>> row =
        rows.LockScopeAndLoad(cas.role_key_wire);
    if (!row.ok()) return row.status();
    absl::StatusOr<roles::RolePlan> plan = roles::PlanCas(*row, cas);
    if (!plan.ok()) return plan.status();
    if (plan->refused) return CasRefused(rows, cas, std::move(*plan->refused));
    return ApplyFenced(rows, plan->next, plan->fence);
  }
  CasAnswer& written = *one_statement;
  if (!written.ok()) return written.status();
  if (written->has_value()) {
    return roles::Refused(RoleOutcome::kApplied, std::move(*written));
  }
  // It changed no row: why, read from the latest row.
  absl::StatusOr<std::optional<RoleRecord>> row =
      rows.Load(cas.role_key_wire, RowLock::kNone);
  if (!row.ok()) return row.status();
  absl::StatusOr<roles::RolePlan> plan = roles::PlanCas(*row, cas);
  if (!plan.ok()) return plan.status();
  if (plan->refused) return CasRefused(rows, cas, std::move(*plan->refused));
  return roles::Refused(RoleOutcome::kCasConflict, std::move(*row));
}

absl::StatusOr<RecoveryResult> RecoverRolesWith(
    RoleRows& rows, int64_t now_ms,
    const std::function<std::string()>& new_id) {
  RecoveryResult result;
  absl::StatusOr<std::vector<RoleRecord>> before = rows.All(RowLock::kUpdate);
  if (!before.ok()) return before.status();
  for (const RoleRecord& cur : *before) {
    std::optional<RoleRecord> next = roles::RecoveredRole(cur, now_ms, new_id);
    if (!next.has_value()) continue;
    absl::StatusOr<RoleWrite> w = ApplyFenced(rows, *next, roles::FenceOf(cur));
    if (!w.ok()) return w.status();
    if (w->outcome == RoleOutcome::kApplied) {
      result.recovered.push_back(std::move(*w->role));
    }
  }
  absl::StatusOr<std::vector<RoleRecord>> after = rows.All(RowLock::kNone);
  if (!after.ok()) return after.status();
  result.roles = std::move(*after);
  absl::StatusOr<std::vector<MessageRecord>> pending = rows.Backlogs(now_ms);
  if (!pending.ok()) return pending.status();
  result.pending_role_messages = std::move(*pending);
  return result;
}

absl::StatusOr<RoleOutcome> DeleteRoleWith(RoleRows& rows,
                                           absl::string_view wire) {
  absl::StatusOr<bool> deleted = rows.Delete(wire);
  if (!deleted.ok()) return deleted.status();
  return *deleted ? RoleOutcome::kApplied : RoleOutcome::kNotFound;
}

absl::StatusOr<RoleRecord> GetRoleWith(RoleRows& rows, absl::string_view wire) {
  absl::StatusOr<std::optional<RoleRecord>> row =
      rows.Load(wire, RowLock::kNone);
  if (!row.ok()) return row.status();
  if (!row->has_value()) {
    return NotFoundError("ROLE_NOT_FOUND",
                         absl::StrCat("role '", wire, "' not found"));
  }
  return std::move(**row);
}

absl::StatusOr<CandidateRecord> UpsertCandidateWith(RoleRows& rows,
                                                    const CandidateUpsert& u) {
  // FOR UPDATE, not FOR SHARE: a later reservation of the same group then
  // needs no upgrade (two hubs upgrading a shared lock deadlock).
  if (absl::Status s = rows.LockScope(u.role_key_wire, false); !s.ok()) {
    return s;
  }
  absl::StatusOr<std::optional<RoleRecord>> role =
      rows.Load(u.role_key_wire, RowLock::kUpdate);
  if (!role.ok()) return role.status();
  if (!role->has_value()) {
    if (absl::Status s = RefuseClosedScope(rows, u.role_key_wire); !s.ok()) {
      return s;
    }
    return NotFoundError(
        "ROLE_NOT_FOUND",
        absl::StrCat("role '", u.role_key_wire, "' not found for candidate"));
  }
  absl::StatusOr<std::optional<CandidateRecord>> row =
      rows.MergeCandidate(roles::CandidateMergeOf(u));
  if (!row.ok()) return row.status();
  if (!row->has_value()) return CandidateNotFound(u.role_key_wire, u.agent_id);
  return std::move(**row);
}

absl::StatusOr<CandidateRecord> UpdateReachabilityWith(
    RoleRows& rows, const ReachabilityUpdate& u) {
  if (absl::Status s = rows.LockScope(u.role_key_wire, false); !s.ok()) {
    return s;
  }
  absl::StatusOr<std::optional<CandidateRecord>> current =
      rows.LoadCandidate(u.role_key_wire, u.agent_id, RowLock::kUpdate);
  if (!current.ok()) return current.status();
  if (!current->has_value()) {
    if (absl::Status s = RefuseClosedScope(rows, u.role_key_wire); !s.ok()) {
      return s;
    }
    return CandidateNotFound(u.role_key_wire, u.agent_id);
  }
  CandidateRecord c = std::move(**current);
  roles::ApplyReachability(u, &c);
  absl::StatusOr<std::optional<CandidateRecord>> row = rows.UpdateProbe(c);
  if (!row.ok()) return row.status();
  if (!row->has_value()) return CandidateNotFound(u.role_key_wire, u.agent_id);
  return std::move(**row);
}

absl::StatusOr<ScopeCloseResult> CloseScopeWith(RoleRows& rows,
                                                const ScopeClose& close) {
  absl::StatusOr<ScopeCloseResult> result = CloseScopeIn(rows, close);
  if (!result.ok()) rows.Undone();
  return result;
}

}  // namespace hub::storage
