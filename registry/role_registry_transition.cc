// RoleRegistry: state changes decided by the transition kernel
// (registry/role_transitions.h, TRIFLUX-HUB §5.2). The kernel says which
// state comes next; the write stays the fenced Reserve or CompareAndSet.
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "registry/role_registry.h"
#include "registry/role_registry_internal.h"
#include "status/status.h"

namespace hub {

namespace {

constexpr absl::string_view kInvalidTransition = "INVALID_ROLE_TRANSITION";

// The answer to a refused pair: the role's state does not allow the change,
// which is a precondition of the write, not a malformed request.
absl::Status Refused(const RoleRecord& from, RoleTrigger trigger,
                     absl::string_view why) {
  absl::Status s = FailedPreconditionError(
      kInvalidTransition,
      absl::StrCat("role state '", RoleStateName(from.state),
                   "' does not allow trigger '", RoleTriggerName(trigger),
                   "': ", why));
  s = WithMetadata(std::move(s), "role_key_wire", from.role_key_wire);
  s = WithMetadata(std::move(s), "state", RoleStateName(from.state));
  s = WithMetadata(std::move(s), "trigger", RoleTriggerName(trigger));
  return WithMetadata(std::move(s), "version", absl::StrCat(from.version));
}

}  // namespace

void RoleRegistry::Note(const RoleTransitionNote& note) {
  if (options_.on_transition) options_.on_transition(note);
}

absl::StatusOr<TransitionResult> RoleRegistry::Transition(
    const TransitionInput& in) {
  const RoleRecord& from = in.from;
  if (in.patch.state.has_value()) {
    return role_internal::RequestInvalid(
        "patch.state", "the transition kernel decides the state");
  }
  RoleTransitionNote note;
  note.role_key_wire = from.role_key_wire;
  note.from = from.state;
  note.trigger = in.trigger;
  note.version = from.version;
  absl::StatusOr<RoleTransition> row =
      ReduceRoleTransition(from.state, in.trigger);
  if (!row.ok() || !row->to.has_value() ||
      row->action == RoleAction::kRejectStaleAck) {
    note.refused = true;
    Note(note);
    if (!row.ok()) {
      return Refused(from, in.trigger, "the transition table has no such row");
    }
    return Refused(from, in.trigger,
                   row->to.has_value()
                       ? "its row rejects an ACK and writes nothing"
                       : "its row removes the role (CloseScope)");
  }
  RolePatchInput patch = in.patch;
  patch.state = *row->to;
  if (!patch.update_mask.empty() &&
      std::find(patch.update_mask.begin(), patch.update_mask.end(), "state") ==
          patch.update_mask.end()) {
    patch.update_mask.push_back("state");
  }
  RoleKeyRef ref;
  ref.wire = from.role_key_wire;
  absl::StatusOr<RoleRecord> written;
  if (in.write == TransitionWrite::kReserve) {
    ReserveInput reserve;
    reserve.role = ref;
    reserve.expected_version = from.version;
    reserve.expected_epoch = from.epoch;
    reserve.patch = std::move(patch);
    absl::StatusOr<ReserveResult> reserved = Reserve(reserve);
    if (!reserved.ok()) return reserved.status();
    written = std::move(reserved->role);
  } else {
    CasInput cas;
    cas.role = ref;
    cas.expected_version = from.version;
    cas.expected_epoch = from.epoch;
    cas.expected_activation_seq = from.activation_seq;
    cas.expected_activation_id = from.activation_id;
    cas.patch = std::move(patch);
    written = CompareAndSet(cas);
  }
  if (!written.ok()) return written.status();
  note.to = row->to;
  note.version = written->version;
  Note(note);
  return TransitionResult{std::move(*written), *row};
}

}  // namespace hub
