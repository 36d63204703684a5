// RpcObserverFactory: a gRPC server interceptor that measures and logs every
// call in one place, so the services need no metric or log code of their own
// (the presence stream excepted: its reactor feeds a CallObserver itself).
//
// For each call it counts the call and its status (method, code, and the
// ErrorInfo reason of a failure), times unary calls, keeps the count of open
// streams, and reads the replies it sees leave for message counts (Publish,
// Ask, Ack, ListPending, deliveries and acks on Attach). It writes one log
// line per registration and per fencing rejection, and a debug line per
// other failure. It never reads request metadata, where credentials travel.
#ifndef HUB_HUB_OBSERVABILITY_RPC_OBSERVER_H_
#define HUB_HUB_OBSERVABILITY_RPC_OBSERVER_H_

#include <grpcpp/support/server_interceptor.h>
#include <grpcpp/support/status.h>

#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "hub/observability/hub_metrics.h"
#include "hub/v1/errors.pb.h"

namespace hub {

// What the observer does for one call, fed by its caller: the interceptor
// below for every method but Attach, whose reactor feeds it itself (an
// interceptor costs each frame of a stream an extra completion-queue trip).
// Counts the call and its status, times unary calls, keeps the open stream
// count, reads the messages it is shown for message counts and writes the
// log lines above. Not thread-safe: one caller at a time.
class CallObserver {
 public:
  // `method` as gRPC names it ("/hub.v1.PresenceService/Attach"); `metrics`
  // must outlive the observer.
  CallObserver(HubMetrics* metrics, absl::string_view method, bool streaming);
  // A call that never finished counts as CANCELLED.
  ~CallObserver();
  CallObserver(const CallObserver&) = delete;
  CallObserver& operator=(const CallObserver&) = delete;

  // A request message as received (nullptr: none).
  void Received(const void* message);
  // A reply message about to be sent (nullptr: none).
  void Sending(const void* message);
  // The call's status, about to be sent; only the first counts.
  void Finished(const grpc::Status& status);

 private:
  bool Is(absl::string_view service, absl::string_view name) const;
  void FrameRejected(const v1::ErrorStatus& error);

  HubMetrics* const metrics_;
  const std::string method_;
  const bool streaming_;
  const absl::Time start_;
  bool finished_ = false;
  bool peek_ = false;
  std::string agent_id_;  // Attach: from its hello
};

// The method whose handler feeds its own CallObserver.
inline constexpr absl::string_view kSelfObservedAttach =
    "/hub.v1.PresenceService/Attach";

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

#endif  // HUB_HUB_OBSERVABILITY_RPC_OBSERVER_H_
