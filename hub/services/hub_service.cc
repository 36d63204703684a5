#include "hub/services/hub_service.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "hub/edge/call_gate.h"
#include "hub/services/error_mapping.h"
#include "hub/services/proto_time.h"
#include "hub/version.h"
#include "registry/role_key.h"
#include "status/status.h"

namespace hub {
namespace {

// The domain's input form of a structured key. An unspecified or unknown
// kind becomes a name the codec rejects with ROLE_KIND_UNSUPPORTED; an empty
// scope is an absent one (proto3 strings cannot tell them apart, and no valid
// key has an empty scope).
RoleKeyInput ToRoleKeyInput(const hub::v1::RoleKey& key) {
  RoleKeyInput input;
  input.project_id = key.project_id();
  switch (key.kind()) {
    case hub::v1::ROLE_KIND_CTO:
      input.role_kind = "cto";
      break;
    case hub::v1::ROLE_KIND_LEAD:
      input.role_kind = "lead";
      break;
    default:
      input.role_kind = hub::v1::RoleKind_Name(key.kind());
      if (input.role_kind.empty()) input.role_kind = std::to_string(key.kind());
      break;
  }
  if (!key.scope_id().empty()) input.scope_id = key.scope_id();
  return input;
}

hub::v1::RoleKey ToProto(const RoleKey& key) {
  hub::v1::RoleKey out;
  out.set_project_id(key.project_id);
  out.set_kind(key.kind == RoleKind::kCto ? hub::v1::ROLE_KIND_CTO
                                          : hub::v1::ROLE_KIND_LEAD);
  out.set_scope_id(key.scope_id);
  return out;
}

template <typename Response>
void FillKey(const RoleKey& key, const std::string& wire, Response* response) {
  *response->mutable_role_key() = ToProto(key);
  response->set_wire(wire);
  response->set_topic(RoleTopic(wire));
}

}  // namespace

HubServiceImpl::HubServiceImpl(HubIdentity identity, const Clock* clock,
                               PresenceRegistry* presence, RoleRegistry* roles)
    : identity_(std::move(identity)),
      clock_(clock),
      presence_(presence),
      roles_(roles) {}

grpc::ServerUnaryReactor* HubServiceImpl::GetStatus(
    grpc::CallbackServerContext* context,
    const hub::v1::GetStatusRequest* request,
    hub::v1::GetStatusResponse* response) {
  if (absl::StatusOr<Principal> principal =
          admission_->AdmitCall(*context, *request);
      !principal.ok()) {
    return FinishUnary(context, principal.status());
  }
  const absl::Time now = clock_->Now();
  response->set_version(kHubVersion);
  response->set_hub_instance_id(identity_.hub_instance_id);
  *response->mutable_started_at() = ToProtoTimestamp(identity_.started_at);
  *response->mutable_uptime() = ToProtoDuration(
      std::max(absl::ZeroDuration(), now - identity_.started_at));
  *response->mutable_server_time() = ToProtoTimestamp(now);
  response->set_store_type(identity_.store_type);
  response->set_store_path(identity_.store_path);
  response->set_store_fingerprint(identity_.store_fingerprint);
  const PresenceCounts counts = presence_->Counts();
  response->mutable_agents()->set_online(counts.online);
  response->mutable_agents()->set_stale(counts.stale);
  response->mutable_agents()->set_offline(counts.offline);
  response->set_open_presence_streams(counts.open_streams);
  hub::v1::RoleCounts* roles = response->mutable_roles();
  std::string token;
  do {
    absl::StatusOr<RolePage> page = roles_->List(RoleListFilter(), 1000, token);
    if (!page.ok()) break;
    for (const RoleRecord& r : page->roles) {
      if (r.state == RoleState::kElectable)
        roles->set_electable(roles->electable() + 1);
      if (r.state == RoleState::kElectedProbing) {
        roles->set_elected_probing(roles->elected_probing() + 1);
      }
      if (r.state == RoleState::kActive) roles->set_active(roles->active() + 1);
      if (r.state == RoleState::kUnreachable)
        roles->set_unreachable(roles->unreachable() + 1);
      if (r.state == RoleState::kQuarantined)
        roles->set_quarantined(roles->quarantined() + 1);
    }
    token = page->next_page_token;
  } while (!token.empty());
  return FinishUnary(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* HubServiceImpl::EncodeRoleKey(
    grpc::CallbackServerContext* context,
    const hub::v1::EncodeRoleKeyRequest* request,
    hub::v1::EncodeRoleKeyResponse* response) {
  if (absl::StatusOr<Principal> principal =
          admission_->AdmitCall(*context, *request);
      !principal.ok()) {
    return FinishUnary(context, principal.status());
  }
  if (!request->has_role_key()) {
    return FinishUnary(context, InvalidArgumentError("ROLE_KEY_INVALID",
                                                     "role_key is required"));
  }
  absl::StatusOr<RoleKey> key =
      NormalizeRoleKey(ToRoleKeyInput(request->role_key()));
  if (!key.ok()) return FinishUnary(context, key.status());
  absl::StatusOr<std::string> wire = hub::EncodeRoleKey(*key);
  if (!wire.ok()) return FinishUnary(context, wire.status());
  FillKey(*key, *wire, response);
  return FinishUnary(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* HubServiceImpl::DecodeRoleKey(
    grpc::CallbackServerContext* context,
    const hub::v1::DecodeRoleKeyRequest* request,
    hub::v1::DecodeRoleKeyResponse* response) {
  if (absl::StatusOr<Principal> principal =
          admission_->AdmitCall(*context, *request);
      !principal.ok()) {
    return FinishUnary(context, principal.status());
  }
  absl::StatusOr<RoleKey> key = hub::DecodeRoleKey(request->wire());
  if (!key.ok()) return FinishUnary(context, key.status());
  FillKey(*key, request->wire(), response);
  return FinishUnary(context, absl::OkStatus());
}

}  // namespace hub
