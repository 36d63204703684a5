#include "hub/error_mapping.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "registry/status.h"

namespace hub {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  const auto code = static_cast<grpc::StatusCode>(status.code());
  const std::string reason = ReasonOf(status);
  // The reason also leads the message: generic clients such as buf curl
  // print the message but not always the decoded ErrorInfo.
  std::string message = reason.empty()
                            ? std::string(status.message())
                            : absl::StrCat(reason, ": ", status.message());

  google::rpc::Status details;
  details.set_code(static_cast<int>(status.code()));
  details.set_message(message);
  if (!reason.empty()) {
    google::rpc::ErrorInfo info;
    info.set_reason(reason);
    info.set_domain(kErrorDomain);
    for (const auto& [key, value] : MetadataOf(status)) {
      (*info.mutable_metadata())[key] = value;
    }
    details.add_details()->PackFrom(info);
  }
  return grpc::Status(code, std::move(message), details.SerializeAsString());
}

grpc::ServerUnaryReactor* FinishUnary(grpc::CallbackServerContext* context,
                                      const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

}  // namespace hub
