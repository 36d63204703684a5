#include "registry/status.h"

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace hub {
namespace {

// Payload type URLs. They never leave the process: the gRPC edge turns them
// into google.rpc.ErrorInfo.
constexpr absl::string_view kReasonUrl = "hub.v1/reason";
constexpr absl::string_view kMetadataUrlPrefix = "hub.v1/metadata/";

}  // namespace

absl::Status ReasonError(absl::StatusCode code, absl::string_view reason,
                         absl::string_view message) {
  absl::Status status(code, message);
  status.SetPayload(kReasonUrl, absl::Cord(reason));
  return status;
}

absl::Status InvalidArgumentError(absl::string_view reason,
                                  absl::string_view message) {
  return ReasonError(absl::StatusCode::kInvalidArgument, reason, message);
}

absl::Status FailedPreconditionError(absl::string_view reason,
                                     absl::string_view message) {
  return ReasonError(absl::StatusCode::kFailedPrecondition, reason, message);
}

absl::Status AbortedError(absl::string_view reason, absl::string_view message) {
  return ReasonError(absl::StatusCode::kAborted, reason, message);
}

absl::Status NotFoundError(absl::string_view reason,
                           absl::string_view message) {
  return ReasonError(absl::StatusCode::kNotFound, reason, message);
}

absl::Status UnavailableError(absl::string_view reason,
                              absl::string_view message) {
  return ReasonError(absl::StatusCode::kUnavailable, reason, message);
}

absl::Status ResourceExhaustedError(absl::string_view reason,
                                    absl::string_view message) {
  return ReasonError(absl::StatusCode::kResourceExhausted, reason, message);
}

absl::Status LimitExceededError(absl::string_view limit, int64_t value,
                                absl::string_view message) {
  absl::Status s = ResourceExhaustedError("LIMIT_EXCEEDED", message);
  s = WithMetadata(std::move(s), "limit", limit);
  return WithMetadata(std::move(s), "limit_value", absl::StrCat(value));
}

std::string ReasonOf(const absl::Status& status) {
  absl::optional<absl::Cord> reason = status.GetPayload(kReasonUrl);
  return reason.has_value() ? std::string(*reason) : std::string();
}

absl::Status WithMetadata(absl::Status status, absl::string_view key,
                          absl::string_view value) {
  if (status.ok()) return status;
  status.SetPayload(absl::StrCat(kMetadataUrlPrefix, key), absl::Cord(value));
  return status;
}

std::map<std::string, std::string> MetadataOf(const absl::Status& status) {
  std::map<std::string, std::string> metadata;
  status.ForEachPayload(
      [&metadata](absl::string_view url, const absl::Cord& payload) {
        if (absl::StartsWith(url, kMetadataUrlPrefix)) {
          metadata[std::string(url.substr(kMetadataUrlPrefix.size()))] =
              std::string(payload);
        }
      });
  return metadata;
}

}  // namespace hub
