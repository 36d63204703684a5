// Activator: a holder steps down (ReleaseRole). The role moves on at once,
// without the detach grace that an abrupt loss waits out.
#include <string>

#include "absl/strings/str_cat.h"
#include "registry/activator.h"
#include "registry/agent_validation.h"
#include "status/status.h"

namespace hub {
namespace {

absl::Status WithFence(absl::Status s, const RoleRecord& row) {
  s = WithMetadata(std::move(s), "role_key_wire", row.role_key_wire);
  s = WithMetadata(std::move(s), "epoch", absl::StrCat(row.epoch));
  s = WithMetadata(std::move(s), "state", RoleStateName(row.state));
  return WithMetadata(std::move(s), "holder_agent_id",
                      row.holder_agent_id.value_or(""));
}

}  // namespace

absl::StatusOr<StepDownOutcome> Activator::StepDown(const StepDownInput& in) {
  absl::StatusOr<ResolvedRoleKey> key = ResolveRoleKey(in.role);
  if (!key.ok()) return key.status();
  if (absl::Status s = ValidateAgentId(in.agent_id); !s.ok()) {
    return WithMetadata(std::move(s), "field", "agent_id");
  }
  if (in.epoch < 1) {
    return WithMetadata(
        InvalidArgumentError("REQUEST_INVALID", "epoch must be at least 1"),
        "field", "epoch");
  }
  RoleKeyRef ref;
  ref.wire = key->wire;
  absl::StatusOr<RoleRecord> row = roles_->Get(ref);
  if (!row.ok()) return row.status();
  const bool held = row->state == RoleState::kActive ||
                    row->state == RoleState::kElectedProbing;
  if (row->epoch != in.epoch || !held) {
    return WithFence(FailedPreconditionError(
                         "STALE_EPOCH",
                         absl::StrCat("epoch ", in.epoch, " of ", key->wire,
                                      " is not held now (the role is at epoch ",
                                      row->epoch, ", ", row->state, ")")),
                     *row);
  }
  if (row->holder_agent_id != in.agent_id) {
    return WithFence(
        FailedPreconditionError(
            "HOLDER_MISMATCH", absl::StrCat(in.agent_id, " does not hold ",
                                            key->wire, " at epoch ", in.epoch)),
        *row);
  }
  // Fenced by the row as read (its version and epoch): a role that moved on
  // meanwhile is not released twice.
  const RoleTrigger trigger = row->state == RoleState::kActive
                                  ? RoleTrigger::kHolderOffline
                                  : RoleTrigger::kHolderLeaseExpired;
  absl::StatusOr<RoleRecord> released =
      Release(*row, trigger, "released", std::nullopt);
  if (!released.ok()) {
    absl::StatusOr<RoleRecord> now = roles_->Get(ref);
    return WithFence(
        FailedPreconditionError("STALE_EPOCH",
                                absl::StrCat("the role changed while epoch ",
                                             in.epoch, " was being released")),
        now.ok() ? *now : *row);
  }
  StepDownOutcome outcome;
  outcome.released = *released;
  EnsureRequest next;
  next.role = ref;
  next.trigger = "holder_offline";
  next.cause_id = absl::StrCat("released:", in.agent_id, ":", in.epoch);
  next.passed_over = {in.agent_id};
  outcome.next = Ensure(next);
  if (outcome.next.ok() &&
      outcome.next->disposition == EnsureDisposition::kJoined) {
    // A flight of the old epoch is still landing: look again once it has
    // (the row says "released", so the look ensures), or now if it just did.
    ReconsiderRole(key->wire, next.cause_id);
  }
  return outcome;
}

}  // namespace hub
