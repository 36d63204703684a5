#include "hub/edge/admission.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "hub/services/role_mapping.h"
#include "hub/v1/role_key.pb.h"
#include "registry/role_key.h"
#include "registry/role_registry.h"
#include "status/status.h"

namespace hub {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::MethodDescriptor;

// The string at `path` ("a.b.c") through singular message fields; "" when a
// field on the way is missing or not of the kind the path needs.
std::string StringAt(const Message& request, absl::string_view path) {
  const Message* message = &request;
  const std::vector<absl::string_view> parts = absl::StrSplit(path, '.');
  for (size_t i = 0; i < parts.size(); ++i) {
    const FieldDescriptor* field =
        message->GetDescriptor()->FindFieldByName(std::string(parts[i]));
    if (field == nullptr || field->is_repeated()) return "";
    const bool last = i + 1 == parts.size();
    if (last) {
      if (field->cpp_type() != FieldDescriptor::CPPTYPE_STRING) return "";
      return message->GetReflection()->GetString(*message, field);
    }
    if (field->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE) return "";
    message = &message->GetReflection()->GetMessage(*message, field);
  }
  return "";
}

// The project of the role the request names (role_key or role_key_wire);
// "" when it names none or the key does not resolve (the method refuses it
// with the key's own reason).
std::string RoleKeyProject(const Message& request) {
  const Descriptor* type = request.GetDescriptor();
  const FieldDescriptor* key_field = type->FindFieldByName("role_key");
  const FieldDescriptor* wire_field = type->FindFieldByName("role_key_wire");
  if (key_field == nullptr || wire_field == nullptr) return "";
  const google::protobuf::Reflection* reflection = request.GetReflection();
  const bool has_key = reflection->HasField(request, key_field);
  hub::v1::RoleKey key;
  if (has_key) key.CopyFrom(reflection->GetMessage(request, key_field));
  absl::StatusOr<ResolvedRoleKey> resolved = ResolveRoleKey(
      ToRoleKeyRef(has_key, key, reflection->GetString(request, wire_field)));
  return resolved.ok() ? resolved->key.project_id : "";
}

absl::string_view ShortName(absl::string_view method) {
  const size_t slash = method.rfind('/');
  return slash == absl::string_view::npos ? method : method.substr(slash + 1);
}

}  // namespace

absl::string_view AccessName(Access access) {
  switch (access) {
    case Access::kAnyPrincipal:
      return "any principal";
    case Access::kAgentOwner:
      return "the agent's owner";
    case Access::kSenderOwner:
      return "the sender's owner";
    case Access::kOperator:
      return "operator";
    case Access::kOperatorOrOwner:
      return "operator or the agent's owner";
    case Access::kAdminOrOwner:
      return "admin or the agent's owner";
    case Access::kAdmin:
      return "admin";
  }
  return "unknown";
}

std::string RequestProject(const MethodRule& rule, const Message& request) {
  if (rule.project_from_role_key) {
    std::string project = RoleKeyProject(request);
    if (!project.empty()) return project;
  }
  if (rule.project_field.empty()) return "";
  return StringAt(request, rule.project_field);
}

std::string RequestAgent(const MethodRule& rule, const Message& request) {
  if (rule.agent_field.empty()) return "";
  return StringAt(request, rule.agent_field);
}

absl::StatusOr<std::unique_ptr<Admission>> Admission::Create(
    const Authority* authority, CallGate* gate,
    const std::vector<MethodRule>& rules) {
  std::unique_ptr<Admission> admission(
      new Admission(authority, gate, /*open=*/false));
  const google::protobuf::DescriptorPool* pool =
      google::protobuf::DescriptorPool::generated_pool();
  for (const MethodRule& rule : rules) {
    const size_t slash = rule.method.rfind('/');
    const MethodDescriptor* method =
        slash == std::string::npos ? nullptr
                                   : pool->FindMethodByName(absl::StrCat(
                                         rule.method.substr(0, slash), ".",
                                         rule.method.substr(slash + 1)));
    if (method == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("admission rule for unknown method ", rule.method));
    }
    if (!admission->rules_.emplace(method->input_type(), rule).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "admission rule for ", rule.method, ": its request ",
          method->input_type()->full_name(), " already has a row"));
    }
  }
  return admission;
}

const Admission& Admission::Open() {
  static const Admission* const open =
      new Admission(nullptr, nullptr, /*open=*/true);
  return *open;
}

const MethodRule* Admission::RuleOf(const Descriptor* type) const {
  auto it = rules_.find(type);
  return it == rules_.end() ? nullptr : &it->second;
}

absl::Status Admission::Check(const Principal& principal,
                              const MethodRule& rule,
                              const Message* request) const {
  // The caller's kind first: an agent token on an operator's method is
  // refused whatever the request names.
  if (rule.access == Access::kOperator || rule.access == Access::kAdmin) {
    const PrincipalKind kind = rule.access == Access::kAdmin
                                   ? PrincipalKind::kAdmin
                                   : PrincipalKind::kOperator;
    if (absl::Status s = RequireKind(principal, kind, ShortName(rule.method));
        !s.ok()) {
      return s;
    }
  }
  if (request == nullptr) return absl::OkStatus();
  if (rule.project != ProjectRule::kNone) {
    const std::string project = RequestProject(rule, *request);
    if (project.empty() ? rule.project == ProjectRule::kRequired
                        : IsProjectId(project)) {
      if (absl::Status s = RequireProject(principal, project); !s.ok()) {
        return s;
      }
    }
  }
  if (authority_ == nullptr) return absl::OkStatus();
  const std::string agent = RequestAgent(rule, *request);
  switch (rule.access) {
    case Access::kAgentOwner:
      return authority_->CheckOwner(principal, agent);
    case Access::kSenderOwner:
      return agent.empty() ? absl::OkStatus()
                           : authority_->CheckOwner(principal, agent);
    case Access::kOperatorOrOwner:
      if (!principal.IsAgentToken()) return absl::OkStatus();
      if (agent.empty()) {
        return WithMetadata(
            ReasonError(absl::StatusCode::kPermissionDenied,
                        "PERMISSION_DENIED",
                        absl::StrCat("principal ", principal.name,
                                     " has an agent token, which acts only "
                                     "for an agent it owns: name it in ",
                                     rule.agent_field)),
            "field", rule.agent_field);
      }
      return authority_->CheckOwner(principal, agent);
    case Access::kAdminOrOwner:
      if (principal.kind == PrincipalKind::kAdmin) return absl::OkStatus();
      return authority_->CheckOwner(principal, agent);
    default:
      return absl::OkStatus();
  }
}

absl::StatusOr<Principal> Admission::AdmitCall(
    const grpc::CallbackServerContext& context, const Message& request) const {
  // Limits first: a call that does not authenticate spends its host's
  // budget (LimitPrincipal), so inventing tokens buys no fresh one.
  if (gate_ != nullptr) {
    if (absl::Status s = gate_->AdmitCall(context, request); !s.ok()) return s;
  }
  absl::StatusOr<Principal> principal = CallPrincipal(authority_, context);
  if (!principal.ok()) return principal.status();
  if (absl::Status s = CheckRule(*principal, request.GetDescriptor(), &request);
      !s.ok()) {
    return s;
  }
  return principal;
}

absl::StatusOr<AdmittedStream> Admission::AdmitStream(
    const grpc::CallbackServerContext& context, const Descriptor* method,
    const Message* request,
    std::function<void(const absl::Status&)> on_idle) const {
  AdmittedStream admitted;
  if (gate_ != nullptr) {
    absl::StatusOr<std::unique_ptr<StreamTicket>> ticket =
        gate_->AdmitStream(context, request, std::move(on_idle));
    if (!ticket.ok()) return ticket.status();
    admitted.ticket = *std::move(ticket);
  }
  absl::StatusOr<Principal> principal = CallPrincipal(authority_, context);
  if (!principal.ok()) return principal.status();
  admitted.principal = *std::move(principal);
  if (absl::Status s = CheckRule(admitted.principal, method, request);
      !s.ok()) {
    return s;
  }
  return admitted;
}

absl::Status Admission::CheckRule(const Principal& principal,
                                  const Descriptor* type,
                                  const Message* request) const {
  if (open_) return absl::OkStatus();
  const MethodRule* rule = RuleOf(type);
  if (rule == nullptr) {
    return ReasonError(
        absl::StatusCode::kPermissionDenied, "PERMISSION_DENIED",
        absl::StrCat("no admission rule for ", type->full_name()));
  }
  return Check(principal, *rule, request);
}

absl::Status Admission::AdmitFrame(const Principal& principal,
                                   const Message& frame) const {
  return CheckRule(principal, frame.GetDescriptor(), &frame);
}

}  // namespace hub
