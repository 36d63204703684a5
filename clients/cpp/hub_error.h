// How a hub failure reaches C++ callers: a gRPC status (with the
// google.rpc.ErrorInfo that hub puts in its details, errors.proto) becomes an
// absl::Status with the same code and message, and the ErrorInfo attached as
// a payload, so callers can branch on the stable reason code.
#ifndef HUB_CLIENTS_CPP_HUB_ERROR_H_
#define HUB_CLIENTS_CPP_HUB_ERROR_H_

#include <grpcpp/support/status.h>

#include <map>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/rpc/error_details.pb.h"

namespace hub::client {

// The payload type URL under which the ErrorInfo travels in an absl::Status.
inline constexpr char kErrorInfoPayloadUrl[] =
    "type.googleapis.com/google.rpc.ErrorInfo";

// Converts a finished call's status. OK stays OK; otherwise the code (gRPC
// and absl share numbers) and message are kept, and the first ErrorInfo of
// the status details, if any, becomes a payload.
absl::Status FromGrpcStatus(const grpc::Status& status);

// Builds a status carrying `reason` the way FromGrpcStatus does (for errors
// that arrive in-band, e.g. a presence stream's frame_error or fencing
// notice). `metadata` becomes the ErrorInfo metadata.
absl::Status MakeHubError(
    absl::StatusCode code, absl::string_view reason, absl::string_view message,
    const std::map<std::string, std::string>& metadata = {});

// The ErrorInfo carried by `status`, or nullopt when there is none (OK, a
// transport failure, or a non-hub server).
std::optional<google::rpc::ErrorInfo> ErrorInfoOf(const absl::Status& status);

// The ErrorInfo.reason of `status` (e.g. "STALE_PRESENCE_OWNER"), or "" when
// there is none.
std::string ReasonOf(const absl::Status& status);

// One ErrorInfo.metadata value of `status`, or "" when absent.
std::string ErrorMetadata(const absl::Status& status, absl::string_view key);

}  // namespace hub::client

#endif  // HUB_CLIENTS_CPP_HUB_ERROR_H_
