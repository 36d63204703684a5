// The client side of the black-box error contract test: calls any RPC by
// its descriptor with raw request bytes over grpc::GenericStub (so garbage
// can be sent), and checks that a failure is readable by a default gRPC
// client (docs/design/contracts.md, "Errors").
#ifndef HUB_TESTS_ERROR_CONTRACT_CLIENT_H_
#define HUB_TESTS_ERROR_CONTRACT_CLIENT_H_

#include <google/protobuf/descriptor.h>
#include <grpcpp/channel.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/support/status.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace hub::testing {

struct CallOutcome {
  grpc::Status status;
  int responses = 0;
};

class GenericCaller {
 public:
  explicit GenericCaller(std::shared_ptr<grpc::Channel> channel)
      : stub_(std::move(channel)) {}

  // Sends `frames` (each the bytes of one request message) on `method`,
  // half-closes, reads every response until the call ends or `timeout`
  // passes. Unary and streaming RPCs alike: on the wire they differ only in
  // how many messages flow.
  CallOutcome Call(const google::protobuf::MethodDescriptor* method,
                   const std::vector<std::string>& frames,
                   absl::Duration timeout);

 private:
  grpc::GenericStub stub_;
};

// "/hub.v1.PresenceService/GetAgent"
std::string MethodPath(const google::protobuf::MethodDescriptor* method);

// What is wrong with `status` as a client would read it, or "" when it
// keeps the contract: never UNKNOWN or INTERNAL; a failure carries a
// parseable google.rpc.Status with one ErrorInfo of domain "hub.v1" and a
// reason, every string valid UTF-8, the detail within 2 KiB. OK passes.
std::string ContractViolation(const grpc::Status& status);

// The ErrorInfo reason of `status`, or "".
std::string ReasonOfStatus(const grpc::Status& status);

// The hub.v1 services that the server at `channel` lists by reflection,
// each found in this binary's generated descriptor pool (nullptr entries
// name services the test does not know).
std::vector<std::pair<std::string, const google::protobuf::ServiceDescriptor*>>
ListHubServices(const std::shared_ptr<grpc::Channel>& channel);

}  // namespace hub::testing

#endif  // HUB_TESTS_ERROR_CONTRACT_CLIENT_H_
