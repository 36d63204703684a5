#include "registry/role_key.h"

#include <cstdint>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "status/status.h"

namespace hub {
namespace {

constexpr absl::string_view kProjectPrefix = "prj_";
constexpr absl::string_view kScopePrefix = "scp_";
constexpr size_t kIdBodyLength = 22;

constexpr char kBase64UrlAlphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

bool IsBase64UrlChar(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
         (c >= '0' && c <= '9') || c == '-' || c == '_';
}

// Value of a base64url character, or -1.
int Base64UrlValue(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '-') return 62;
  if (c == '_') return 63;
  return -1;
}

bool IsPrefixedId(absl::string_view id, absl::string_view prefix) {
  if (id.size() != prefix.size() + kIdBodyLength) return false;
  if (!absl::StartsWith(id, prefix)) return false;
  for (char c : id.substr(prefix.size())) {
    if (!IsBase64UrlChar(c)) return false;
  }
  return true;
}

absl::Status ProjectIdInvalid() {
  return InvalidArgumentError(
      "PROJECT_ID_INVALID",
      "project_id must be a string matching ^prj_[A-Za-z0-9_-]{22}$");
}

absl::Status RoleKindUnsupported() {
  return InvalidArgumentError("ROLE_KIND_UNSUPPORTED",
                              "role_kind must be \"cto\" or \"lead\"");
}

absl::Status ScopeForbidden() {
  return InvalidArgumentError("ROLE_SCOPE_FORBIDDEN",
                              "a cto role key must not carry a scope_id");
}

absl::Status ScopeRequired() {
  return InvalidArgumentError("SCOPE_REQUIRED",
                              "a lead role key requires a string scope_id");
}

absl::Status ScopeIdInvalid() {
  return InvalidArgumentError("SCOPE_ID_INVALID",
                              "scope_id must match ^scp_[A-Za-z0-9_-]{22}$");
}

absl::Status NonCanonical(absl::string_view why) {
  return InvalidArgumentError(
      "ROLE_KEY_NON_CANONICAL",
      absl::StrCat("role key wire is not canonical rk2: ", why));
}

std::optional<RoleKind> ParseRoleKind(absl::string_view name) {
  if (name == "cto") return RoleKind::kCto;
  if (name == "lead") return RoleKind::kLead;
  return std::nullopt;
}

// The scope rules shared by both normalizers, once the kind is known.
// `scope` is nullptr when no scope_id was given and "" is a present value.
absl::StatusOr<RoleKey> FinishRoleKey(std::string project_id, RoleKind kind,
                                      bool has_scope,
                                      const std::string* scope) {
  RoleKey key;
  key.project_id = std::move(project_id);
  key.kind = kind;
  if (kind == RoleKind::kCto) {
    if (has_scope) return ScopeForbidden();
    return key;
  }
  if (scope == nullptr) return ScopeRequired();
  if (!IsScopeId(*scope)) return ScopeIdInvalid();
  key.scope_id = *scope;
  return key;
}

// The canonical JSON of a validated key. Ids are [A-Za-z0-9_-] only, so
// plain concatenation equals JSON.stringify's escaping.
std::string CanonicalJson(const RoleKey& key) {
  if (key.kind == RoleKind::kLead) {
    return absl::StrCat("{\"project_id\":\"", key.project_id,
                        "\",\"role_kind\":\"lead\",\"scope_id\":\"",
                        key.scope_id, "\"}");
  }
  return absl::StrCat("{\"project_id\":\"", key.project_id,
                      "\",\"role_kind\":\"cto\"}");
}

}  // namespace

absl::string_view RoleKindName(RoleKind kind) {
  return kind == RoleKind::kLead ? "lead" : "cto";
}

bool operator==(const RoleKey& a, const RoleKey& b) {
  return a.project_id == b.project_id && a.kind == b.kind &&
         a.scope_id == b.scope_id;
}

bool operator!=(const RoleKey& a, const RoleKey& b) { return !(a == b); }

bool IsProjectId(absl::string_view id) {
  return IsPrefixedId(id, kProjectPrefix);
}

bool IsScopeId(absl::string_view id) { return IsPrefixedId(id, kScopePrefix); }

absl::StatusOr<RoleKey> NormalizeRoleKey(const RoleKeyInput& input) {
  if (!IsProjectId(input.project_id)) return ProjectIdInvalid();
  std::optional<RoleKind> kind = ParseRoleKind(input.role_kind);
  if (!kind.has_value()) return RoleKindUnsupported();
  const std::string* scope =
      input.scope_id.has_value() ? &*input.scope_id : nullptr;
  return FinishRoleKey(input.project_id, *kind, input.scope_id.has_value(),
                       scope);
}

absl::StatusOr<RoleKey> NormalizeRoleKeyJson(const nlohmann::json& value) {
  if (!value.is_object()) {
    return InvalidArgumentError("ROLE_KEY_INVALID",
                                "a role key must be a JSON object");
  }
  for (const auto& item : value.items()) {
    const std::string& field = item.key();
    if (field != "project_id" && field != "role_kind" && field != "scope_id") {
      return InvalidArgumentError(
          "ROLE_KEY_FIELD_UNSUPPORTED",
          absl::StrCat("unsupported role key field \"", field,
                       "\"; allowed: project_id, role_kind, scope_id"));
    }
  }
  auto project = value.find("project_id");
  if (project == value.end() || !project->is_string() ||
      !IsProjectId(project->get_ref<const std::string&>())) {
    return ProjectIdInvalid();
  }
  auto role_kind = value.find("role_kind");
  std::optional<RoleKind> kind;
  if (role_kind != value.end() && role_kind->is_string()) {
    kind = ParseRoleKind(role_kind->get_ref<const std::string&>());
  }
  if (!kind.has_value()) return RoleKindUnsupported();

  auto scope = value.find("scope_id");
  const bool has_scope = scope != value.end();
  // A lead's non-string scope_id counts as missing (SCOPE_REQUIRED).
  const std::string* scope_text = has_scope && scope->is_string()
                                      ? &scope->get_ref<const std::string&>()
                                      : nullptr;
  return FinishRoleKey(project->get<std::string>(), *kind, has_scope,
                       scope_text);
}

absl::StatusOr<std::string> EncodeRoleKey(const RoleKey& key) {
  RoleKeyInput input;
  input.project_id = key.project_id;
  input.role_kind = std::string(RoleKindName(key.kind));
  // The struct cannot tell "absent" from "": for cto "" means absent, for
  // lead "" means missing (SCOPE_REQUIRED rather than SCOPE_ID_INVALID).
  if (!key.scope_id.empty()) input.scope_id = key.scope_id;
  absl::StatusOr<RoleKey> normalized = NormalizeRoleKey(input);
  if (!normalized.ok()) return normalized.status();
  return RoleKeyWireFromCanonicalJson(CanonicalJson(*normalized));
}

absl::StatusOr<std::string> RoleKeyWireFromCanonicalJson(
    absl::string_view canonical_json) {
  std::string wire =
      absl::StrCat(kRoleKeyWirePrefix, Base64UrlEncode(canonical_json));
  if (wire.size() > kMaxRoleKeyWireBytes) {
    return InvalidArgumentError(
        "ROLE_KEY_WIRE_TOO_LONG",
        absl::StrCat("encoded role key is ", wire.size(),
                     " bytes; the limit is ", kMaxRoleKeyWireBytes));
  }
  return wire;
}

absl::StatusOr<RoleKey> DecodeRoleKey(absl::string_view wire) {
  if (wire.size() > kMaxRoleKeyWireBytes) {
    return InvalidArgumentError(
        "ROLE_KEY_WIRE_INVALID",
        absl::StrCat("role key wire is ", wire.size(), " bytes; the limit is ",
                     kMaxRoleKeyWireBytes));
  }
  if (!absl::StartsWith(wire, kRoleKeyWirePrefix)) {
    return InvalidArgumentError("ROLE_KEY_WIRE_PREFIX",
                                "role key wire must start with \"rk2.\"");
  }
  absl::string_view payload = wire.substr(kRoleKeyWirePrefix.size());
  if (payload.empty()) return NonCanonical("empty payload");
  for (char c : payload) {
    if (!IsBase64UrlChar(c)) {
      return NonCanonical("payload has a character outside [A-Za-z0-9_-]");
    }
  }
  std::optional<std::string> json_text = Base64UrlDecodeStrict(payload);
  if (!json_text.has_value()) return NonCanonical("payload is not base64url");
  nlohmann::json parsed = nlohmann::json::parse(*json_text, /*cb=*/nullptr,
                                                /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return NonCanonical("payload is not JSON");

  absl::StatusOr<RoleKey> key = NormalizeRoleKeyJson(parsed);
  if (!key.ok()) return key.status();
  absl::StatusOr<std::string> canonical = EncodeRoleKey(*key);
  if (!canonical.ok()) return canonical.status();
  if (*canonical != wire) {
    return NonCanonical("re-encoding the key gives a different wire");
  }
  return key;
}

std::string RoleTopic(absl::string_view wire) {
  return absl::StrCat("topic:role:", wire);
}

std::string Base64UrlEncode(absl::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() * 4 + 2) / 3);
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    uint32_t n = (static_cast<uint8_t>(bytes[i]) << 16) |
                 (static_cast<uint8_t>(bytes[i + 1]) << 8) |
                 static_cast<uint8_t>(bytes[i + 2]);
    out.push_back(kBase64UrlAlphabet[(n >> 18) & 63]);
    out.push_back(kBase64UrlAlphabet[(n >> 12) & 63]);
    out.push_back(kBase64UrlAlphabet[(n >> 6) & 63]);
    out.push_back(kBase64UrlAlphabet[n & 63]);
  }
  const size_t rest = bytes.size() - i;
  if (rest == 0) return out;
  uint32_t n = static_cast<uint8_t>(bytes[i]) << 16;
  if (rest == 2) n |= static_cast<uint8_t>(bytes[i + 1]) << 8;
  out.push_back(kBase64UrlAlphabet[(n >> 18) & 63]);
  out.push_back(kBase64UrlAlphabet[(n >> 12) & 63]);
  if (rest == 2) out.push_back(kBase64UrlAlphabet[(n >> 6) & 63]);
  return out;
}

std::optional<std::string> Base64UrlDecodeStrict(absl::string_view text) {
  // One leftover character carries only 6 bits: no byte string encodes so.
  if (text.size() % 4 == 1) return std::nullopt;
  std::string out;
  out.reserve(text.size() * 3 / 4);
  uint32_t buffer = 0;
  int bits = 0;
  for (char c : text) {
    const int value = Base64UrlValue(c);
    if (value < 0) return std::nullopt;
    buffer = ((buffer << 6) | static_cast<uint32_t>(value)) & 0xFFFFu;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((buffer >> bits) & 0xFF));
    }
  }
  // Leftover bits are padding; a canonical encoder leaves them zero.
  if ((buffer & ((1u << bits) - 1)) != 0) return std::nullopt;
  return out;
}

}  // namespace hub
