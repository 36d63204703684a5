// RoleService: EnsureRole and AckRoleActivation, answered by the activator.
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "hub/edge/call_gate.h"
#include "hub/services/error_mapping.h"
#include "hub/services/proto_time.h"
#include "hub/services/role_mapping.h"
#include "hub/services/role_service.h"
#include "hub/v1/role_activation.pb.h"
#include "registry/agent_validation.h"
#include "status/status.h"

namespace hub {
namespace {

// "session_start" for ENSURE_ROLE_TRIGGER_SESSION_START ...; "" for
// UNSPECIFIED, unknown numbers and the hub-only triggers HOLDER_OFFLINE and
// CANDIDATE_CHANGED, which clients may not send.
std::string TriggerWord(hub::v1::EnsureRoleTrigger trigger) {
  if (trigger == hub::v1::ENSURE_ROLE_TRIGGER_UNSPECIFIED ||
      trigger == hub::v1::ENSURE_ROLE_TRIGGER_HOLDER_OFFLINE ||
      trigger == hub::v1::ENSURE_ROLE_TRIGGER_CANDIDATE_CHANGED) {
    return "";
  }
  const std::string& name = hub::v1::EnsureRoleTrigger_Name(trigger);
  constexpr absl::string_view kPrefix = "ENSURE_ROLE_TRIGGER_";
  if (name.size() <= kPrefix.size()) return "";
  return absl::AsciiStrToLower(name.substr(kPrefix.size()));
}

// What an agent token may give as EnsureRole's trigger: what an agent
// session does (it starts, or it asks). The other client triggers name hub or
// operator events the log would then misreport, and CHARTER_ISSUED re-elects
// an active holder under a new epoch (fencing it): PERMISSION_DENIED, metadata
// field. UNSPECIFIED and hub-only triggers stay ENSURE_ROLE_REQUEST_INVALID.
absl::Status CheckAgentTrigger(hub::v1::EnsureRoleTrigger trigger) {
  if (trigger == hub::v1::ENSURE_ROLE_TRIGGER_SESSION_START ||
      trigger == hub::v1::ENSURE_ROLE_TRIGGER_MANUAL ||
      TriggerWord(trigger).empty()) {
    return absl::OkStatus();
  }
  return WithMetadata(
      ReasonError(absl::StatusCode::kPermissionDenied, "PERMISSION_DENIED",
                  absl::StrCat("an agent token may ask for an election with "
                               "trigger SESSION_START or MANUAL, not ",
                               TriggerWord(trigger))),
      "field", "trigger");
}

// The receipt, with the trigger and cause id the caller sent.
void FillReceipt(const EnsureReceipt& receipt,
                 const hub::v1::EnsureRoleRequest& request,
                 hub::v1::EnsureRoleReceipt* out) {
  *out = ToReceiptProto(receipt);
  out->set_trigger(request.trigger());
  out->set_cause_id(request.cause_id());
}

}  // namespace

void RoleServiceImpl::SetActivator(Activator* activator) {
  activator_.store(activator);
}

absl::Status RoleServiceImpl::CheckEnsureAgent(const EnsureRequest& in,
                                               const std::string& agent_id) {
  PresenceRegistry* presence = presence_.load();
  if (agent_id.empty() || presence == nullptr) return absl::OkStatus();
  // The request's own faults come first, in the activator's order.
  absl::StatusOr<ResolvedRoleKey> key = ResolveRoleKey(in.role);
  if (!key.ok()) return key.status();
  if (in.trigger.empty() || in.cause_id.empty()) {
    return InvalidArgumentError(
        "ENSURE_ROLE_REQUEST_INVALID",
        "EnsureRole needs a client trigger and a cause_id");
  }
  absl::StatusOr<AgentView> agent = presence->Get(agent_id);
  if (!agent.ok()) return agent.status();
  if (agent->record.project_id.has_value() &&
      *agent->record.project_id != key->key.project_id) {
    return WithMetadata(
        WithMetadata(
            ReasonError(
                absl::StatusCode::kPermissionDenied, "PROJECT_SCOPE_MISMATCH",
                absl::StrCat("agent ", agent_id, " belongs to project ",
                             *agent->record.project_id, ", not the role's")),
            "agent_id", agent_id),
        "role_key_wire", key->wire);
  }
  return absl::OkStatus();
}

grpc::ServerUnaryReactor* RoleServiceImpl::EnsureRole(
    grpc::CallbackServerContext* context,
    const hub::v1::EnsureRoleRequest* request,
    hub::v1::EnsureRoleResponse* response) {
  absl::StatusOr<Principal> principal =
      admission_->AdmitCall(*context, *request);
  if (!principal.ok()) return FinishUnary(context, principal.status());
  if (principal->IsAgentToken()) {
    if (absl::Status s = CheckAgentTrigger(request->trigger()); !s.ok()) {
      return FinishUnary(context, s);
    }
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  pool_->Schedule([this, reactor, request, response] {
    EnsureRequest in;
    in.role = ToRoleKeyRef(request->has_role_key(), request->role_key(),
                           request->role_key_wire());
    in.trigger = TriggerWord(request->trigger());
    in.cause_id = request->cause_id();
    if (!request->agent_id().empty()) {
      if (absl::Status s = ValidateAgentId(request->agent_id()); !s.ok()) {
        reactor->Finish(ToGrpcStatus(s));
        return;
      }
    }
    Activator* activator = activator_.load();
    if (activator == nullptr) {
      absl::StatusOr<ResolvedRoleKey> key = ResolveRoleKey(in.role);
      if (!key.ok()) {
        reactor->Finish(ToGrpcStatus(key.status()));
        return;
      }
      EnsureReceipt receipt;
      receipt.accepted = false;
      receipt.disposition = EnsureDisposition::kManagerDisabled;
      receipt.role.role_key_wire = key->wire;
      receipt.role.project_id = key->key.project_id;
      receipt.role.role_kind = std::string(RoleKindName(key->key.kind));
      receipt.role.scope_id = key->key.scope_id;
      receipt.role.state = RoleState::kElectable;
      receipt.role.blocked_reason = "activator_unavailable";
      FillReceipt(receipt, *request, response->mutable_receipt());
      reactor->Finish(grpc::Status::OK);
      return;
    }
    // The activator refuses an empty trigger or cause_id itself; the rest of
    // the client rules are checked here.
    if (in.cause_id.size() > 256 ||
        (!in.cause_id.empty() &&
         absl::StripAsciiWhitespace(in.cause_id).empty())) {
      reactor->Finish(ToGrpcStatus(InvalidArgumentError(
          "ENSURE_ROLE_REQUEST_INVALID",
          "cause_id must be 1..256 characters and not blank")));
      return;
    }
    if (absl::Status s = CheckEnsureAgent(in, request->agent_id()); !s.ok()) {
      reactor->Finish(ToGrpcStatus(s));
      return;
    }
    absl::StatusOr<EnsureReceipt> receipt = activator->Ensure(in);
    if (!receipt.ok()) {
      reactor->Finish(ToGrpcStatus(receipt.status()));
      return;
    }
    FillReceipt(*receipt, *request, response->mutable_receipt());
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

template <typename Request>
grpc::ServerUnaryReactor* RoleServiceImpl::AsHolder(
    grpc::CallbackServerContext* context, const Request& request,
    std::function<void(grpc::ServerUnaryReactor*, Activator*)> work) {
  if (absl::StatusOr<Principal> principal =
          admission_->AdmitCall(*context, request);
      !principal.ok()) {
    return FinishUnary(context, principal.status());
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  pool_->Schedule([this, reactor, work = std::move(work)] {
    Activator* activator = activator_.load();
    if (activator == nullptr) {
      reactor->Finish(ToGrpcStatus(UnavailableError(
          "ROLE_ACTIVATOR_UNAVAILABLE", "this hub runs no activator")));
      return;
    }
    work(reactor, activator);
  });
  return reactor;
}

grpc::ServerUnaryReactor* RoleServiceImpl::AckRoleActivation(
    grpc::CallbackServerContext* context,
    const hub::v1::AckRoleActivationRequest* request,
    hub::v1::AckRoleActivationResponse* response) {
  // §5.8's principal check, authenticated: only the principal that owns the
  // acknowledging agent may ACK for it (the activator then requires that
  // agent to be the holder).
  return AsHolder(
      context, *request,
      [request, response](grpc::ServerUnaryReactor* reactor,
                          Activator* activator) {
        if (absl::Status s = ValidateAgentId(request->agent_id()); !s.ok()) {
          reactor->Finish(ToGrpcStatus(s));
          return;
        }
        absl::StatusOr<AckOutcome> outcome = activator->Ack(
            ToActivationAck(request->ack(), request->agent_id()));
        if (!outcome.ok()) {
          reactor->Finish(ToGrpcStatus(outcome.status()));
          return;
        }
        hub::v1::RoleActivationAckResult* result = response->mutable_result();
        result->set_idempotent(outcome->idempotent);
        *result->mutable_role() = ToRoleProto(outcome->role);
        result->set_backlog_delivered_count(outcome->backlog_delivered);
        reactor->Finish(grpc::Status::OK);
        if (outcome->push_backlog) outcome->push_backlog();
      });
}

grpc::ServerUnaryReactor* RoleServiceImpl::ReleaseRole(
    grpc::CallbackServerContext* context,
    const hub::v1::ReleaseRoleRequest* request,
    hub::v1::ReleaseRoleResponse* response) {
  // Only the principal that owns the holder may step down for it (the
  // activator then requires that agent to be the holder at the epoch).
  return AsHolder(
      context, *request,
      [request, response](grpc::ServerUnaryReactor* reactor,
                          Activator* activator) {
        StepDownInput in;
        in.role = ToRoleKeyRef(request->has_role_key(), request->role_key(),
                               request->role_key_wire());
        in.agent_id = request->agent_id();
        in.epoch = request->epoch();
        absl::StatusOr<StepDownOutcome> outcome = activator->StepDown(in);
        if (!outcome.ok()) {
          reactor->Finish(ToGrpcStatus(outcome.status()));
          return;
        }
        *response->mutable_released() = ToRoleProto(outcome->released);
        // The release is durable either way. An election that could not
        // run (the store failed) leaves `next` unset: the role waits as
        // electable for the next ensure or candidate event.
        if (outcome->next.ok()) {
          *response->mutable_next() = ToReceiptProto(*outcome->next);
        }
        reactor->Finish(grpc::Status::OK);
      });
}

}  // namespace hub
