// RoleService unary handlers. WatchRoles is in role_service_watch.cc.
#include "hub/services/role_service.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "hub/edge/call_gate.h"
#include "hub/services/error_mapping.h"
#include "hub/services/proto_time.h"
#include "hub/services/role_mapping.h"
#include "status/status.h"
#include "storage/group_commit_writer.h"

namespace hub {
namespace {

grpc::ServerUnaryReactor* Finish(grpc::CallbackServerContext* context,
                                 const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

// A list request's scoping, the same for ListRoles and ListClosedScopes:
// the project filter (admission checked that the principal holds it; a
// malformed id is left to the registry, PROJECT_ID_INVALID), the projects
// the principal may see, and the scope filter.
template <typename Filter>
void ScopeListing(const Principal& principal, const std::string& project_id,
                  const std::string& scope_id, Filter* filter) {
  if (!project_id.empty()) filter->project_id = project_id;
  filter->scope = ScopeOf(principal);
  if (!scope_id.empty()) filter->scope_id = scope_id;
}

// What an agent token may write in its own candidate row: its preference
// (priority, within +-kMaxAgentPriority, so that operators keep the ranks
// above and below every self-declared one) and how to reach it (the
// locators, as at registration). Where the row came from (source) and the
// hub's record of probing it (failures, exclusion, last probe) are an
// operator's to write: PERMISSION_DENIED, metadata field. A path the patch
// does not have is left to the registry (UPDATE_MASK_INVALID).
absl::Status CheckAgentPatch(const CandidatePatchInput& p) {
  const std::pair<absl::string_view, bool> operator_only[] = {
      {"source", p.source.has_value()},
      {"consecutive_probe_failures", p.consecutive_probe_failures.has_value()},
      {"excluded_until", p.excluded_until_ms.has_value()},
      {"last_probe_at", p.last_probe_ms.has_value()},
      {"last_probe_code", p.last_probe_code.has_value()}};
  for (const auto& [path, set] : operator_only) {
    const bool written =
        p.update_mask.empty()
            ? set
            : std::find(p.update_mask.begin(), p.update_mask.end(), path) !=
                  p.update_mask.end();
    if (written) {
      return WithMetadata(
          ReasonError(absl::StatusCode::kPermissionDenied, "PERMISSION_DENIED",
                      absl::StrCat("an agent token may not write candidate.",
                                   path, ": it is an operator's")),
          "field", absl::StrCat("candidate.", path));
    }
  }
  constexpr int64_t kMax = RoleServiceImpl::kMaxAgentPriority;
  if (p.priority.has_value() && (*p.priority > kMax || *p.priority < -kMax)) {
    return WithMetadata(
        ReasonError(absl::StatusCode::kPermissionDenied, "PERMISSION_DENIED",
                    absl::StrCat("an agent token may set a priority of -", kMax,
                                 "..", kMax, " only; beyond is an operator's")),
        "field", "candidate.priority");
  }
  return absl::OkStatus();
}

}  // namespace

RoleServiceImpl::RoleServiceImpl(RoleRegistry* registry, const Clock* clock,
                                 BlockingPool* pool)
    : registry_(registry), clock_(clock), pool_(pool) {}

grpc::ServerUnaryReactor* RoleServiceImpl::ReserveRole(
    grpc::CallbackServerContext* context,
    const hub::v1::ReserveRoleRequest* request,
    hub::v1::ReserveRoleResponse* response) {
  if (absl::StatusOr<Principal> principal =
          admission_->AdmitCall(*context, *request);
      !principal.ok()) {
    return Finish(context, principal.status());
  }
  ReserveInput input = ToReserveInput(*request);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  // No thread waits for the group commit: the answer leaves from the
  // store's completion thread once the reservation is durable.
  registry_->ReserveAsync(
      std::move(input),
      [reactor, response](absl::StatusOr<ReserveResult> result) {
        if (result.ok()) {
          *response->mutable_role() = ToRoleProto(result->role);
          response->set_created(result->created);
        }
        reactor->Finish(ToGrpcStatus(result.status()));
      });
  return reactor;
}

grpc::ServerUnaryReactor* RoleServiceImpl::CompareAndSetRole(
    grpc::CallbackServerContext* context,
    const hub::v1::CompareAndSetRoleRequest* request,
    hub::v1::CompareAndSetRoleResponse* response) {
  if (absl::StatusOr<Principal> principal =
          admission_->AdmitCall(*context, *request);
      !principal.ok()) {
    return Finish(context, principal.status());
  }
  absl::StatusOr<CasInput> input = ToCasInput(*request);
  if (!input.ok()) return Finish(context, input.status());
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  // An idle writer commits it on this thread, which holds no lock here.
  storage::CommitOnThisThread commit_here;
  registry_->CompareAndSetAsync(
      *input, [reactor, response](absl::StatusOr<RoleRecord> role) {
        if (role.ok()) *response->mutable_role() = ToRoleProto(*role);
        reactor->Finish(ToGrpcStatus(role.status()));
      });
  return reactor;
}

grpc::ServerUnaryReactor* RoleServiceImpl::GetRole(
    grpc::CallbackServerContext* context,
    const hub::v1::GetRoleRequest* request,
    hub::v1::GetRoleResponse* response) {
  absl::StatusOr<Principal> principal =
      admission_->AdmitCall(*context, *request);
  if (!principal.ok()) return Finish(context, principal.status());
  const RoleKeyRef ref = ToRoleKeyRef(
      request->has_role_key(), request->role_key(), request->role_key_wire());
  absl::StatusOr<RoleRecord> role = registry_->Get(ref);
  if (role.ok()) *response->mutable_role() = ToRoleProto(*role);
  return Finish(context, role.status());
}

grpc::ServerUnaryReactor* RoleServiceImpl::ListRoles(
    grpc::CallbackServerContext* context,
    const hub::v1::ListRolesRequest* request,
    hub::v1::ListRolesResponse* response) {
  absl::StatusOr<Principal> principal =
      admission_->AdmitCall(*context, *request);
  if (!principal.ok()) return Finish(context, principal.status());
  RoleListFilter filter;
  ScopeListing(*principal, request->project_id(), request->scope_id(), &filter);
  absl::StatusOr<std::optional<RoleKind>> kind =
      KindFilter(request->kind(), "kind");
  if (!kind.ok()) return Finish(context, kind.status());
  filter.kind = *kind;
  for (int state : request->states()) {
    std::optional<RoleState> known = StateFromProto(state);
    if (known.has_value()) filter.states.push_back(*known);
    filter.states_unknown = filter.states_unknown || !known.has_value();
  }
  const absl::Time now = clock_->Now();
  absl::StatusOr<RolePage> page =
      registry_->List(filter, request->page_size(), request->page_token());
  if (!page.ok()) return Finish(context, page.status());
  for (const RoleRecord& role : page->roles) {
    *response->add_roles() = ToRoleProto(role);
  }
  response->set_next_page_token(page->next_page_token);
  *response->mutable_server_time() = ToProtoTimestamp(now);
  return Finish(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* RoleServiceImpl::UpsertRoleCandidate(
    grpc::CallbackServerContext* context,
    const hub::v1::UpsertRoleCandidateRequest* request,
    hub::v1::UpsertRoleCandidateResponse* response) {
  CandidateUpsertInput input;
  input.role = ToRoleKeyRef(request->has_role_key(), request->role_key(),
                            request->role_key_wire());
  input.agent_id = request->agent_id();
  input.patch =
      ToCandidatePatchInput(request->candidate(), request->update_mask());
  absl::StatusOr<Principal> principal =
      admission_->AdmitCall(*context, *request);
  if (!principal.ok()) return Finish(context, principal.status());
  if (principal->IsAgentToken()) {
    if (absl::Status s = CheckAgentPatch(input.patch); !s.ok()) {
      return Finish(context, s);
    }
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  pool_->Schedule([this, reactor, response, input = std::move(input)] {
    absl::StatusOr<CandidateUpsertResult> result =
        registry_->UpsertCandidate(input);
    if (result.ok()) {
      *response->mutable_candidate() = ToCandidateProto(result->candidate);
      response->set_created(result->created);
    }
    reactor->Finish(ToGrpcStatus(result.status()));
  });
  return reactor;
}

grpc::ServerUnaryReactor* RoleServiceImpl::RemoveRoleCandidate(
    grpc::CallbackServerContext* context,
    const hub::v1::RemoveRoleCandidateRequest* request,
    hub::v1::RemoveRoleCandidateResponse* response) {
  const RoleKeyRef role = ToRoleKeyRef(
      request->has_role_key(), request->role_key(), request->role_key_wire());
  if (absl::StatusOr<Principal> principal =
          admission_->AdmitCall(*context, *request);
      !principal.ok()) {
    return Finish(context, principal.status());
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  pool_->Schedule([this, reactor, request, response, role] {
    absl::StatusOr<bool> removed =
        registry_->RemoveCandidate(role, request->agent_id());
    if (removed.ok()) response->set_removed(*removed);
    reactor->Finish(ToGrpcStatus(removed.status()));
  });
  return reactor;
}

grpc::ServerUnaryReactor* RoleServiceImpl::ListRoleCandidates(
    grpc::CallbackServerContext* context,
    const hub::v1::ListRoleCandidatesRequest* request,
    hub::v1::ListRoleCandidatesResponse* response) {
  absl::StatusOr<Principal> principal =
      admission_->AdmitCall(*context, *request);
  if (!principal.ok()) return Finish(context, principal.status());
  CandidateListInput input;
  if (request->has_role_key() || !request->role_key_wire().empty()) {
    input.role = ToRoleKeyRef(request->has_role_key(), request->role_key(),
                              request->role_key_wire());
  }
  input.scope = ScopeOf(*principal);
  if (!request->agent_id().empty()) input.agent_id = request->agent_id();
  input.page_size = request->page_size();
  input.page_token = request->page_token();
  absl::StatusOr<CandidatePage> page = registry_->ListCandidates(input);
  if (!page.ok()) return Finish(context, page.status());
  for (const CandidateRecord& c : page->candidates) {
    *response->add_candidates() = ToCandidateProto(c);
  }
  response->set_next_page_token(page->next_page_token);
  return Finish(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* RoleServiceImpl::ReportCandidateProbe(
    grpc::CallbackServerContext* context,
    const hub::v1::ReportCandidateProbeRequest* request,
    hub::v1::ReportCandidateProbeResponse* response) {
  if (absl::StatusOr<Principal> principal =
          admission_->AdmitCall(*context, *request);
      !principal.ok()) {
    return Finish(context, principal.status());
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  pool_->Schedule([this, reactor, request, response] {
    ProbeReportInput input;
    input.role = ToRoleKeyRef(request->has_role_key(), request->role_key(),
                              request->role_key_wire());
    input.agent_id = request->agent_id();
    input.code = ProbeCodeWord(request->code());
    input.transport_id = request->transport_id();
    if (request->has_probed_at()) {
      input.probed_at_ms = UnixMillis(FromProtoTimestamp(request->probed_at()));
    }
    if (request->has_consecutive_probe_failures()) {
      input.consecutive_probe_failures = request->consecutive_probe_failures();
    }
    if (request->has_excluded_until()) {
      input.excluded_until_ms =
          UnixMillis(FromProtoTimestamp(request->excluded_until()));
    }
    absl::StatusOr<CandidateRecord> row = registry_->ReportProbe(input);
    if (row.ok()) *response->mutable_candidate() = ToCandidateProto(*row);
    reactor->Finish(ToGrpcStatus(row.status()));
  });
  return reactor;
}

grpc::ServerUnaryReactor* RoleServiceImpl::CloseRoleScope(
    grpc::CallbackServerContext* context,
    const hub::v1::CloseRoleScopeRequest* request,
    hub::v1::CloseRoleScopeResponse* response) {
  const RoleKeyRef ref = ToRoleKeyRef(
      request->has_role_key(), request->role_key(), request->role_key_wire());
  absl::StatusOr<Principal> principal =
      admission_->AdmitCall(*context, *request);
  if (!principal.ok()) return Finish(context, principal.status());
  ScopeCloseInput input;
  input.role = ref;
  input.closed_by = principal->name.empty() ? "anonymous" : principal->name;
  input.reason = request->reason();
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  // One durable transaction, then the notices (more writes): on the pool.
  pool_->Schedule([this, reactor, response, input = std::move(input)] {
    Activator* activator = activator_.load();
    absl::StatusOr<ScopeCloseOutcome> closed =
        activator != nullptr ? activator->CloseScope(input)
                             : registry_->CloseScope(input);
    if (closed.ok()) {
      const storage::ScopeCloseResult& r = closed->result;
      *response->mutable_closed() = ToClosedScopeProto(r.closed);
      response->set_already_closed(r.already_closed);
      response->set_role_removed(r.removed_role.has_value());
      if (r.removed_role.has_value()) {
        *response->mutable_removed_role() = ToRoleProto(*r.removed_role);
      }
      response->set_candidates_removed(r.candidates_removed);
      response->set_dead_lettered_count(
          static_cast<int64_t>(r.dead_lettered.size()));
    }
    reactor->Finish(ToGrpcStatus(closed.status()));
  });
  return reactor;
}

grpc::ServerUnaryReactor* RoleServiceImpl::ListClosedScopes(
    grpc::CallbackServerContext* context,
    const hub::v1::ListClosedScopesRequest* request,
    hub::v1::ListClosedScopesResponse* response) {
  absl::StatusOr<Principal> principal =
      admission_->AdmitCall(*context, *request);
  if (!principal.ok()) return Finish(context, principal.status());
  ClosedScopeListFilter filter;
  ScopeListing(*principal, request->project_id(), request->scope_id(), &filter);
  const absl::Time now = clock_->Now();
  absl::StatusOr<ClosedScopePage> page = registry_->ListClosedScopes(
      filter, request->page_size(), request->page_token());
  if (!page.ok()) return Finish(context, page.status());
  for (const ClosedScopeRecord& closed : page->closed) {
    *response->add_closed_scopes() = ToClosedScopeProto(closed);
  }
  response->set_next_page_token(page->next_page_token);
  *response->mutable_server_time() = ToProtoTimestamp(now);
  return Finish(context, absl::OkStatus());
}

}  // namespace hub
