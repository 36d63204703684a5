#include "hub/services/malformed_request.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/unknown_field_set.h>
#include <grpcpp/support/status.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "hub/services/error_mapping.h"
#include "status/status.h"

namespace hub {
namespace {

using grpc::experimental::InterceptionHookPoints;
using grpc::experimental::InterceptorBatchMethods;
using grpc::experimental::ServerRpcInfo;

// The field number of the unread mark: the largest one protobuf allows, so
// that no hub.v1 message will ever define it.
constexpr int kUnreadMarkField = 536870911;

class MalformedRequestGuard final : public grpc::experimental::Interceptor {
 public:
  explicit MalformedRequestGuard(ServerRpcInfo* info) : info_(info) {}

  void Intercept(InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            InterceptionHookPoints::POST_RECV_MESSAGE) &&
        methods->GetRecvMessage() == nullptr) {
      malformed_ = true;
    }
    if (malformed_ &&
        methods->QueryInterceptionHookPoint(
            InterceptionHookPoints::PRE_SEND_STATUS) &&
        methods->GetSendStatus().error_code() ==
            grpc::StatusCode::UNIMPLEMENTED) {
      methods->ModifySendStatus(ToGrpcStatus(
          MalformedRequestError(info_->method() ? info_->method() : "")));
    }
    methods->Proceed();
  }

 private:
  ServerRpcInfo* const info_;
  bool malformed_ = false;
};

}  // namespace

grpc::experimental::Interceptor*
MalformedRequestFactory::CreateServerInterceptor(ServerRpcInfo* info) {
  // On a client or bidi stream a missing message is also a half-close; only
  // where the request is read before the handler does nullptr mean "did not
  // parse".
  if (info->type() != ServerRpcInfo::Type::UNARY &&
      info->type() != ServerRpcInfo::Type::SERVER_STREAMING) {
    return nullptr;
  }
  return new MalformedRequestGuard(info);
}

absl::Status MalformedRequestError(absl::string_view method) {
  // "/hub.v1.PresenceService/GetAgent" -> "hub.v1.PresenceService.GetAgent"
  const std::string name =
      absl::StrReplaceAll(absl::StripPrefix(method, "/"), {{"/", "."}});
  const google::protobuf::MethodDescriptor* descriptor =
      google::protobuf::DescriptorPool::generated_pool()->FindMethodByName(
          name);
  const std::string type = descriptor != nullptr
                               ? descriptor->input_type()->full_name()
                               : std::string("request message");
  return InvalidArgumentError(
      "REQUEST_MALFORMED",
      absl::StrCat("the request bytes of ", ErrorText(method),
                   " are not a valid ", type,
                   " (truncated, a wrong wire type, or a string field that "
                   "is not UTF-8)"));
}

void MarkUnread(google::protobuf::Message* message) {
  message->GetReflection()->MutableUnknownFields(message)->AddVarint(
      kUnreadMarkField, 1);
}

bool ReadFailedToParse(const google::protobuf::Message& message) {
  const google::protobuf::UnknownFieldSet& unknown =
      message.GetReflection()->GetUnknownFields(message);
  for (int i = 0; i < unknown.field_count(); ++i) {
    if (unknown.field(i).number() == kUnreadMarkField) return false;
  }
  return true;
}

}  // namespace hub
