#include "registry/role_registry_internal.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "registry/role_key.h"
#include "status/status.h"

namespace hub::role_internal {
namespace {

// FNV-1a: a digest that is stable across processes (absl::Hash is seeded
// per process, and a page token must survive a hub restart).
uint64_t Fnv1a(absl::string_view text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace

absl::Status FieldError(absl::Status status, absl::string_view field) {
  return WithMetadata(std::move(status), "field", field);
}

absl::Status RequestInvalid(absl::string_view field,
                            absl::string_view message) {
  return FieldError(InvalidArgumentError("REQUEST_INVALID", message), field);
}

absl::Status CheckText(const std::string& value, size_t max_len,
                       absl::string_view field) {
  if (value.empty() || value.size() > max_len) {
    return RequestInvalid(
        field, absl::StrCat(field, " must have 1..", max_len, " characters"));
  }
  return absl::OkStatus();
}

absl::Status RoleWriteError(storage::RoleOutcome outcome,
                            const std::optional<RoleRecord>& row,
                            absl::string_view wire) {
  const std::string name(storage::RoleOutcomeName(outcome));
  const std::string msg = absl::StrCat("role write refused: ", name);
  absl::Status s;
  switch (outcome) {
    case storage::RoleOutcome::kApplied:
      return absl::OkStatus();
    case storage::RoleOutcome::kNotFound:
      s = NotFoundError("ROLE_NOT_FOUND",
                        absl::StrCat("role '", wire, "' not found"));
      break;
    case storage::RoleOutcome::kStaleVersion:
      s = AbortedError("STALE_VERSION", msg);
      break;
    case storage::RoleOutcome::kCasConflict:
      s = AbortedError("CAS_CONFLICT", msg);
      break;
    case storage::RoleOutcome::kStaleEpoch:
      s = FailedPreconditionError("STALE_EPOCH", msg);
      break;
    case storage::RoleOutcome::kStaleActivationSeq:
      s = FailedPreconditionError("STALE_ACTIVATION_SEQ", msg);
      break;
    case storage::RoleOutcome::kStaleActivationId:
      s = FailedPreconditionError("STALE_ACTIVATION_ID", msg);
      break;
    case storage::RoleOutcome::kInvalidCas:
      s = InvalidArgumentError("INVALID_CAS", msg);
      break;
  }
  s = WithMetadata(std::move(s), "role_key_wire", wire);
  if (!row.has_value()) return s;
  s = WithMetadata(std::move(s), "version", absl::StrCat(row->version));
  s = WithMetadata(std::move(s), "epoch", absl::StrCat(row->epoch));
  s = WithMetadata(std::move(s), "activation_seq",
                   absl::StrCat(row->activation_seq));
  s = WithMetadata(std::move(s), "activation_id",
                   row->activation_id.value_or(""));
  s = WithMetadata(std::move(s), "state", RoleStateName(row->state));
  if (row->holder_agent_id.has_value()) {
    s = WithMetadata(std::move(s), "holder_agent_id", *row->holder_agent_id);
  }
  return s;
}

absl::Status MaskMissing(absl::string_view field) {
  return FieldError(
      InvalidArgumentError(
          "UPDATE_MASK_INVALID",
          absl::StrCat(field, " is set but not listed in update_mask")),
      "update_mask");
}

absl::StatusOr<absl::flat_hash_set<std::string>> ParseMask(
    const std::vector<std::string>& mask,
    const std::vector<absl::string_view>& allowed) {
  absl::flat_hash_set<std::string> out;
  for (const std::string& path : mask) {
    bool known = false;
    for (absl::string_view a : allowed) known = known || a == path;
    if (!known || !out.insert(path).second) {
      return FieldError(
          InvalidArgumentError(
              "UPDATE_MASK_INVALID",
              absl::StrCat("update_mask path '", ErrorText(path), "' is ",
                           known ? "repeated" : "not a field of the patch")),
          "update_mask");
    }
  }
  return out;
}

absl::StatusOr<int> EffectivePageSize(int page_size) {
  if (page_size < 0) {
    return RequestInvalid("page_size", "page_size must not be negative");
  }
  if (page_size == 0) return kDefaultPageSize;
  return page_size > kMaxPageSize ? kMaxPageSize : page_size;
}

std::string EncodePageToken(absl::string_view kind, absl::string_view filter,
                            absl::string_view position) {
  return Base64UrlEncode(
      absl::StrCat(kind, "|", absl::Hex(Fnv1a(filter)), "|", position));
}

absl::StatusOr<std::string> DecodePageToken(absl::string_view token,
                                            absl::string_view kind,
                                            absl::string_view filter) {
  if (token.empty()) return std::string();
  const std::string prefix =
      absl::StrCat(kind, "|", absl::Hex(Fnv1a(filter)), "|");
  std::optional<std::string> raw = Base64UrlDecodeStrict(token);
  if (!raw.has_value() || !absl::StartsWith(*raw, prefix) ||
      raw->size() == prefix.size()) {
    return FieldError(
        InvalidArgumentError("PAGE_TOKEN_INVALID",
                             "page_token was not issued for this list and "
                             "these filters"),
        "page_token");
  }
  return raw->substr(prefix.size());
}

}  // namespace hub::role_internal
