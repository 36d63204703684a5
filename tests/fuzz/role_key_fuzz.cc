// Fuzz target: the role key wire decoder (registry/role_key.h).
//
// Every input either decodes or fails with INVALID_ARGUMENT and a role-key
// reason; a decoded key re-encodes to exactly the input (one wire per key)
// and decodes again to the same key.
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>

#include "absl/strings/string_view.h"
#include "registry/role_key.h"
#include "status/status.h"

namespace {

void Check(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "role_key_fuzz: %s\n", what);
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view wire(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<hub::RoleKey> key = hub::DecodeRoleKey(wire);
  if (!key.ok()) {
    static const std::set<std::string> kReasons = {
        "ROLE_KEY_WIRE_INVALID",      "ROLE_KEY_WIRE_PREFIX",
        "ROLE_KEY_NON_CANONICAL",     "ROLE_KEY_INVALID",
        "ROLE_KEY_FIELD_UNSUPPORTED", "ROLE_KIND_UNSUPPORTED",
        "ROLE_SCOPE_FORBIDDEN",       "SCOPE_REQUIRED",
        "SCOPE_ID_INVALID",           "PROJECT_ID_INVALID"};
    Check(key.status().code() == absl::StatusCode::kInvalidArgument,
          "a refused wire is not INVALID_ARGUMENT");
    Check(kReasons.count(hub::ReasonOf(key.status())) == 1,
          "a refused wire has no role-key reason");
    return 0;
  }
  absl::StatusOr<std::string> again = hub::EncodeRoleKey(*key);
  Check(again.ok(), "a decoded key does not encode");
  Check(*again == wire, "a decoded key re-encodes to another wire");
  absl::StatusOr<hub::RoleKey> twice = hub::DecodeRoleKey(*again);
  Check(twice.ok() && *twice == *key, "the re-encoded wire decodes otherwise");
  // The other decoders of the codec must agree on the same bytes.
  (void)hub::Base64UrlDecodeStrict(wire.substr(wire.size() > 4 ? 4 : 0));
  return 0;
}
