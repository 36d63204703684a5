// RpcObserverFactory: a gRPC server interceptor that measures and logs every
// call in one place, so the services need no metric or log code of their own.
//
// For each call it counts the call and its status (method, code, and the
// ErrorInfo reason of a failure), times unary calls, keeps the count of open
// streams, and reads the replies it sees leave for message counts (Publish,
// Ask, Ack, ListPending, deliveries and acks on Attach). It writes one log
// line per registration and per fencing rejection, and a debug line per
// other failure. It never reads request metadata, where credentials travel.
#ifndef HUB_HUB_RPC_OBSERVER_H_
#define HUB_HUB_RPC_OBSERVER_H_

#include <grpcpp/support/server_interceptor.h>

#include <string>

#include "absl/strings/string_view.h"
#include "hub/hub_metrics.h"

namespace hub {

class RpcObserverFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  // `metrics` must outlive every call of the server.
  explicit RpcObserverFactory(HubMetrics* metrics) : metrics_(metrics) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override;

 private:
  HubMetrics* const metrics_;
};

// "OK", "INVALID_ARGUMENT", ... for a gRPC status code.
absl::string_view StatusCodeName(grpc::StatusCode code);
// Whether a failure with this reason is a fence doing its job (a stale
// generation, epoch, activation, version or hub instance).
bool IsFencingReason(absl::string_view reason);

}  // namespace hub

#endif  // HUB_HUB_RPC_OBSERVER_H_
