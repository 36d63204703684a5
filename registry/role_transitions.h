// The role reachability transition kernel: triflux's 31-row table
// (TRIFLUX-HUB.md §5.2) and a pure reducer over it. Given a role's state and
// a trigger, it says which state comes next and which action the caller must
// carry out. It does no I/O, reads no clock and touches no store: guards
// (epochs, versions, leases) and side effects belong to the role registry and
// the activator, which apply what this kernel decides
// (RoleRegistry::Transition writes the state it gives). Hub adds five rows
// for §5.8's kill switch after the 31 of §5.2 (docs/design/roles.md).
//
// Failures are INVALID_ARGUMENT with one of triflux's reason codes
// (ReasonOf(status)): ROLE_REACHABILITY_STATE_INVALID for an unknown state
// name, INVALID_ROLE_TRANSITION for an unknown trigger name or a
// (state, trigger) pair the table does not list.
#ifndef HUB_REGISTRY_ROLE_TRANSITIONS_H_
#define HUB_REGISTRY_ROLE_TRANSITIONS_H_

#include <cstddef>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "records/role.h"

namespace hub {

// The events the reducer accepts, one per trigger name in §5.2.
enum class RoleTrigger {
  kCandidateSelected,
  kStandupReserved,
  kNoCandidate,
  kCandidatesExcluded,
  kProbeSucceeded,
  kActivationAcked,
  kProbeFailed,
  kWakeFailed,
  kAckTimeout,
  kHolderLeaseExpired,
  kHolderOffline,
  kTransportFailed,
  kCharterReissued,
  kAlternateCandidateAvailable,
  kRetryDue,
  kRetriesExhausted,
  kExclusionExpired,
  kCandidateRegistered,
  kLocatorRegistered,
  kCapabilityRegistered,
  kStaleAck,
  kScopeClosed,
  // hub: §5.8's kill switch (not a §5.2 trigger; docs/design/roles.md).
  kManagerDisabled,
};

// What the caller must do to carry out a transition, one per action name in
// §5.2.
enum class RoleAction {
  kReserveHolder,
  kReserveStandup,
  kRecordBlockedNoCandidate,
  kScheduleExclusionExpiry,
  kSendActivation,
  kRecordActivationAck,
  kExcludeFailedCandidate,
  kRevokeHolderEpochFence,
  kRevokeHolderPreserveBacklog,
  kFenceActiveAuthority,
  kReserveReack,
  kFailoverCandidate,
  kReserveRetryEpoch,
  kScheduleQuarantine,
  kRestoreCandidateEligibility,
  kClearQuarantine,
  kRejectStaleAck,
  kRemoveRegistry,
  // hub: revoke any authority because the kind's manager is disabled.
  kFenceManagerDisabled,
};

// One row of the table.
struct RoleTransition {
  RoleState from;
  RoleTrigger trigger;
  // The next state; nullopt when the row is removed (scope_closed).
  std::optional<RoleState> to;
  RoleAction action;
  // The result code reported to the caller: "STALE_EPOCH" for stale_ack (the
  // state is kept and the ACK rejected), nullopt for every other row.
  std::optional<std::string> result_code;
};

// How many rows of RoleTransitionTable() are TRIFLUX-HUB §5.2's.
inline constexpr size_t kSpecRoleTransitionCount = 31;

// The whole table: first the 31 rows in §5.2's order, with each "any of the
// 5" row expanded per state in RoleState order (5 stale_ack rows, then 5
// scope_closed rows); then hub's 5 manager_disabled rows (any state ->
// electable, fence_manager_disabled), in RoleState order. Valid for the life
// of the process.
absl::Span<const RoleTransition> RoleTransitionTable();

// The row for (from, trigger), or INVALID_ROLE_TRANSITION when the table has
// none (e.g. active + probe_succeeded).
absl::StatusOr<RoleTransition> ReduceRoleTransition(RoleState from,
                                                    RoleTrigger trigger);

// The same reducer over names as stored and sent (RoleStateName,
// RoleTriggerName). The state is checked first: an unknown state name is
// ROLE_REACHABILITY_STATE_INVALID whatever the trigger; then an unknown
// trigger name, or a pair not in the table, is INVALID_ROLE_TRANSITION.
absl::StatusOr<RoleTransition> ReduceRoleTransition(absl::string_view from,
                                                    absl::string_view trigger);

// The snake_case trigger name of §5.2, e.g. "candidate_selected".
absl::string_view RoleTriggerName(RoleTrigger trigger);
// The trigger named `name` (exact, case-sensitive), or nullopt.
std::optional<RoleTrigger> ParseRoleTrigger(absl::string_view name);

// The snake_case action name of §5.2, e.g. "reserve_holder".
absl::string_view RoleActionName(RoleAction action);

}  // namespace hub

#endif  // HUB_REGISTRY_ROLE_TRANSITIONS_H_
