// Helpers shared by messaging.cc and messaging_queries.cc. Not an API.
#ifndef HUB_REGISTRY_MESSAGING_INTERNAL_H_
#define HUB_REGISTRY_MESSAGING_INTERNAL_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace hub::messaging_internal {

// How many pending rows one read scans at most.
inline constexpr int kMaxScan = 100000;

// 1..128 characters of [A-Za-z0-9._:-] (topic labels, correlation and trace
// ids).
bool IsLabel(absl::string_view text);

// Opaque page tokens: `kind` and `scope` tie a token to its query, `fields`
// name the last row of the page.
std::string EncodePageToken(absl::string_view kind, absl::string_view scope,
                            const std::vector<std::string>& fields);
// "" gives an empty vector; anything not made by EncodePageToken for the
// same kind and scope with `arity` fields is PAGE_TOKEN_INVALID.
absl::StatusOr<std::vector<std::string>> DecodePageToken(
    absl::string_view token, absl::string_view kind, absl::string_view scope,
    size_t arity);

}  // namespace hub::messaging_internal

#endif  // HUB_REGISTRY_MESSAGING_INTERNAL_H_
