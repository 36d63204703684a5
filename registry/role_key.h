// Role keys: the identity of a fenced role (one `cto` per project, one `lead`
// per scope) and its `rk2.` wire form, byte-identical with triflux
// (TRIFLUX-HUB.md §4). This file validates, encodes and decodes keys; it knows
// nothing about who holds a role (that is the role registry's job).
//
// Wire form: "rk2." + base64url-without-padding(canonical JSON), where the
// canonical JSON is {"project_id":..,"role_kind":..[,"scope_id":..]} with no
// whitespace. Because ids are restricted to [A-Za-z0-9_-], the JSON never
// needs escaping, and a cto wire is always 86 bytes, a lead wire 140.
//
// Every failure is INVALID_ARGUMENT with one of triflux's reason codes
// (ReasonOf(status)): ROLE_KEY_INVALID, ROLE_KEY_FIELD_UNSUPPORTED,
// PROJECT_ID_INVALID, ROLE_KIND_UNSUPPORTED, ROLE_SCOPE_FORBIDDEN,
// SCOPE_REQUIRED, SCOPE_ID_INVALID, ROLE_KEY_WIRE_TOO_LONG,
// ROLE_KEY_WIRE_INVALID, ROLE_KEY_WIRE_PREFIX, ROLE_KEY_NON_CANONICAL.
#ifndef HUB_REGISTRY_ROLE_KEY_H_
#define HUB_REGISTRY_ROLE_KEY_H_

#include <cstddef>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace hub {

enum class RoleKind { kCto, kLead };

// "cto" or "lead": the spelling used in JSON, on the wire and in SQL.
absl::string_view RoleKindName(RoleKind kind);

// A validated role identity. `scope_id` is "" for cto and a scp_ id for lead.
struct RoleKey {
  std::string project_id;
  RoleKind kind = RoleKind::kCto;
  std::string scope_id;
};

bool operator==(const RoleKey& a, const RoleKey& b);
bool operator!=(const RoleKey& a, const RoleKey& b);

// A role key as a structured caller gives it, before validation. The gRPC edge
// maps its enum to "cto" / "lead" / "" (unspecified). An absent scope_id and a
// present-but-empty one differ: cto forbids any scope_id (even ""), lead with
// "" is SCOPE_ID_INVALID, lead without one is SCOPE_REQUIRED.
struct RoleKeyInput {
  std::string project_id;
  std::string role_kind;
  std::optional<std::string> scope_id;
};

// Limits of the wire form.
inline constexpr absl::string_view kRoleKeyWirePrefix = "rk2.";
inline constexpr size_t kMaxRoleKeyWireBytes = 512;

// True iff `id` matches ^prj_[A-Za-z0-9_-]{22}$ (case-sensitive).
bool IsProjectId(absl::string_view id);
// True iff `id` matches ^scp_[A-Za-z0-9_-]{22}$ (case-sensitive).
bool IsScopeId(absl::string_view id);

// Validates a structured key. Check order (the first failure wins):
// project_id (PROJECT_ID_INVALID), role_kind (ROLE_KIND_UNSUPPORTED), then for
// cto any scope_id (ROLE_SCOPE_FORBIDDEN), for lead a missing scope_id
// (SCOPE_REQUIRED) or a malformed one (SCOPE_ID_INVALID).
absl::StatusOr<RoleKey> NormalizeRoleKey(const RoleKeyInput& input);

// triflux's normalizer applied to an arbitrary JSON value. Check order:
// not an object (ROLE_KEY_INVALID); a field other than project_id, role_kind,
// scope_id (ROLE_KEY_FIELD_UNSUPPORTED); project_id missing, not a string or
// malformed (PROJECT_ID_INVALID); role_kind missing, not a string or not
// cto/lead (ROLE_KIND_UNSUPPORTED); cto with a scope_id key, whatever its
// value, null included (ROLE_SCOPE_FORBIDDEN); lead whose scope_id is missing
// or not a string (SCOPE_REQUIRED) or malformed (SCOPE_ID_INVALID).
absl::StatusOr<RoleKey> NormalizeRoleKeyJson(const nlohmann::json& value);

// Validates `key` (as NormalizeRoleKey would: a lead with an empty scope_id is
// SCOPE_REQUIRED, a cto with a non-empty one ROLE_SCOPE_FORBIDDEN) and returns
// its wire form.
absl::StatusOr<std::string> EncodeRoleKey(const RoleKey& key);

// Wraps already-canonical JSON into a wire: prefix + unpadded base64url.
// ROLE_KEY_WIRE_TOO_LONG if the result exceeds kMaxRoleKeyWireBytes. Valid
// keys are far below the limit (ids are fixed-length); the check exists so a
// future key kind cannot silently produce wires other implementations refuse.
absl::StatusOr<std::string> RoleKeyWireFromCanonicalJson(
    absl::string_view canonical_json);

// Parses a wire. Check order (the first failure wins):
//   1. longer than kMaxRoleKeyWireBytes               ROLE_KEY_WIRE_INVALID
//   2. does not start with "rk2."                     ROLE_KEY_WIRE_PREFIX
//   3. empty payload, or a byte outside [A-Za-z0-9_-] ROLE_KEY_NON_CANONICAL
//      (so '=' padding and whitespace fail here)
//   4. not strict base64url (length % 4 == 1, or non-zero unused trailing
//      bits), or the bytes are not a JSON document    ROLE_KEY_NON_CANONICAL
//   5. NormalizeRoleKeyJson on the document           its codes
//   6. re-encoding the key differs from `wire`        ROLE_KEY_NON_CANONICAL
//      (key order, whitespace, escapes, duplicate keys)
absl::StatusOr<RoleKey> DecodeRoleKey(absl::string_view wire);

// The message address of a role: "topic:role:" + wire. Does not validate.
std::string RoleTopic(absl::string_view wire);

// Unpadded base64url (RFC 4648 §5), exposed for tests and other codecs.
std::string Base64UrlEncode(absl::string_view bytes);
// Strict inverse of Base64UrlEncode: rejects '=', bytes outside the alphabet,
// length % 4 == 1 and non-zero unused bits, so each byte string has exactly
// one accepted encoding. Returns nullopt on rejection.
std::optional<std::string> Base64UrlDecodeStrict(absl::string_view text);

}  // namespace hub

#endif  // HUB_REGISTRY_ROLE_KEY_H_
