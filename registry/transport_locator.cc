#include "registry/transport_locator.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "registry/role_key.h"
#include "status/status.h"

namespace hub {
namespace {

using nlohmann::json;

constexpr size_t kMaxRefLength = 128;
constexpr size_t kMaxHostIdLength = 128;
constexpr size_t kMaxSessionIdUtf16Units = 256;
constexpr absl::string_view kHostPrefix = "hst_";
constexpr absl::string_view kCapabilities[] = {"probe", "wake", "activate",
                                               "interrupt"};
constexpr absl::string_view kLocatorFields[] = {
    "schema_version", "transport_id",  "kind",     "host_id",
    "capabilities",   "expires_at_ms", "priority", "locator"};

bool IsRefChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' ||
         c == '_' || c == ':' || c == '-';
}

bool IsIdChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' ||
         c == '-';
}

// Length as JavaScript's String.length counts it (UTF-16 code units), so
// limits match triflux for non-ASCII text. Assumes valid UTF-8.
size_t Utf16Length(absl::string_view text) {
  size_t units = 0;
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if ((byte & 0xC0) != 0x80) ++units;  // a lead byte starts a code point
    if (byte >= 0xF0) ++units;           // outside the BMP: a surrogate pair
  }
  return units;
}

// The trimmed logical ref held by `value`, or nullopt.
std::optional<std::string> LogicalRef(const json& value) {
  if (!value.is_string()) return std::nullopt;
  absl::string_view text = value.get_ref<const std::string&>();
  if (!IsLogicalRef(text)) return std::nullopt;
  return std::string(absl::StripAsciiWhitespace(text));
}

// Number.isSafeInteger on a JSON number: integral, |x| <= 2^53 - 1.
std::optional<int64_t> SafeInteger(const json& value) {
  if (value.is_number_unsigned()) {
    const auto n = value.get<uint64_t>();
    if (n > static_cast<uint64_t>(kMaxSafeInteger)) return std::nullopt;
    return static_cast<int64_t>(n);
  }
  if (value.is_number_integer()) {
    const auto n = value.get<int64_t>();
    if (n > kMaxSafeInteger || n < -kMaxSafeInteger) return std::nullopt;
    return n;
  }
  if (value.is_number_float()) {
    const double d = value.get<double>();
    if (!std::isfinite(d) || std::trunc(d) != d) return std::nullopt;
    if (std::fabs(d) > static_cast<double>(kMaxSafeInteger)) {
      return std::nullopt;
    }
    return static_cast<int64_t>(d);
  }
  return std::nullopt;
}

// expires_at_ms if it is a safe integer in (now, now + ttl]: a locator may
// not outlive the lease that keeps its agent registered.
std::optional<int64_t> ExpiryWithinLease(const json& value,
                                         const LocatorContext& context) {
  std::optional<int64_t> expires = SafeInteger(value);
  if (!expires || *expires <= context.now_ms) return std::nullopt;
  // Unsigned difference: exact because expires > now, and cannot overflow.
  const uint64_t ahead =
      static_cast<uint64_t>(*expires) - static_cast<uint64_t>(context.now_ms);
  if (ahead > static_cast<uint64_t>(context.heartbeat_ttl_ms)) {
    return std::nullopt;
  }
  return expires;
}

// Trimmed, known, pairwise distinct capability names, in input order.
std::optional<std::vector<std::string>> Capabilities(const json& value) {
  if (!value.is_array()) return std::nullopt;
  std::vector<std::string> out;
  for (const json& item : value) {
    if (!item.is_string()) return std::nullopt;
    std::string name(
        absl::StripAsciiWhitespace(item.get_ref<const std::string&>()));
    if (std::find(std::begin(kCapabilities), std::end(kCapabilities), name) ==
        std::end(kCapabilities)) {
      return std::nullopt;
    }
    if (std::find(out.begin(), out.end(), name) != out.end()) {
      return std::nullopt;
    }
    out.push_back(std::move(name));
  }
  return out;
}

// Errors name the offending element so a client with several locators can
// tell which one to fix.
absl::Status LocatorError(absl::string_view reason, size_t index,
                          absl::string_view message) {
  return InvalidArgumentError(
      reason, absl::StrCat("transport_locators[", index, "]: ", message));
}

// True iff `object` has only fields from `allowed` and all of `required`.
bool HasFieldSet(const json& object,
                 std::initializer_list<absl::string_view> allowed,
                 std::initializer_list<absl::string_view> required) {
  for (const auto& item : object.items()) {
    if (std::find(allowed.begin(), allowed.end(), item.key()) ==
        allowed.end()) {
      return false;
    }
  }
  for (absl::string_view field : required) {
    if (!object.contains(std::string(field))) return false;
  }
  return true;
}

absl::StatusOr<ClaudeUdsLocator> ParseClaudeUds(const json& value,
                                                size_t index) {
  if (!value.is_object() ||
      !HasFieldSet(value, {"session_id", "short", "bridge_id"},
                   {"bridge_id"})) {
    return LocatorError(
        "TRANSPORT_LOCATOR_INVALID", index,
        "a claude-uds locator has exactly bridge_id and one or both of "
        "session_id, short");
  }
  const bool has_session = value.contains("session_id");
  const bool has_short = value.contains("short");
  if (!has_session && !has_short) {
    return LocatorError("CLAUDE_UDS_SESSION_REQUIRED", index,
                        "a claude-uds locator needs session_id or short");
  }
  ClaudeUdsLocator out;
  if (has_session) {
    out.session_id = LogicalRef(value["session_id"]);
    if (!out.session_id) {
      return LocatorError("CLAUDE_UDS_SESSION_INVALID", index,
                          "locator.session_id must be a logical ref");
    }
  }
  if (has_short) {
    out.short_id = LogicalRef(value["short"]);
    if (!out.short_id) {
      return LocatorError("CLAUDE_UDS_SHORT_INVALID", index,
                          "locator.short must be a logical ref");
    }
  }
  std::optional<std::string> bridge = LogicalRef(value["bridge_id"]);
  if (!bridge) {
    return LocatorError("CLAUDE_UDS_BRIDGE_INVALID", index,
                        "locator.bridge_id must be a logical ref");
  }
  out.bridge_id = std::move(*bridge);
  return out;
}

absl::StatusOr<TmuxLocator> ParseTmux(const json& value, size_t index) {
  if (!value.is_object() ||
      !HasFieldSet(value, {"session_name", "mux_server_id"},
                   {"session_name", "mux_server_id"})) {
    return LocatorError(
        "TRANSPORT_LOCATOR_INVALID", index,
        "a tmux locator has exactly session_name and mux_server_id");
  }
  std::optional<std::string> session = LogicalRef(value["session_name"]);
  if (!session) {
    return LocatorError("TMUX_SESSION_INVALID", index,
                        "locator.session_name must be a logical ref");
  }
  std::optional<std::string> server = LogicalRef(value["mux_server_id"]);
  if (!server) {
    return LocatorError("TMUX_SERVER_INVALID", index,
                        "locator.mux_server_id must be a logical ref");
  }
  return TmuxLocator{std::move(*session), std::move(*server)};
}

// The identity and routing fields of one locator, up to (not including) the
// kind-specific `locator` object. Order as documented in the header.
absl::Status ParseHeader(const json& value, const LocatorContext& context,
                         size_t index, TransportLocator& out) {
  const json& schema = value["schema_version"];
  if (!schema.is_string() ||
      schema.get_ref<const std::string&>() != kTransportLocatorSchemaV1) {
    return LocatorError("TRANSPORT_LOCATOR_SCHEMA_UNSUPPORTED", index,
                        "schema_version must be \"tfx.transport-locator.v1\"");
  }
  out.schema_version = std::string(kTransportLocatorSchemaV1);
  std::optional<std::string> transport_id = LogicalRef(value["transport_id"]);
  if (!transport_id) {
    return LocatorError("TRANSPORT_ID_INVALID", index,
                        "transport_id must be a logical ref: 1-128 of "
                        "[A-Za-z0-9._:-] after trimming");
  }
  out.transport_id = std::move(*transport_id);
  const json& kind = value["kind"];
  if (!kind.is_string() ||
      (kind.get_ref<const std::string&>() != kKindClaudeUds &&
       kind.get_ref<const std::string&>() != kKindTmux)) {
    return LocatorError("TRANSPORT_KIND_UNSUPPORTED", index,
                        "kind must be \"claude-uds\" or \"tmux\"");
  }
  out.kind = kind.get<std::string>();
  if (context.cli == "codex" && out.kind != kKindTmux) {
    return LocatorError("CODEX_TRANSPORT_UNSUPPORTED", index,
                        "a codex agent can only register tmux locators");
  }
  const json& host = value["host_id"];
  if (!host.is_string() || !IsHostId(host.get_ref<const std::string&>()) ||
      (context.host_id && *context.host_id != host.get<std::string>())) {
    return LocatorError("HOST_ID_INVALID", index,
                        "host_id must match ^hst_[A-Za-z0-9_-]+$ (at most 128 "
                        "bytes) and equal the registration host_id");
  }
  out.host_id = host.get<std::string>();
  std::optional<std::vector<std::string>> capabilities =
      Capabilities(value["capabilities"]);
  if (!capabilities) {
    return LocatorError("TRANSPORT_CAPABILITIES_INVALID", index,
                        "capabilities must be an array of distinct values "
                        "from probe, wake, activate, interrupt");
  }
  out.capabilities = std::move(*capabilities);
  std::optional<int64_t> priority = SafeInteger(value["priority"]);
  if (!priority) {
    return LocatorError("TRANSPORT_PRIORITY_INVALID", index,
                        "priority must be an integer within +-(2^53-1)");
  }
  out.priority = *priority;
  std::optional<int64_t> expires =
      ExpiryWithinLease(value["expires_at_ms"], context);
  if (!expires) {
    return LocatorError(
        "TRANSPORT_EXPIRY_INVALID", index,
        absl::StrCat("expires_at_ms must be an integer in (", context.now_ms,
                     ", now + ", context.heartbeat_ttl_ms, "]"));
  }
  out.expires_at_ms = *expires;
  return absl::OkStatus();
}

absl::StatusOr<TransportLocator> NormalizeOne(const json& value,
                                              const LocatorContext& context,
                                              size_t index) {
  bool exact = value.is_object() && value.size() == std::size(kLocatorFields);
  for (absl::string_view field : kLocatorFields) {
    exact = exact && value.contains(std::string(field));
  }
  if (!exact) {
    return LocatorError(
        "TRANSPORT_LOCATOR_INVALID", index,
        "a locator is an object with exactly schema_version, transport_id, "
        "kind, host_id, capabilities, priority, expires_at_ms, locator");
  }
  TransportLocator out;
  if (absl::Status status = ParseHeader(value, context, index, out);
      !status.ok()) {
    return status;
  }
  if (out.kind == kKindClaudeUds) {
    absl::StatusOr<ClaudeUdsLocator> uds =
        ParseClaudeUds(value["locator"], index);
    if (!uds.ok()) return uds.status();
    out.locator = std::move(*uds);
  } else {
    absl::StatusOr<TmuxLocator> tmux = ParseTmux(value["locator"], index);
    if (!tmux.ok()) return tmux.status();
    out.locator = std::move(*tmux);
  }
  return out;
}

}  // namespace

bool IsLogicalRef(absl::string_view text) {
  absl::string_view trimmed = absl::StripAsciiWhitespace(text);
  if (trimmed.empty() || trimmed.size() > kMaxRefLength) return false;
  return std::all_of(trimmed.begin(), trimmed.end(), IsRefChar);
}

bool IsHostId(absl::string_view text) {
  if (text.size() > kMaxHostIdLength || text.size() <= kHostPrefix.size() ||
      !absl::StartsWith(text, kHostPrefix)) {
    return false;
  }
  text.remove_prefix(kHostPrefix.size());
  return std::all_of(text.begin(), text.end(), IsIdChar);
}

absl::StatusOr<std::vector<TransportLocator>> NormalizeTransportLocators(
    const json& value, const LocatorContext& context) {
  if (!value.is_array()) {
    return InvalidArgumentError("TRANSPORT_LOCATORS_INVALID",
                                "transport_locators must be a JSON array");
  }
  if (!value.empty() && context.heartbeat_ttl_ms <= 0) {
    return InvalidArgumentError(
        "HEARTBEAT_TTL_INVALID",
        "heartbeat_ttl_ms must be positive when locators are registered");
  }
  std::vector<TransportLocator> out;
  out.reserve(value.size());
  std::set<std::string> transport_ids;
  for (size_t i = 0; i < value.size(); ++i) {
    absl::StatusOr<TransportLocator> locator =
        NormalizeOne(value[i], context, i);
    if (!locator.ok()) return locator.status();
    if (!transport_ids.insert(locator->transport_id).second) {
      return LocatorError("TRANSPORT_ID_INVALID", i,
                          absl::StrCat("transport_id \"", locator->transport_id,
                                       "\" is registered twice"));
    }
    out.push_back(std::move(*locator));
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const TransportLocator& a, const TransportLocator& b) {
                     if (a.priority != b.priority) {
                       return a.priority > b.priority;
                     }
                     return a.transport_id < b.transport_id;
                   });
  std::optional<std::string> host = ResolvedHostId(context.host_id, out);
  for (const TransportLocator& locator : out) {
    if (locator.host_id != *host) {
      return InvalidArgumentError(
          "HOST_ID_INVALID",
          absl::StrCat("all transport locators must share host_id \"", *host,
                       "\"; transport \"", locator.transport_id, "\" has \"",
                       locator.host_id, "\""));
    }
  }
  return out;
}

absl::StatusOr<std::vector<TransportLocator>> ParseTransportLocatorsJson(
    absl::string_view text, const LocatorContext& context) {
  json value = json::parse(text.begin(), text.end(), /*cb=*/nullptr,
                           /*allow_exceptions=*/false);
  if (value.is_discarded()) {
    return InvalidArgumentError("TRANSPORT_LOCATORS_JSON_INVALID",
                                "transport_locators_json is not valid JSON");
  }
  return NormalizeTransportLocators(value, context);
}

std::optional<std::string> ResolvedHostId(
    const std::optional<std::string>& explicit_host_id,
    const std::vector<TransportLocator>& sorted_locators) {
  if (explicit_host_id) return explicit_host_id;
  if (sorted_locators.empty()) return std::nullopt;
  return sorted_locators.front().host_id;
}

nlohmann::ordered_json TransportLocatorToJson(const TransportLocator& locator) {
  nlohmann::ordered_json out;
  out["schema_version"] = locator.schema_version;
  out["transport_id"] = locator.transport_id;
  out["kind"] = locator.kind;
  out["host_id"] = locator.host_id;
  out["capabilities"] = locator.capabilities;
  out["priority"] = locator.priority;
  out["expires_at_ms"] = locator.expires_at_ms;
  nlohmann::ordered_json fields = nlohmann::ordered_json::object();
  if (const auto* uds = std::get_if<ClaudeUdsLocator>(&locator.locator)) {
    if (uds->session_id) fields["session_id"] = *uds->session_id;
    if (uds->short_id) fields["short"] = *uds->short_id;
    fields["bridge_id"] = uds->bridge_id;
  } else {
    const auto& tmux = std::get<TmuxLocator>(locator.locator);
    fields["session_name"] = tmux.session_name;
    fields["mux_server_id"] = tmux.mux_server_id;
  }
  out["locator"] = std::move(fields);
  return out;
}

std::string TransportLocatorsToJson(
    const std::vector<TransportLocator>& locators) {
  nlohmann::ordered_json array = nlohmann::ordered_json::array();
  for (const TransportLocator& locator : locators) {
    array.push_back(TransportLocatorToJson(locator));
  }
  return array.dump();
}

namespace {

absl::StatusOr<std::vector<TransportLocator>> IdentityLocators(
    const IdentityInput& input) {
  LocatorContext context{input.cli, input.host_id, input.now_ms,
                         input.heartbeat_ttl_ms};
  if (input.transport_locators_json) {
    return ParseTransportLocatorsJson(*input.transport_locators_json, context);
  }
  const json& value = *input.transport_locators;
  // triflux accepts the JSON text itself in place of the parsed array.
  if (value.is_string()) {
    return ParseTransportLocatorsJson(value.get_ref<const std::string&>(),
                                      context);
  }
  return NormalizeTransportLocators(value, context);
}

}  // namespace

absl::StatusOr<RegistrationIdentity> NormalizeRegistrationIdentity(
    const IdentityInput& input) {
  RegistrationIdentity out;
  const bool has_locators =
      input.transport_locators_json || input.transport_locators;
  out.supplied =
      input.project_id || input.session_id || input.host_id || has_locators;
  if (!out.supplied) return out;

  if (input.project_id) {
    if (!IsProjectId(*input.project_id)) {
      return InvalidArgumentError(
          "PROJECT_ID_INVALID",
          "project_id must match ^prj_[A-Za-z0-9_-]{22}$");
    }
    out.project_id = input.project_id;
  }
  if (input.session_id) {
    absl::string_view trimmed = absl::StripAsciiWhitespace(*input.session_id);
    if (Utf16Length(*input.session_id) > kMaxSessionIdUtf16Units ||
        trimmed.empty()) {
      return InvalidArgumentError(
          "SESSION_ID_INVALID",
          "session_id must be non-empty after trimming and at most 256 "
          "characters");
    }
    out.session_id = std::string(trimmed);
  }
  if (input.host_id && !IsHostId(*input.host_id)) {
    return InvalidArgumentError(
        "HOST_ID_INVALID",
        "host_id must match ^hst_[A-Za-z0-9_-]+$ and be at most 128 bytes");
  }
  std::vector<TransportLocator> locators;
  if (has_locators) {
    if (input.transport_locators_json && input.transport_locators) {
      return InvalidArgumentError(
          "TRANSPORT_LOCATORS_INVALID",
          "give transport_locators_json or transport_locators, not both");
    }
    absl::StatusOr<std::vector<TransportLocator>> parsed =
        IdentityLocators(input);
    if (!parsed.ok()) return parsed.status();
    locators = std::move(*parsed);
  }
  out.host_id = ResolvedHostId(input.host_id, locators);
  if (has_locators) out.locators = std::move(locators);
  return out;
}

}  // namespace hub
