#include "hub/services/presence_mapping.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "hub/services/proto_time.h"
#include "hub/services/struct_json.h"
#include "nlohmann/json.hpp"
#include "registry/clock.h"
#include "status/status.h"

namespace hub {
namespace {

using nlohmann::ordered_json;

std::string KindName(hub::v1::TransportKind kind) {
  switch (kind) {
    case hub::v1::TRANSPORT_KIND_CLAUDE_UDS:
      return "claude-uds";
    case hub::v1::TRANSPORT_KIND_TMUX:
      return "tmux";
    default:
      return "";  // rejected as TRANSPORT_KIND_UNSUPPORTED
  }
}

std::string CapabilityName(int capability) {
  switch (capability) {
    case hub::v1::TRANSPORT_CAPABILITY_PROBE:
      return "probe";
    case hub::v1::TRANSPORT_CAPABILITY_WAKE:
      return "wake";
    case hub::v1::TRANSPORT_CAPABILITY_ACTIVATE:
      return "activate";
    case hub::v1::TRANSPORT_CAPABILITY_INTERRUPT:
      return "interrupt";
    default:
      return "";  // rejected as TRANSPORT_CAPABILITIES_INVALID
  }
}

// The triflux JSON object of a structured locator, field for field.
std::string LocatorObject(const hub::v1::TransportLocator& l) {
  ordered_json o;
  o["schema_version"] = l.schema_version();
  o["transport_id"] = l.transport_id();
  o["kind"] = KindName(l.kind());
  o["host_id"] = l.host_id();
  ordered_json caps = ordered_json::array();
  for (int c : l.capabilities()) caps.push_back(CapabilityName(c));
  o["capabilities"] = caps;
  o["priority"] = l.priority();
  o["expires_at_ms"] = UnixMillis(FromProtoTimestamp(l.expires_at()));
  ordered_json locator = ordered_json::object();
  if (l.has_claude_uds()) {
    if (l.claude_uds().has_session_id()) {
      locator["session_id"] = l.claude_uds().session_id();
    }
    if (l.claude_uds().has_short_()) locator["short"] = l.claude_uds().short_();
    locator["bridge_id"] = l.claude_uds().bridge_id();
  } else if (l.has_tmux()) {
    locator["session_name"] = l.tmux().session_name();
    locator["mux_server_id"] = l.tmux().mux_server_id();
  }
  o["locator"] = locator;
  return o.dump();
}

hub::v1::AgentCli CliFromName(const std::string& cli) {
  if (cli == "codex") return hub::v1::AGENT_CLI_CODEX;
  if (cli == "gemini") return hub::v1::AGENT_CLI_GEMINI;
  if (cli == "claude") return hub::v1::AGENT_CLI_CLAUDE;
  return hub::v1::AGENT_CLI_OTHER;
}

std::vector<std::string> StringArray(const std::string& json_text) {
  std::vector<std::string> out;
  nlohmann::json value = nlohmann::json::parse(json_text, nullptr, false);
  if (!value.is_array()) return out;
  for (const auto& v : value) {
    if (v.is_string()) out.push_back(v.get<std::string>());
  }
  return out;
}

// Structured locators from the stored JSON. Rows written by triflux are
// returned as well as they parse; the JSON text is always returned verbatim.
void FillLocators(const std::string& json_text, hub::v1::Agent* agent) {
  nlohmann::json value = nlohmann::json::parse(json_text, nullptr, false);
  if (!value.is_array()) return;
  for (const auto& v : value) {
    if (!v.is_object()) continue;
    hub::v1::TransportLocator* l = agent->add_transport_locators();
    l->set_schema_version(v.value("schema_version", ""));
    l->set_transport_id(v.value("transport_id", ""));
    const std::string kind = v.value("kind", "");
    l->set_kind(kind == "claude-uds" ? hub::v1::TRANSPORT_KIND_CLAUDE_UDS
                : kind == "tmux"     ? hub::v1::TRANSPORT_KIND_TMUX
                                     : hub::v1::TRANSPORT_KIND_UNSPECIFIED);
    l->set_host_id(v.value("host_id", ""));
    if (v.contains("capabilities") && v["capabilities"].is_array()) {
      for (const auto& c : v["capabilities"]) {
        if (!c.is_string()) continue;
        const std::string name = c.get<std::string>();
        if (name == "probe")
          l->add_capabilities(hub::v1::TRANSPORT_CAPABILITY_PROBE);
        if (name == "wake")
          l->add_capabilities(hub::v1::TRANSPORT_CAPABILITY_WAKE);
        if (name == "activate") {
          l->add_capabilities(hub::v1::TRANSPORT_CAPABILITY_ACTIVATE);
        }
        if (name == "interrupt") {
          l->add_capabilities(hub::v1::TRANSPORT_CAPABILITY_INTERRUPT);
        }
      }
    }
    if (v.contains("priority") && v["priority"].is_number_integer()) {
      l->set_priority(v["priority"].get<int64_t>());
    }
    if (v.contains("expires_at_ms") && v["expires_at_ms"].is_number_integer()) {
      *l->mutable_expires_at() = ToProtoTimestamp(
          absl::FromUnixMillis(v["expires_at_ms"].get<int64_t>()));
    }
    const nlohmann::json locator =
        v.contains("locator") && v["locator"].is_object()
            ? v["locator"]
            : nlohmann::json::object();
    if (kind == "claude-uds") {
      auto* uds = l->mutable_claude_uds();
      if (locator.contains("session_id") && locator["session_id"].is_string()) {
        uds->set_session_id(locator["session_id"].get<std::string>());
      }
      if (locator.contains("short") && locator["short"].is_string()) {
        uds->set_short_(locator["short"].get<std::string>());
      }
      uds->set_bridge_id(locator.value("bridge_id", ""));
    } else if (kind == "tmux") {
      l->mutable_tmux()->set_session_name(locator.value("session_name", ""));
      l->mutable_tmux()->set_mux_server_id(locator.value("mux_server_id", ""));
    }
  }
}

}  // namespace

std::string CliName(hub::v1::AgentCli cli) {
  switch (cli) {
    case hub::v1::AGENT_CLI_CODEX:
      return "codex";
    case hub::v1::AGENT_CLI_GEMINI:
      return "gemini";
    case hub::v1::AGENT_CLI_CLAUDE:
      return "claude";
    case hub::v1::AGENT_CLI_OTHER:
      return "other";
    default:
      return "";
  }
}

std::optional<AgentStatus> StatusFromProto(hub::v1::AgentStatus status) {
  switch (status) {
    case hub::v1::AGENT_STATUS_ONLINE:
      return AgentStatus::kOnline;
    case hub::v1::AGENT_STATUS_STALE:
      return AgentStatus::kStale;
    case hub::v1::AGENT_STATUS_OFFLINE:
      return AgentStatus::kOffline;
    default:
      return std::nullopt;
  }
}

hub::v1::AgentStatus StatusToProto(AgentStatus status) {
  switch (status) {
    case AgentStatus::kOnline:
      return hub::v1::AGENT_STATUS_ONLINE;
    case AgentStatus::kStale:
      return hub::v1::AGENT_STATUS_STALE;
    case AgentStatus::kOffline:
      return hub::v1::AGENT_STATUS_OFFLINE;
  }
  return hub::v1::AGENT_STATUS_OFFLINE;  // Unreachable for a valid value.
}

absl::StatusOr<RegisterInput> ToRegisterInput(
    const hub::v1::RegisterAgentRequest& request) {
  RegisterInput in;
  in.agent_id = request.agent_id();
  in.cli = CliName(request.cli());
  if (request.has_pid()) in.pid = request.pid();
  in.capabilities.assign(request.capabilities().begin(),
                         request.capabilities().end());
  in.topics.assign(request.topics().begin(), request.topics().end());
  if (request.has_metadata()) {
    absl::StatusOr<std::string> json = StructToJson(request.metadata());
    if (!json.ok()) {
      return WithMetadata(
          InvalidArgumentError(
              "REQUEST_INVALID",
              absl::StrCat("metadata is not representable as JSON: ",
                           json.status().message())),
          "field", "metadata");
    }
    in.metadata_json = std::move(*json);
  }
  if (request.has_heartbeat_ttl()) {
    if (absl::Status s =
            CheckProtoDuration(request.heartbeat_ttl(), "heartbeat_ttl");
        !s.ok()) {
      return s;
    }
    in.ttl = FromProtoDuration(request.heartbeat_ttl());
  }
  if (request.has_project_id()) in.project_id = request.project_id();
  if (request.has_session_id()) in.session_id = request.session_id();
  if (request.has_host_id()) in.host_id = request.host_id();
  if (request.has_transport_locators_json()) {
    in.transport_locators_json = request.transport_locators_json();
  }
  if (request.transport_locators_size() > 0) {
    std::vector<std::string> objects;
    for (const auto& l : request.transport_locators()) {
      objects.push_back(LocatorObject(l));
    }
    in.transport_locator_objects = std::move(objects);
  }
  if (request.has_hub_instance_id()) {
    in.fence.hub_instance_id = request.hub_instance_id();
  }
  if (request.has_store_fingerprint()) {
    in.fence.store_fingerprint = request.store_fingerprint();
  }
  return in;
}

hub::v1::Agent ToAgentProto(const AgentView& view, absl::Time now) {
  const AgentRecord& r = view.record;
  hub::v1::Agent a;
  a.set_agent_id(r.agent_id);
  a.set_cli(CliFromName(r.cli));
  if (r.pid.has_value()) a.set_pid(*r.pid);
  for (const std::string& c : StringArray(r.capabilities_json)) {
    a.add_capabilities(c);
  }
  for (const std::string& t : StringArray(r.topics_json)) a.add_topics(t);
  absl::StatusOr<google::protobuf::Struct> metadata =
      JsonToStruct(r.metadata_json);
  // A non-object row from triflux: metadata stays {}.
  if (metadata.ok()) a.mutable_metadata()->Swap(&*metadata);
  a.mutable_metadata();
  a.set_status(StatusToProto(r.status));
  *a.mutable_last_seen_at() =
      ToProtoTimestamp(absl::FromUnixMillis(r.last_seen_ms));
  *a.mutable_lease_expires_at() =
      ToProtoTimestamp(absl::FromUnixMillis(r.lease_expires_ms));
  *a.mutable_heartbeat_ttl() = ToProtoDuration(view.ttl);
  a.set_presence_generation(r.presence_generation);
  if (r.project_id.has_value()) a.set_project_id(*r.project_id);
  if (r.session_id.has_value()) a.set_session_id(*r.session_id);
  if (r.host_id.has_value()) a.set_host_id(*r.host_id);
  FillLocators(r.transport_locators_json, &a);
  a.set_transport_locators_json(r.transport_locators_json);
  a.set_live(r.status == AgentStatus::kOnline &&
             r.lease_expires_ms > UnixMillis(now));
  a.set_stream_attached(view.stream_attached);
  return a;
}

}  // namespace hub
