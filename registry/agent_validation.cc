#include "registry/agent_validation.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "registry/role_key.h"
#include "registry/transport_locator.h"
#include "status/status.h"

namespace hub {
namespace {

bool IsIdChar(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
         (c >= '0' && c <= '9') || c == '.' || c == '_' || c == ':' || c == '-';
}

bool AllIdChars(absl::string_view s) {
  return std::all_of(s.begin(), s.end(), IsIdChar);
}

absl::Status LimitExceeded(absl::string_view limit, int64_t value,
                           absl::string_view what) {
  return WithMetadata(
      LimitExceededError(limit, value,
                         absl::StrCat(what, " exceeds the limit of ", value)),
      "field", what);
}

absl::Status FieldError(absl::Status s, absl::string_view field) {
  return WithMetadata(std::move(s), "field", field);
}

// Deduplicates, keeping first occurrences in order.
std::vector<std::string> Dedupe(const std::vector<std::string>& values) {
  std::vector<std::string> out;
  absl::flat_hash_set<std::string> seen;
  for (const std::string& v : values) {
    if (seen.insert(v).second) out.push_back(v);
  }
  return out;
}

std::string JsonArray(const std::vector<std::string>& values) {
  return nlohmann::json(values).dump(-1, ' ', false,
                                     nlohmann::json::error_handler_t::replace);
}

}  // namespace

absl::Status ValidateAgentId(absl::string_view agent_id) {
  if (agent_id.size() < 3 || agent_id.size() > 64 || !AllIdChars(agent_id) ||
      absl::StartsWith(agent_id, "topic:")) {
    return FieldError(
        InvalidArgumentError(
            "AGENT_ID_INVALID",
            absl::StrCat("agent_id must match ^[A-Za-z0-9._:-]{3,64}$ and not "
                         "start with \"topic:\", got \"",
                         ErrorText(agent_id, 80), "\"")),
        "agent_id");
  }
  return absl::OkStatus();
}

absl::Status ValidateTtl(absl::Duration ttl, const PresenceConfig& config) {
  if (ttl < config.min_ttl || ttl > config.max_ttl) {
    return InvalidArgumentError(
        "HEARTBEAT_TTL_INVALID",
        absl::StrCat("heartbeat TTL must be within ",
                     absl::FormatDuration(config.min_ttl), " .. ",
                     absl::FormatDuration(config.max_ttl), ", got ",
                     absl::FormatDuration(ttl)));
  }
  return absl::OkStatus();
}

absl::Status ValidateTopic(absl::string_view topic) {
  if (topic.empty() || topic.size() > 128 || !AllIdChars(topic) ||
      absl::StartsWith(topic, "role:")) {
    return InvalidArgumentError(
        "TOPIC_INVALID",
        absl::StrCat("topic must match ^[A-Za-z0-9._:-]{1,128}$ and not start "
                     "with \"role:\", got \"",
                     ErrorText(topic, 80), "\""));
  }
  return absl::OkStatus();
}

absl::Status ValidateCli(absl::string_view cli) {
  if (cli != "codex" && cli != "gemini" && cli != "claude" && cli != "other") {
    return FieldError(
        InvalidArgumentError("AGENT_CLI_INVALID",
                             "cli must be one of codex, gemini, claude, other"),
        "cli");
  }
  return absl::OkStatus();
}

absl::StatusOr<storage::AgentRegistration> BuildRegistration(
    const RegisterInput& input, const PresenceConfig& config, int64_t now_ms) {
  if (absl::Status s = ValidateAgentId(input.agent_id); !s.ok()) return s;
  if (absl::Status s = ValidateCli(input.cli); !s.ok()) return s;
  if (input.pid.has_value() && (*input.pid < 1 || *input.pid > 0x7fffffff)) {
    return FieldError(InvalidArgumentError("REQUEST_INVALID",
                                           "pid must be within 1 .. 2^31-1"),
                      "pid");
  }
  const absl::Duration ttl = absl::Milliseconds(
      absl::ToInt64Milliseconds(input.ttl.value_or(config.default_ttl)));
  if (absl::Status s = ValidateTtl(ttl, config); !s.ok()) {
    return FieldError(std::move(s), "heartbeat_ttl");
  }
  if (input.capabilities.size() >
      static_cast<size_t>(config.max_capabilities_per_agent)) {
    return LimitExceeded("max_capabilities_per_agent",
                         config.max_capabilities_per_agent, "capabilities");
  }
  for (const std::string& c : input.capabilities) {
    const bool control = std::any_of(c.begin(), c.end(), [](char ch) {
      return static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f;
    });
    if (c.empty() || c.size() > 128 || control) {
      return FieldError(
          InvalidArgumentError("REQUEST_INVALID",
                               "each capability must be 1..128 characters "
                               "without control characters"),
          "capabilities");
    }
  }
  if (input.topics.size() > static_cast<size_t>(config.max_topics_per_agent)) {
    return LimitExceeded("max_topics_per_agent", config.max_topics_per_agent,
                         "topics");
  }
  for (const std::string& t : input.topics) {
    if (absl::Status s = ValidateTopic(t); !s.ok()) {
      return FieldError(std::move(s), "topics");
    }
  }
  if (input.metadata_json.size() > config.max_metadata_bytes) {
    return LimitExceeded("max_metadata_bytes", config.max_metadata_bytes,
                         "metadata");
  }
  if (input.transport_locator_objects.has_value() &&
      input.transport_locator_objects->size() >
          static_cast<size_t>(config.max_locators_per_agent)) {
    return LimitExceeded("max_locators_per_agent",
                         config.max_locators_per_agent, "transport_locators");
  }

  // Identity: a present empty string clears a field and is not validated.
  IdentityInput id;
  id.cli = input.cli;
  id.heartbeat_ttl_ms = absl::ToInt64Milliseconds(ttl);
  id.now_ms = now_ms;
  auto given = [](const std::optional<std::string>& v) {
    return v.has_value() && !v->empty() ? v : std::nullopt;
  };
  id.project_id = given(input.project_id);
  id.session_id = given(input.session_id);
  id.host_id = given(input.host_id);
  id.transport_locators_json = input.transport_locators_json;
  if (input.transport_locator_objects.has_value() &&
      !input.transport_locator_objects->empty()) {
    nlohmann::json array = nlohmann::json::array();
    for (const std::string& object : *input.transport_locator_objects) {
      array.push_back(nlohmann::json::parse(object, nullptr, false));
    }
    id.transport_locators = std::move(array);
  }
  absl::StatusOr<RegistrationIdentity> identity =
      NormalizeRegistrationIdentity(id);
  if (!identity.ok()) return identity.status();
  if (identity->locators.has_value() &&
      identity->locators->size() >
          static_cast<size_t>(config.max_locators_per_agent)) {
    return LimitExceeded("max_locators_per_agent",
                         config.max_locators_per_agent,
                         "transport_locators_json");
  }

  storage::AgentRegistration r;
  r.agent_id = input.agent_id;
  r.cli = input.cli;
  r.pid = input.pid;
  r.capabilities_json = JsonArray(Dedupe(input.capabilities));
  r.topics_json = JsonArray(Dedupe(input.topics));
  r.metadata_json = input.metadata_json.empty() ? "{}" : input.metadata_json;
  r.now_ms = now_ms;
  r.lease_ttl_ms = absl::ToInt64Milliseconds(ttl);
  auto patch = [](const std::optional<std::string>& requested,
                  const std::optional<std::string>& normalized) {
    if (normalized.has_value()) return storage::Patch<std::string>(*normalized);
    if (requested.has_value() && requested->empty()) {
      return storage::Patch<std::string>::Clear();
    }
    return storage::Patch<std::string>();
  };
  r.project_id = patch(input.project_id, identity->project_id);
  r.session_id = patch(input.session_id, identity->session_id);
  r.host_id = patch(input.host_id, identity->host_id);
  if (identity->locators.has_value()) {
    r.transport_locators_json = TransportLocatorsToJson(*identity->locators);
  }
  r.owner = input.owner;
  return r;
}

bool TopicsJsonContains(absl::string_view topics_json,
                        absl::string_view topic) {
  nlohmann::json topics = nlohmann::json::parse(topics_json, nullptr, false);
  if (!topics.is_array()) return false;
  for (const auto& t : topics) {
    if (t.is_string() && t.get_ref<const std::string&>() == topic) return true;
  }
  return false;
}

std::vector<std::string> TopicsFromJson(absl::string_view topics_json) {
  std::vector<std::string> out;
  nlohmann::json topics = nlohmann::json::parse(topics_json, nullptr, false);
  if (!topics.is_array()) return out;
  for (const auto& t : topics) {
    if (t.is_string()) out.push_back(t.get<std::string>());
  }
  return out;
}

std::string EncodeAgentPageToken(absl::string_view last_agent_id) {
  return Base64UrlEncode(absl::StrCat("agents:", last_agent_id));
}

absl::StatusOr<std::string> DecodeAgentPageToken(absl::string_view token) {
  if (token.empty()) return std::string();
  std::optional<std::string> raw = Base64UrlDecodeStrict(token);
  if (!raw.has_value() || !absl::StartsWith(*raw, "agents:") ||
      !ValidateAgentId(raw->substr(7)).ok()) {
    return FieldError(InvalidArgumentError(
                          "PAGE_TOKEN_INVALID",
                          "page_token is not a token from a ListAgents reply"),
                      "page_token");
  }
  return raw->substr(7);
}

}  // namespace hub
