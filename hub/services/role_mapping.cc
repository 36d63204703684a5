#include "hub/services/role_mapping.h"

#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "hub/services/proto_time.h"
#include "nlohmann/json.hpp"
#include "registry/clock.h"
#include "registry/role_key.h"
#include "status/status.h"

namespace hub {
namespace {

// Indexed by enum number; element 0 is the UNSPECIFIED value.
constexpr absl::string_view kProbeWords[] = {"",
                                             "ok",
                                             "target_not_found",
                                             "adapter_unavailable",
                                             "timeout",
                                             "permission_denied",
                                             "protocol_mismatch",
                                             "transport_error",
                                             "ack_timeout"};
constexpr absl::string_view kSourceWords[] = {"", "grant", "standup",
                                              "operator"};
constexpr absl::string_view kTransportKinds[] = {"", "claude-uds", "tmux"};
constexpr absl::string_view kCapabilities[] = {"", "probe", "wake", "activate",
                                               "interrupt"};

template <size_t N>
std::string WordOf(const absl::string_view (&words)[N], int number) {
  if (number <= 0 || static_cast<size_t>(number) >= N) return "";
  return std::string(words[number]);
}

template <size_t N>
int NumberOf(const absl::string_view (&words)[N], absl::string_view word) {
  for (size_t i = 1; i < N; ++i) {
    if (words[i] == word) return static_cast<int>(i);
  }
  return 0;
}

int64_t Millis(const google::protobuf::Timestamp& t) {
  return UnixMillis(FromProtoTimestamp(t));
}

google::protobuf::Timestamp Stamp(int64_t ms) {
  return ToProtoTimestamp(absl::FromUnixMillis(ms));
}

std::vector<std::string> Paths(const google::protobuf::FieldMask& mask) {
  return {mask.paths().begin(), mask.paths().end()};
}

// The triflux JSON object of a structured locator, field for field; the
// registry validates it like any JSON locator.
std::string LocatorJson(const hub::v1::TransportLocator& l) {
  nlohmann::ordered_json o;
  o["schema_version"] = l.schema_version();
  o["transport_id"] = l.transport_id();
  o["kind"] = WordOf(kTransportKinds, l.kind());
  o["host_id"] = l.host_id();
  nlohmann::ordered_json caps = nlohmann::ordered_json::array();
  for (int c : l.capabilities()) caps.push_back(WordOf(kCapabilities, c));
  o["capabilities"] = caps;
  o["priority"] = l.priority();
  o["expires_at_ms"] = Millis(l.expires_at());
  nlohmann::ordered_json locator = nlohmann::ordered_json::object();
  if (l.has_claude_uds()) {
    const hub::v1::ClaudeUdsLocator& u = l.claude_uds();
    if (u.has_session_id()) locator["session_id"] = u.session_id();
    if (u.has_short_()) locator["short"] = u.short_();
    locator["bridge_id"] = u.bridge_id();
  } else if (l.has_tmux()) {
    locator["session_name"] = l.tmux().session_name();
    locator["mux_server_id"] = l.tmux().mux_server_id();
  }
  o["locator"] = locator;
  return o.dump();
}

std::string Text(const nlohmann::json& o, const char* key) {
  auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : "";
}

// Stored locators (already normalized when hub wrote them) as messages;
// entries that do not have the expected shape are left out.
void FillLocators(const std::string& json_text, hub::v1::RoleCandidate* out) {
  nlohmann::json list = nlohmann::json::parse(json_text, nullptr, false);
  if (!list.is_array()) return;
  for (const nlohmann::json& v : list) {
    if (!v.is_object() || !v.contains("locator") || !v["locator"].is_object()) {
      continue;
    }
    const int kind = NumberOf(kTransportKinds, Text(v, "kind"));
    if (kind == 0) continue;
    hub::v1::TransportLocator* l = out->add_transport_locators();
    l->set_schema_version(Text(v, "schema_version"));
    l->set_transport_id(Text(v, "transport_id"));
    l->set_kind(static_cast<hub::v1::TransportKind>(kind));
    l->set_host_id(Text(v, "host_id"));
    if (v.contains("capabilities") && v["capabilities"].is_array()) {
      for (const nlohmann::json& c : v["capabilities"]) {
        if (!c.is_string()) continue;
        int cap = NumberOf(kCapabilities, c.get<std::string>());
        if (cap != 0) {
          l->add_capabilities(static_cast<hub::v1::TransportCapability>(cap));
        }
      }
    }
    if (v.contains("priority") && v["priority"].is_number_integer()) {
      l->set_priority(v["priority"].get<int64_t>());
    }
    if (v.contains("expires_at_ms") && v["expires_at_ms"].is_number_integer()) {
      *l->mutable_expires_at() = Stamp(v["expires_at_ms"].get<int64_t>());
    }
    const nlohmann::json& loc = v["locator"];
    if (kind == hub::v1::TRANSPORT_KIND_CLAUDE_UDS) {
      hub::v1::ClaudeUdsLocator* u = l->mutable_claude_uds();
      if (loc.contains("session_id"))
        u->set_session_id(Text(loc, "session_id"));
      if (loc.contains("short")) u->set_short_(Text(loc, "short"));
      u->set_bridge_id(Text(loc, "bridge_id"));
    } else {
      l->mutable_tmux()->set_session_name(Text(loc, "session_name"));
      l->mutable_tmux()->set_mux_server_id(Text(loc, "mux_server_id"));
    }
  }
}

void FillRoleKey(const std::string& wire, hub::v1::RoleKey* key) {
  absl::StatusOr<RoleKey> decoded = DecodeRoleKey(wire);
  if (!decoded.ok()) return;  // rows are written with valid wires
  key->set_project_id(decoded->project_id);
  key->set_kind(decoded->kind == RoleKind::kCto ? hub::v1::ROLE_KIND_CTO
                                                : hub::v1::ROLE_KIND_LEAD);
  key->set_scope_id(decoded->scope_id);
}

}  // namespace

RoleKeyRef ToRoleKeyRef(bool has_key, const hub::v1::RoleKey& key,
                        const std::string& wire) {
  RoleKeyRef ref;
  if (has_key) {
    RoleKeyInput input;
    input.project_id = key.project_id();
    input.role_kind = key.kind() == hub::v1::ROLE_KIND_CTO    ? "cto"
                      : key.kind() == hub::v1::ROLE_KIND_LEAD ? "lead"
                                                              : "";
    // proto3 cannot tell "" from absent: "" means no scope.
    if (!key.scope_id().empty()) input.scope_id = key.scope_id();
    ref.key = std::move(input);
  }
  if (!wire.empty()) ref.wire = wire;
  return ref;
}

std::optional<RoleState> StateFromProto(int state) {
  switch (state) {
    case hub::v1::ROLE_STATE_ELECTABLE:
      return RoleState::kElectable;
    case hub::v1::ROLE_STATE_ELECTED_PROBING:
      return RoleState::kElectedProbing;
    case hub::v1::ROLE_STATE_ACTIVE:
      return RoleState::kActive;
    case hub::v1::ROLE_STATE_UNREACHABLE:
      return RoleState::kUnreachable;
    case hub::v1::ROLE_STATE_QUARANTINED:
      return RoleState::kQuarantined;
    default:
      return std::nullopt;
  }
}

hub::v1::RoleState StateToProto(RoleState state) {
  switch (state) {
    case RoleState::kElectable:
      return hub::v1::ROLE_STATE_ELECTABLE;
    case RoleState::kElectedProbing:
      return hub::v1::ROLE_STATE_ELECTED_PROBING;
    case RoleState::kActive:
      return hub::v1::ROLE_STATE_ACTIVE;
    case RoleState::kUnreachable:
      return hub::v1::ROLE_STATE_UNREACHABLE;
    case RoleState::kQuarantined:
      return hub::v1::ROLE_STATE_QUARANTINED;
  }
  return hub::v1::ROLE_STATE_UNSPECIFIED;  // Unreachable for a valid value.
}

absl::StatusOr<std::optional<RoleKind>> KindFilter(int kind,
                                                   absl::string_view field) {
  if (kind == hub::v1::ROLE_KIND_UNSPECIFIED) return std::nullopt;
  if (kind == hub::v1::ROLE_KIND_CTO) return RoleKind::kCto;
  if (kind == hub::v1::ROLE_KIND_LEAD) return RoleKind::kLead;
  return WithMetadata(
      InvalidArgumentError("ROLE_KIND_UNSUPPORTED", "unknown role kind"),
      "field", field);
}

RolePatchInput ToRolePatchInput(const hub::v1::RolePatch& p,
                                const google::protobuf::FieldMask& mask) {
  RolePatchInput in;
  if (p.state() != hub::v1::ROLE_STATE_UNSPECIFIED) {
    in.state = StateFromProto(p.state());
    in.state_unknown = !in.state.has_value();
  }
  if (p.has_holder_agent_id()) in.holder_agent_id = p.holder_agent_id();
  if (p.has_previous_holder_agent_id()) {
    in.previous_holder_agent_id = p.previous_holder_agent_id();
  }
  if (p.has_activation_id()) in.activation_id = p.activation_id();
  if (p.has_activation_deadline()) {
    in.activation_deadline_ms = Millis(p.activation_deadline());
  }
  if (p.has_holder_lease_expires_at()) {
    in.holder_lease_expires_ms = Millis(p.holder_lease_expires_at());
  }
  if (p.has_charter_version()) in.charter_version = p.charter_version();
  if (p.has_charter_acked_epoch()) {
    in.charter_acked_epoch = p.charter_acked_epoch();
  }
  if (p.has_retry_count()) in.retry_count = p.retry_count();
  if (p.has_next_probe_at()) in.next_probe_ms = Millis(p.next_probe_at());
  if (p.has_blocked_reason()) in.blocked_reason = p.blocked_reason();
  if (p.has_last_transition_at()) {
    in.last_transition_ms = Millis(p.last_transition_at());
  }
  if (p.has_last_reason()) in.last_reason = p.last_reason();
  in.update_mask = Paths(mask);
  return in;
}

ReserveInput ToReserveInput(const hub::v1::ReserveRoleRequest& r) {
  ReserveInput in;
  in.role = ToRoleKeyRef(r.has_role_key(), r.role_key(), r.role_key_wire());
  if (r.has_expected_version()) in.expected_version = r.expected_version();
  if (r.has_expected_epoch()) in.expected_epoch = r.expected_epoch();
  if (r.has_next_epoch()) in.next_epoch = r.next_epoch();
  if (r.has_next_activation_seq()) {
    in.next_activation_seq = r.next_activation_seq();
  }
  in.patch = ToRolePatchInput(r.patch(), r.update_mask());
  return in;
}

absl::StatusOr<CasInput> ToCasInput(
    const hub::v1::CompareAndSetRoleRequest& r) {
  CasInput in;
  in.role = ToRoleKeyRef(r.has_role_key(), r.role_key(), r.role_key_wire());
  if (r.has_expected_version()) in.expected_version = r.expected_version();
  if (r.has_expected_epoch()) in.expected_epoch = r.expected_epoch();
  if (r.has_expected_activation_seq()) {
    in.expected_activation_seq = r.expected_activation_seq();
  }
  const hub::v1::ActivationIdGuard& guard = r.expected_activation_id();
  switch (guard.expected_case()) {
    case hub::v1::ActivationIdGuard::kActivationId:
      if (guard.activation_id().empty() || guard.activation_id().size() > 64) {
        return WithMetadata(
            InvalidArgumentError("INVALID_CAS",
                                 "expected_activation_id.activation_id must "
                                 "have 1..64 characters"),
            "field", "expected_activation_id.activation_id");
      }
      in.expected_activation_id =
          std::optional<std::string>(guard.activation_id());
      break;
    case hub::v1::ActivationIdGuard::kNone:
      if (!guard.none()) {
        return WithMetadata(
            InvalidArgumentError("INVALID_CAS",
                                 "expected_activation_id.none must be true"),
            "field", "expected_activation_id.none");
      }
      in.expected_activation_id = std::optional<std::string>();
      break;
    default:
      break;  // absent: the registry reports INVALID_CAS in its check order
  }
  in.patch = ToRolePatchInput(r.patch(), r.update_mask());
  return in;
}

hub::v1::Role ToRoleProto(const RoleRecord& r) {
  hub::v1::Role out;
  FillRoleKey(r.role_key_wire, out.mutable_role_key());
  out.set_role_key_wire(r.role_key_wire);
  out.set_topic(RoleTopic(r.role_key_wire));
  out.set_state(StateToProto(r.state));
  if (r.holder_agent_id) out.set_holder_agent_id(*r.holder_agent_id);
  if (r.previous_holder_agent_id) {
    out.set_previous_holder_agent_id(*r.previous_holder_agent_id);
  }
  out.set_epoch(r.epoch);
  out.set_activation_seq(r.activation_seq);
  if (r.activation_id) out.set_activation_id(*r.activation_id);
  if (r.activation_deadline_ms) {
    *out.mutable_activation_deadline() = Stamp(*r.activation_deadline_ms);
  }
  if (r.holder_lease_expires_ms) {
    *out.mutable_holder_lease_expires_at() = Stamp(*r.holder_lease_expires_ms);
  }
  if (r.charter_version) out.set_charter_version(*r.charter_version);
  if (r.charter_acked_epoch)
    out.set_charter_acked_epoch(*r.charter_acked_epoch);
  out.set_retry_count(r.retry_count);
  if (r.next_probe_ms) *out.mutable_next_probe_at() = Stamp(*r.next_probe_ms);
  if (r.blocked_reason) out.set_blocked_reason(*r.blocked_reason);
  *out.mutable_last_transition_at() = Stamp(r.last_transition_ms);
  out.set_last_reason(r.last_reason);
  out.set_version(r.version);
  return out;
}

hub::v1::ClosedRoleScope ToClosedScopeProto(const ClosedScopeRecord& c) {
  hub::v1::ClosedRoleScope out;
  out.mutable_role_key()->set_project_id(c.project_id);
  out.mutable_role_key()->set_kind(hub::v1::ROLE_KIND_LEAD);
  out.mutable_role_key()->set_scope_id(c.scope_id);
  out.set_role_key_wire(c.role_key_wire);
  *out.mutable_closed_at() = Stamp(c.closed_at_ms);
  out.set_closed_by(c.closed_by);
  out.set_reason(c.reason);
  if (c.dead_lettered_count) {
    out.set_dead_lettered_count(*c.dead_lettered_count);
  }
  return out;
}

hub::v1::RoleChangeKind ToRoleChangeKindProto(RoleChangeKind kind) {
  switch (kind) {
    case RoleChangeKind::kSnapshot:
      return hub::v1::ROLE_CHANGE_KIND_SNAPSHOT;
    case RoleChangeKind::kCreated:
      return hub::v1::ROLE_CHANGE_KIND_CREATED;
    case RoleChangeKind::kUpdated:
      return hub::v1::ROLE_CHANGE_KIND_UPDATED;
    case RoleChangeKind::kRemoved:
      return hub::v1::ROLE_CHANGE_KIND_REMOVED;
  }
  return hub::v1::ROLE_CHANGE_KIND_UNSPECIFIED;
}

hub::v1::RoleChange ToRoleChangeProto(
    const RoleEvent& event, const std::optional<RoleState>& previous_state) {
  hub::v1::RoleChange change;
  change.set_kind(ToRoleChangeKindProto(event.kind));
  *change.mutable_role() = ToRoleProto(event.role);
  if (previous_state) change.set_previous_state(StateToProto(*previous_state));
  *change.mutable_changed_at() =
      ToProtoTimestamp(absl::FromUnixMillis(event.changed_at_ms));
  return change;
}

CandidatePatchInput ToCandidatePatchInput(
    const hub::v1::RoleCandidatePatch& p,
    const google::protobuf::FieldMask& mask) {
  CandidatePatchInput in;
  if (p.source() != hub::v1::CANDIDATE_SOURCE_UNSPECIFIED) {
    std::string word = WordOf(kSourceWords, p.source());
    in.source = word.empty() ? absl::StrCat("source#", p.source()) : word;
  }
  if (p.has_priority()) in.priority = p.priority();
  if (p.transport_locators_size() > 0) {
    std::vector<std::string> objects;
    for (const hub::v1::TransportLocator& l : p.transport_locators()) {
      objects.push_back(LocatorJson(l));
    }
    in.transport_locator_objects = std::move(objects);
  }
  if (p.has_transport_locators_json()) {
    in.transport_locators_json = p.transport_locators_json();
  }
  if (p.has_consecutive_probe_failures()) {
    in.consecutive_probe_failures = p.consecutive_probe_failures();
  }
  if (p.has_excluded_until()) in.excluded_until_ms = Millis(p.excluded_until());
  if (p.has_last_probe_at()) in.last_probe_ms = Millis(p.last_probe_at());
  if (p.has_last_probe_code()) in.last_probe_code = p.last_probe_code();
  in.update_mask = Paths(mask);
  return in;
}

hub::v1::RoleCandidate ToCandidateProto(const CandidateRecord& c) {
  hub::v1::RoleCandidate out;
  FillRoleKey(c.role_key_wire, out.mutable_role_key());
  out.set_role_key_wire(c.role_key_wire);
  out.set_agent_id(c.agent_id);
  out.set_source(
      static_cast<hub::v1::CandidateSource>(NumberOf(kSourceWords, c.source)));
  out.set_priority(c.priority);
  FillLocators(c.transport_locators_json, &out);
  out.set_transport_locators_json(c.transport_locators_json);
  out.set_consecutive_probe_failures(c.consecutive_probe_failures);
  if (c.excluded_until_ms) {
    *out.mutable_excluded_until() = Stamp(*c.excluded_until_ms);
  }
  if (c.last_probe_ms) *out.mutable_last_probe_at() = Stamp(*c.last_probe_ms);
  if (c.last_probe_code) out.set_last_probe_code(*c.last_probe_code);
  *out.mutable_updated_at() = Stamp(c.updated_at_ms);
  return out;
}

std::string ProbeCodeWord(int code) { return WordOf(kProbeWords, code); }

ActivationAck ToActivationAck(const hub::v1::RoleActivationAck& ack,
                              const std::string& principal) {
  ActivationAck out;
  out.schema = ack.schema();
  out.activation_id = ack.activation_id();
  out.role =
      ToRoleKeyRef(ack.has_role_key(), ack.role_key(), ack.role_key_wire());
  out.epoch = ack.epoch();
  out.activation_seq = ack.activation_seq();
  out.holder_agent_id = ack.holder_agent_id();
  out.reachable = ack.reachable();
  out.has_charter_ack = ack.has_charter_ack();
  if (ack.has_charter_ack()) {
    out.charter_role = ToRoleKeyRef(ack.charter_ack().has_role_key(),
                                    ack.charter_ack().role_key(),
                                    ack.charter_ack().role_key_wire());
    out.charter_epoch = ack.charter_ack().epoch();
    out.charter_version = ack.charter_ack().charter_version();
  }
  out.principal_agent_id = principal;
  return out;
}

hub::v1::EnsureRoleTrigger TriggerProto(const std::string& word) {
  hub::v1::EnsureRoleTrigger trigger = hub::v1::ENSURE_ROLE_TRIGGER_UNSPECIFIED;
  if (word.empty() ||
      !hub::v1::EnsureRoleTrigger_Parse(
          absl::StrCat("ENSURE_ROLE_TRIGGER_", absl::AsciiStrToUpper(word)),
          &trigger)) {
    return hub::v1::ENSURE_ROLE_TRIGGER_UNSPECIFIED;
  }
  return trigger;
}

hub::v1::EnsureRoleReceipt ToReceiptProto(const EnsureReceipt& receipt) {
  hub::v1::EnsureRoleReceipt out;
  const hub::v1::Role role = ToRoleProto(receipt.role);
  out.set_accepted(receipt.accepted);
  out.set_disposition(DispositionProto(receipt.disposition));
  *out.mutable_role_key() = role.role_key();
  out.set_role_key_wire(role.role_key_wire());
  if (!receipt.no_row) out.set_state(role.state());
  out.set_epoch(role.epoch());
  if (receipt.role.activation_id) {
    out.set_activation_id(*receipt.role.activation_id);
  }
  if (receipt.role.holder_agent_id) {
    out.set_holder_agent_id(*receipt.role.holder_agent_id);
  }
  if (receipt.role.activation_deadline_ms) {
    *out.mutable_activation_deadline() = ToProtoTimestamp(
        absl::FromUnixMillis(*receipt.role.activation_deadline_ms));
  }
  if (receipt.role.blocked_reason) {
    out.set_blocked_reason(*receipt.role.blocked_reason);
  }
  out.set_trigger(TriggerProto(receipt.trigger));
  out.set_cause_id(receipt.cause_id);
  return out;
}

hub::v1::EnsureRoleDisposition DispositionProto(EnsureDisposition d) {
  switch (d) {
    case EnsureDisposition::kStarted:
      return hub::v1::ENSURE_ROLE_DISPOSITION_STARTED;
    case EnsureDisposition::kJoined:
      return hub::v1::ENSURE_ROLE_DISPOSITION_JOINED;
    case EnsureDisposition::kAlreadyActive:
      return hub::v1::ENSURE_ROLE_DISPOSITION_ALREADY_ACTIVE;
    case EnsureDisposition::kManagerDisabled:
      return hub::v1::ENSURE_ROLE_DISPOSITION_MANAGER_DISABLED;
    case EnsureDisposition::kScopeClosed:
      return hub::v1::ENSURE_ROLE_DISPOSITION_SCOPE_CLOSED;
    case EnsureDisposition::kNoCandidate:
      return hub::v1::ENSURE_ROLE_DISPOSITION_NO_CANDIDATE;
  }
  return hub::v1::ENSURE_ROLE_DISPOSITION_UNSPECIFIED;
}

}  // namespace hub
