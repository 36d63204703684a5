// Mapping between hub.v1 role and candidate messages and the role registry's
// domain types. Pure functions: no validation beyond what a type change
// needs (the registry validates and assigns every reason code).
#ifndef HUB_HUB_SERVICES_ROLE_MAPPING_H_
#define HUB_HUB_SERVICES_ROLE_MAPPING_H_

#include <optional>
#include <string>

#include "google/protobuf/field_mask.pb.h"
#include "hub/v1/role.pb.h"
#include "hub/v1/role_activation.pb.h"
#include "hub/v1/role_candidate.pb.h"
#include "hub/v1/role_key.pb.h"
#include "hub/v1/role_service.pb.h"
#include "registry/activator.h"
#include "registry/role_event.h"
#include "registry/role_registry.h"
#include "storage/store.h"

namespace hub {

// The role named by a request (role_key if the message is present, the wire
// if non-empty).
RoleKeyRef ToRoleKeyRef(bool has_key, const hub::v1::RoleKey& key,
                        const std::string& wire);

// The domain's state for ROLE_STATE_ELECTABLE ...; nullopt for UNSPECIFIED
// or an unknown number.
std::optional<RoleState> StateFromProto(int state);
hub::v1::RoleState StateToProto(RoleState state);
// nullopt for UNSPECIFIED; otherwise the domain kind, or an error for an
// unknown number (ROLE_KIND_UNSUPPORTED, field `field`).
absl::StatusOr<std::optional<RoleKind>> KindFilter(int kind,
                                                   absl::string_view field);

RolePatchInput ToRolePatchInput(const hub::v1::RolePatch& patch,
                                const google::protobuf::FieldMask& mask);
ReserveInput ToReserveInput(const hub::v1::ReserveRoleRequest& request);
// INVALID_CAS for an ActivationIdGuard that is present but unusable (none =
// false, or an empty activation_id).
absl::StatusOr<CasInput> ToCasInput(
    const hub::v1::CompareAndSetRoleRequest& request);

hub::v1::Role ToRoleProto(const RoleRecord& role);
// A closed lead scope as recorded (CloseRoleScope, ListClosedScopes).
hub::v1::ClosedRoleScope ToClosedScopeProto(const ClosedScopeRecord& closed);

hub::v1::RoleChangeKind ToRoleChangeKindProto(RoleChangeKind kind);
// A committed (or snapshot) role change as WatchRoles and the presence
// stream send it. `previous_state` is the receiver's idea of the state
// before the change; absent leaves previous_state
// UNSPECIFIED.
hub::v1::RoleChange ToRoleChangeProto(
    const RoleEvent& event, const std::optional<RoleState>& previous_state);

// The activator's form of an activation ACK; `principal` is the agent the
// call acts as (the stream's agent or the unary call's agent_id).
ActivationAck ToActivationAck(const hub::v1::RoleActivationAck& ack,
                              const std::string& principal);

// Structured locators become triflux JSON objects, one text per locator.
CandidatePatchInput ToCandidatePatchInput(
    const hub::v1::RoleCandidatePatch& patch,
    const google::protobuf::FieldMask& mask);
hub::v1::RoleCandidate ToCandidateProto(const CandidateRecord& c);

hub::v1::EnsureRoleDisposition DispositionProto(EnsureDisposition d);
// ENSURE_ROLE_TRIGGER_HOLDER_OFFLINE for "holder_offline" ...; UNSPECIFIED
// for a word that names none.
hub::v1::EnsureRoleTrigger TriggerProto(const std::string& word);
// The receipt as the API shows it; its trigger and cause id are the
// receipt's own.
hub::v1::EnsureRoleReceipt ToReceiptProto(const EnsureReceipt& receipt);

// "ok" for PROBE_CODE_OK ...; "" for UNSPECIFIED or unknown numbers.
std::string ProbeCodeWord(int code);

}  // namespace hub

#endif  // HUB_HUB_SERVICES_ROLE_MAPPING_H_
