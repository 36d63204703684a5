#include "storage/role_updates.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "status/status.h"

namespace hub::storage::roles {
namespace {

// Applies the generic patch rules of §5.4 to `row` (NOT NULL columns keep
// their value on Clear; last_transition defaults to now).
void ApplyRolePatch(const RolePatch& p, int64_t now_ms, RoleRecord* row) {
  if (p.state.set()) row->state = p.state.value();
  row->holder_agent_id = p.holder_agent_id.ApplyTo(row->holder_agent_id);
  row->previous_holder_agent_id =
      p.previous_holder_agent_id.ApplyTo(row->previous_holder_agent_id);
  row->activation_id = p.activation_id.ApplyTo(row->activation_id);
  row->activation_deadline_ms =
      p.activation_deadline_ms.ApplyTo(row->activation_deadline_ms);
  row->holder_lease_expires_ms =
      p.holder_lease_expires_ms.ApplyTo(row->holder_lease_expires_ms);
  row->charter_version = p.charter_version.ApplyTo(row->charter_version);
  row->charter_acked_epoch =
      p.charter_acked_epoch.ApplyTo(row->charter_acked_epoch);
  if (p.retry_count.set()) row->retry_count = p.retry_count.value();
  row->next_probe_ms = p.next_probe_ms.ApplyTo(row->next_probe_ms);
  row->blocked_reason = p.blocked_reason.ApplyTo(row->blocked_reason);
  row->last_transition_ms = p.last_transition_ms.value_or(now_ms);
  if (p.last_reason.set()) row->last_reason = p.last_reason.value();
}

RolePlan RefusedPlan(RoleOutcome outcome, std::optional<RoleRecord> latest) {
  RolePlan plan;
  plan.refused = Refused(outcome, std::move(latest));
  return plan;
}

}  // namespace

RoleFence FenceOf(const RoleRecord& r) {
  return {r.version, r.epoch, r.activation_seq, r.activation_id};
}

RoleWrite Refused(RoleOutcome outcome, std::optional<RoleRecord> latest) {
  RoleWrite w;
  w.outcome = outcome;
  w.role = std::move(latest);
  return w;
}

absl::StatusOr<RolePlan> PlanReservation(
    const std::optional<RoleRecord>& current, const RoleReservation& r,
    const std::function<std::string()>& new_id) {
  RolePlan plan;
  RoleRecord& next = plan.next;
  if (current.has_value()) {
    const RoleRecord& cur = *current;
    if (r.expected_version.value_or(cur.version) != cur.version) {
      return RefusedPlan(RoleOutcome::kStaleVersion, cur);
    }
    if (r.expected_epoch.value_or(cur.epoch) != cur.epoch ||
        r.next_epoch.value_or(cur.epoch + 1) != cur.epoch + 1) {
      return RefusedPlan(RoleOutcome::kStaleEpoch, cur);
    }
    if (r.next_activation_seq.value_or(cur.activation_seq + 1) !=
        cur.activation_seq + 1) {
      return RefusedPlan(RoleOutcome::kStaleActivationSeq, cur);
    }
    next = cur;
    next.epoch = cur.epoch + 1;
    next.activation_seq = cur.activation_seq + 1;
    plan.fence = FenceOf(cur);
    plan.fence.version = r.expected_version.value_or(plan.fence.version);
    plan.fence.epoch = r.expected_epoch.value_or(plan.fence.epoch);
  } else {
    next.role_key_wire = r.role_key_wire;
    next.project_id = r.project_id;
    next.role_kind = r.role_kind;
    next.scope_id = r.scope_id;
    plan.insert = true;
  }
  std::optional<std::string> old_holder = next.holder_agent_id;
  ApplyRolePatch(r.patch, r.now_ms, &next);
  // §5.3 defaults for what the caller left unset.
  if (!r.patch.state.set()) {
    next.state = next.holder_agent_id ? RoleState::kElectedProbing
                                      : RoleState::kElectable;
  }
  if (r.patch.activation_id.keep() && r.patch.holder_agent_id.set()) {
    next.activation_id = new_id();
  }
  if (r.patch.previous_holder_agent_id.keep() &&
      next.holder_agent_id != old_holder) {
    next.previous_holder_agent_id = old_holder;
  }
  if (!r.patch.last_reason.set()) next.last_reason = "role_reserved";
  return plan;
}

absl::StatusOr<RolePlan> PlanCas(const std::optional<RoleRecord>& current,
                                 const RoleCas& cas) {
  if (!cas.expected_version || !cas.expected_epoch ||
      !cas.expected_activation_seq || !cas.expected_activation_id) {
    return RefusedPlan(RoleOutcome::kInvalidCas, current);
  }
  if (!current.has_value()) return RefusedPlan(RoleOutcome::kNotFound, {});
  const RoleRecord& cur = *current;
  if (*cas.expected_version != cur.version) {
    return RefusedPlan(RoleOutcome::kStaleVersion, cur);
  }
  if (*cas.expected_epoch != cur.epoch) {
    return RefusedPlan(RoleOutcome::kStaleEpoch, cur);
  }
  if (*cas.expected_activation_seq != std::optional(cur.activation_seq)) {
    return RefusedPlan(RoleOutcome::kStaleActivationSeq, cur);
  }
  if (*cas.expected_activation_id != cur.activation_id) {
    return RefusedPlan(RoleOutcome::kStaleActivationId, cur);
  }
  RolePlan plan;
  plan.next = cur;
  ApplyRolePatch(cas.patch, cas.now_ms, &plan.next);
  plan.fence = {*cas.expected_version, *cas.expected_epoch, cur.activation_seq,
                *cas.expected_activation_id};
  return plan;
}

std::optional<RoleRecord> RecoveredRole(
    const RoleRecord& cur, int64_t now_ms,
    const std::function<std::string()>& new_id) {
  bool authority_state = cur.state != RoleState::kUnreachable &&
                         cur.state != RoleState::kQuarantined;
  RoleRecord next = cur;
  next.epoch = cur.epoch + 1;
  next.activation_seq = cur.activation_seq + 1;
  next.last_transition_ms = now_ms;
  next.charter_acked_epoch.reset();
  next.activation_deadline_ms.reset();
  if (cur.holder_agent_id && authority_state) {
    bool lease_live = cur.holder_lease_expires_ms.has_value() &&
                      *cur.holder_lease_expires_ms > now_ms;
    if (lease_live) {
      // Never restored straight to active: re-probe under a new id.
      next.state = RoleState::kElectedProbing;
      next.activation_id = new_id();
      next.last_reason = "restart_reprobe_required";
    } else {
      next.state = RoleState::kElectable;
      next.previous_holder_agent_id = cur.holder_agent_id;
      next.holder_agent_id.reset();
      next.activation_id.reset();
      next.holder_lease_expires_ms.reset();
      next.blocked_reason.reset();
      next.last_reason = "restart_holder_lease_expired";
    }
  } else if (!cur.holder_agent_id &&
             (cur.activation_id || cur.state == RoleState::kElectedProbing ||
              cur.state == RoleState::kActive)) {
    // Orphaned activation, or a phantom active row (v8).
    next.state = RoleState::kElectable;
    next.activation_id.reset();
    next.last_reason = cur.state == RoleState::kActive
                           ? "restart_phantom_active"
                           : "restart_activation_fenced";
  } else {
    return std::nullopt;  // electable, unreachable, quarantined: keep
  }
  return next;
}

RoleOutcome LostFenceOutcome(const std::optional<RoleRecord>& latest,
                             const RoleFence& fence) {
  if (!latest.has_value()) return RoleOutcome::kNotFound;
  if (latest->version != fence.version) return RoleOutcome::kStaleVersion;
  if (latest->epoch != fence.epoch) return RoleOutcome::kStaleEpoch;
  if (latest->activation_seq != fence.activation_seq) {
    return RoleOutcome::kStaleActivationSeq;
  }
  if (latest->activation_id != fence.activation_id) {
    return RoleOutcome::kStaleActivationId;
  }
  return RoleOutcome::kCasConflict;
}

CandidateMerge CandidateMergeOf(const CandidateUpsert& u) {
  CandidateMerge m;
  CandidateRecord& c = m.insert;
  c.role_key_wire = u.role_key_wire;
  c.agent_id = u.agent_id;
  c.source = u.source.value_or("operator");
  c.priority = u.priority.value_or(0);
  c.transport_locators_json = u.transport_locators_json.value_or("[]");
  c.consecutive_probe_failures = u.consecutive_probe_failures.value_or(0);
  c.excluded_until_ms = u.excluded_until_ms.ApplyTo(std::nullopt);
  c.last_probe_ms = u.last_probe_ms.ApplyTo(std::nullopt);
  c.last_probe_code = u.last_probe_code.ApplyTo(std::nullopt);
  c.updated_at_ms = u.now_ms;
  m.keep_source = !u.source.has_value();
  m.keep_priority = !u.priority.has_value();
  m.keep_transport_locators = !u.transport_locators_json.has_value();
  m.keep_probe_failures = !u.consecutive_probe_failures.has_value();
  m.keep_excluded_until = u.excluded_until_ms.keep();
  m.keep_last_probe_ms = u.last_probe_ms.keep();
  m.keep_last_probe_code = u.last_probe_code.keep();
  return m;
}

void ApplyReachability(const ReachabilityUpdate& u, CandidateRecord* c) {
  switch (u.failures) {
    case ReachabilityUpdate::Failures::kKeep:
      break;
    case ReachabilityUpdate::Failures::kSet:
      c->consecutive_probe_failures = u.failures_value;
      break;
    case ReachabilityUpdate::Failures::kIncrement:
      ++c->consecutive_probe_failures;
      break;
    case ReachabilityUpdate::Failures::kReset:
      c->consecutive_probe_failures = 0;
      break;
  }
  // The exclusion follows the count this write commits.
  c->excluded_until_ms =
      u.excluded_until_for ? std::optional<int64_t>(u.excluded_until_for(
                                 c->consecutive_probe_failures))
                           : u.excluded_until_ms.ApplyTo(c->excluded_until_ms);
  c->last_probe_ms = u.last_probe_ms.value_or(u.now_ms);
  c->last_probe_code = u.last_probe_code.ApplyTo(c->last_probe_code);
}

std::optional<CandidatePageQuery::Key> CandidatePageStart(
    const CandidatePageQuery& q) {
  if (q.after.has_value()) {
    if (!q.role_key_wire.has_value() ||
        q.after->role_key_wire == *q.role_key_wire) {
      return q.after;
    }
    // A key of another role: all of this role's rows follow it, or none.
    if (q.after->role_key_wire > *q.role_key_wire) return std::nullopt;
  }
  return CandidatePageQuery::Key{q.role_key_wire.value_or(""),
                                 std::numeric_limits<int64_t>::max(),
                                 std::numeric_limits<int64_t>::max(), ""};
}

std::string ScopeClosedLastError(const ScopeClose& c) {
  return absl::StrCat("lead scope closed by ", c.closed_by,
                      c.reason.empty() ? "" : absl::StrCat(": ", c.reason));
}

ClaimedMessage ScopeClosedClaim(MessageRecord message, int64_t now_ms,
                                bool dlq_inserted) {
  ClaimedMessage claimed;
  claimed.transition.message_id = message.id;
  claimed.transition.previous_status = message.status;
  claimed.transition.reason = kScopeClosedReason;
  claimed.transition.failed_at_ms = now_ms;
  claimed.transition.dlq_inserted = dlq_inserted;
  claimed.message = std::move(message);
  return claimed;
}

ClosedScopeRecord ClosedScopeOf(const ScopeClose& c,
                                int64_t dead_lettered_count) {
  ClosedScopeRecord r;
  r.project_id = c.project_id;
  r.scope_id = c.scope_id;
  r.role_key_wire = c.role_key_wire;
  r.closed_at_ms = c.now_ms;
  r.closed_by = c.closed_by;
  r.reason = c.reason;
  r.dead_lettered_count = dead_lettered_count;
  return r;
}

}  // namespace hub::storage::roles
