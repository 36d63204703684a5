// Answers a request whose bytes do not parse with INVALID_ARGUMENT /
// REQUEST_MALFORMED (docs/design/contracts.md, "Malformed requests").
//
// gRPC C++ 1.51's callback API parses a unary or server-streaming request
// before any handler runs and, when that fails, finishes the call itself
// with UNIMPLEMENTED and no detail (CallbackUnaryHandler::RunHandler and its
// streaming siblings). A server interceptor sees both halves: the request
// arriving as nullptr (POST_RECV_MESSAGE) and the status leaving
// (PRE_SEND_STATUS), so one interceptor covers every such RPC of every
// service. It must come first among the server's interceptors, so that the
// others see the status it sends.
//
// A frame of a client or bidi stream that does not parse reaches the reactor
// as a failed read, exactly like a half-close; MarkUnread / ReadFailedToParse
// let the reactor tell the two apart.
#ifndef HUB_HUB_SERVICES_MALFORMED_REQUEST_H_
#define HUB_HUB_SERVICES_MALFORMED_REQUEST_H_

#include <google/protobuf/message.h>
#include <grpcpp/support/server_interceptor.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace hub {

class MalformedRequestFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override;
};

// INVALID_ARGUMENT / REQUEST_MALFORMED for a request of `method`
// ("/hub.v1.PresenceService/GetAgent") whose bytes did not parse.
absl::Status MalformedRequestError(absl::string_view method);

// Before StartRead(message): marks `message` as not yet read. gRPC clears a
// message before it parses a frame into it and leaves it alone on a
// half-close, so the mark is gone after a frame that did not parse.
void MarkUnread(google::protobuf::Message* message);

// After a failed read into a message marked by MarkUnread: whether a frame
// arrived that did not parse (true) rather than the client half-closing or
// the call ending (false).
bool ReadFailedToParse(const google::protobuf::Message& message);

}  // namespace hub

#endif  // HUB_HUB_SERVICES_MALFORMED_REQUEST_H_
