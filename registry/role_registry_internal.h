// Helpers shared by the RoleRegistry's source files. Not part of its API.
#ifndef HUB_REGISTRY_ROLE_REGISTRY_INTERNAL_H_
#define HUB_REGISTRY_ROLE_REGISTRY_INTERNAL_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "storage/store.h"

namespace hub::role_internal {

inline constexpr int kDefaultPageSize = 100;
inline constexpr int kMaxPageSize = 1000;

// `status` with metadata "field" = field.
absl::Status FieldError(absl::Status status, absl::string_view field);

// INVALID_ARGUMENT / REQUEST_INVALID naming `field`.
absl::Status RequestInvalid(absl::string_view field, absl::string_view message);

// A text field of 1..max_len characters, else REQUEST_INVALID.
absl::Status CheckText(const std::string& value, size_t max_len,
                       absl::string_view field);

// The status of a refused role write: STALE_VERSION and CAS_CONFLICT are
// ABORTED; STALE_EPOCH, STALE_ACTIVATION_SEQ, STALE_ACTIVATION_ID are
// FAILED_PRECONDITION; ROLE_NOT_FOUND is NOT_FOUND; INVALID_CAS is
// INVALID_ARGUMENT. A present row's fence (version, epoch, activation_seq,
// activation_id ("" when none), state, holder_agent_id) goes into metadata.
absl::Status RoleWriteError(storage::RoleOutcome outcome,
                            const std::optional<RoleRecord>& row,
                            absl::string_view wire);

// The set of mask paths, checked against `allowed`: an unknown or repeated
// path is UPDATE_MASK_INVALID (field "update_mask").
absl::StatusOr<absl::flat_hash_set<std::string>> ParseMask(
    const std::vector<std::string>& mask,
    const std::vector<absl::string_view>& allowed);

// UPDATE_MASK_INVALID: `field` is set but update_mask does not list it.
absl::Status MaskMissing(absl::string_view field);

// One field of a patch under the mask rules of role.proto: with an empty
// mask a set value is written and an unset one kept; with a mask, a set but
// unlisted field is UPDATE_MASK_INVALID, a listed set field is written and a
// listed unset one cleared (REQUEST_INVALID when it is not `nullable`).
// `message` is the request field holding the patch ("patch", "candidate").
template <typename T>
absl::StatusOr<storage::Patch<T>> MaskedField(
    const std::optional<T>& value, absl::string_view message,
    absl::string_view name, const absl::flat_hash_set<std::string>& mask,
    bool nullable) {
  using storage::Patch;
  if (mask.empty()) return value.has_value() ? Patch<T>(*value) : Patch<T>();
  const bool listed = mask.contains(name);
  const std::string field = absl::StrCat(message, ".", name);
  if (value.has_value() && !listed) {
    return MaskMissing(field);
  }
  if (!listed) return Patch<T>();
  if (value.has_value()) return Patch<T>(*value);
  if (!nullable) {
    return RequestInvalid(field, absl::StrCat(field, " cannot be cleared"));
  }
  return Patch<T>::Clear();
}

// Page size rule shared by the list calls: 0 -> 100, > 1000 -> 1000,
// negative -> REQUEST_INVALID (field "page_size").
absl::StatusOr<int> EffectivePageSize(int page_size);

// Opaque page tokens: `kind` names the list, `filter` is a canonical text
// of the request's filters (a token from other filters is refused) and
// `position` is where the next page starts.
std::string EncodePageToken(absl::string_view kind, absl::string_view filter,
                            absl::string_view position);
// "" for ""; PAGE_TOKEN_INVALID (field "page_token") for anything else not
// produced by EncodePageToken with the same kind and filter.
absl::StatusOr<std::string> DecodePageToken(absl::string_view token,
                                            absl::string_view kind,
                                            absl::string_view filter);

}  // namespace hub::role_internal

#endif  // HUB_REGISTRY_ROLE_REGISTRY_INTERNAL_H_
