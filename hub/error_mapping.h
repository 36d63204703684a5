// The one place where domain errors become gRPC statuses.
//
// An absl::Status keeps its code (absl and gRPC codes share numbers) and its
// message; its reason code and metadata (registry/status.h) travel as a
// google.rpc.ErrorInfo with domain "hub.v1" inside google.rpc.Status details
// (the grpc-status-details-bin trailer), which grpcurl and buf curl print.
#ifndef HUB_HUB_ERROR_MAPPING_H_
#define HUB_HUB_ERROR_MAPPING_H_

#include <grpcpp/server_context.h>
#include <grpcpp/support/server_callback.h>
#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace hub {

// The ErrorInfo.domain of every hub error.
inline constexpr char kErrorDomain[] = "hub.v1";

// Converts a domain status into the status an RPC returns.
grpc::Status ToGrpcStatus(const absl::Status& status);

// Finishes a unary callback call at once with `status`; returns its reactor.
grpc::ServerUnaryReactor* FinishUnary(grpc::CallbackServerContext* context,
                                      const absl::Status& status);

}  // namespace hub

#endif  // HUB_HUB_ERROR_MAPPING_H_
