// The one place where domain errors become what a client reads.
//
// An absl::Status keeps its code (absl and gRPC codes share numbers) and its
// message; its reason code and metadata (status/status.h) travel as a
// google.rpc.ErrorInfo with domain "hub.v1" inside google.rpc.Status details
// (the grpc-status-details-bin trailer), which grpcurl and buf curl print.
// On the presence stream the same information travels in-band as a
// hub.v1.ErrorStatus.
//
// Whatever a status holds, what leaves here is readable by a default gRPC
// client in any language: every string is valid UTF-8, every metadata value
// is at most kMaxErrorValueBytes, the message at most kMaxErrorMessageBytes
// and the serialized google.rpc.Status at most kMaxErrorDetailBytes, so no
// error can push its trailers past gRPC's default 8 KiB metadata limit.
// Every failure carries an ErrorInfo: one without a reason gets the generic
// reason of its code (FallbackReason), and UNKNOWN is sent as INTERNAL.
#ifndef HUB_HUB_SERVICES_ERROR_MAPPING_H_
#define HUB_HUB_SERVICES_ERROR_MAPPING_H_

#include <grpcpp/server_context.h>
#include <grpcpp/support/server_callback.h>
#include <grpcpp/support/status.h>

#include <cstddef>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "hub/v1/errors.pb.h"

namespace hub {

// The ErrorInfo.domain of every hub error.
inline constexpr char kErrorDomain[] = "hub.v1";

// Bounds on what one error sends (the reason leads the message).
inline constexpr size_t kMaxErrorMessageBytes = 512;
inline constexpr size_t kMaxErrorDetailBytes = 2048;

// Converts a domain status into the status an RPC returns.
grpc::Status ToGrpcStatus(const absl::Status& status);

// The in-band form of a failure, for answers that must not end a stream;
// bounded like ToGrpcStatus. An unknown reason becomes UNSPECIFIED.
hub::v1::ErrorStatus ToErrorStatus(const absl::Status& status);

// The reason a status without one is sent with: the generic reason of its
// code ("REQUEST_INVALID", "LIMIT_EXCEEDED", ...), else "INTERNAL". "" for
// OK, CANCELLED and DEADLINE_EXCEEDED, which end a call the client itself
// gave up on, so no detail is sent.
absl::string_view FallbackReason(absl::StatusCode code);

// Finishes a unary callback call at once with `status`; returns its reactor.
grpc::ServerUnaryReactor* FinishUnary(grpc::CallbackServerContext* context,
                                      const absl::Status& status);

}  // namespace hub

#endif  // HUB_HUB_SERVICES_ERROR_MAPPING_H_
