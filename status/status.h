// Reason-coded errors shared by every layer below the gRPC edge.
//
// A failure carries an absl::StatusCode (which becomes the gRPC status code)
// and a stable machine reason such as "ROLE_KEY_NON_CANONICAL" (which becomes
// google.rpc.ErrorInfo.reason). The reason is set once, where the failure is
// detected; callers pass the status on and never re-derive it. Optional
// metadata (key/value strings) travels with it into ErrorInfo.metadata.
#ifndef HUB_STATUS_STATUS_H_
#define HUB_STATUS_STATUS_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace hub {

// Returns a status with `code`, `message` and the machine `reason`.
// REQUIRES: code != kOk; reason is an UPPER_SNAKE identifier.
absl::Status ReasonError(absl::StatusCode code, absl::string_view reason,
                         absl::string_view message);

// Shorthands for the codes ARCHITECTURE.md maps failures to.
absl::Status InvalidArgumentError(absl::string_view reason,
                                  absl::string_view message);
absl::Status FailedPreconditionError(absl::string_view reason,
                                     absl::string_view message);
absl::Status AbortedError(absl::string_view reason, absl::string_view message);
absl::Status NotFoundError(absl::string_view reason, absl::string_view message);
absl::Status UnavailableError(absl::string_view reason,
                              absl::string_view message);
absl::Status ResourceExhaustedError(absl::string_view reason,
                                    absl::string_view message);

// RESOURCE_EXHAUSTED / LIMIT_EXCEEDED for the configured limit named `limit`
// (a docs/design/limits.md name such as "max_topics_per_agent") whose value
// is `value`; metadata "limit" and "limit_value" say which and how much.
absl::Status LimitExceededError(absl::string_view limit, int64_t value,
                                absl::string_view message);

// The reason attached by ReasonError, or "" when the status has none
// (including OK).
std::string ReasonOf(const absl::Status& status);

// Returns `status` with metadata key=value added (replacing an earlier value
// for the same key). An OK status is returned unchanged.
absl::Status WithMetadata(absl::Status status, absl::string_view key,
                          absl::string_view value);

// All metadata attached with WithMetadata, by key.
std::map<std::string, std::string> MetadataOf(const absl::Status& status);

// What one value quoted back to a client (an id, a path, a metadata value)
// may weigh, in bytes of UTF-8. A canonical lead role key wire (140 bytes)
// fits whole; a caller's 6,000-byte id does not, and one error must never
// approach gRPC's default 8 KiB limit on trailers.
inline constexpr size_t kMaxErrorValueBytes = 160;

// `text` made fit to travel in an error: valid UTF-8, where every byte that
// is not part of a well-formed sequence becomes U+FFFD (strict protobuf
// parsers reject a whole google.rpc.Status over one bad string), and at most
// `max_bytes` bytes; a longer text is cut on a character boundary and ends
// with "\u2026" (the ellipsis counts). Reads at most about `max_bytes`
// bytes of `text`, so a huge input costs no more than a short one.
// REQUIRES: max_bytes >= 3.
std::string ErrorText(absl::string_view text,
                      size_t max_bytes = kMaxErrorValueBytes);

}  // namespace hub

#endif  // HUB_STATUS_STATUS_H_
