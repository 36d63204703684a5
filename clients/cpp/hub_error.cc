#include "clients/cpp/hub_error.h"

#include <utility>

#include "absl/strings/cord.h"
#include "google/rpc/status.pb.h"

namespace hub::client {

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  absl::Status result(static_cast<absl::StatusCode>(status.error_code()),
                      status.error_message());
  google::rpc::Status details;
  if (status.error_details().empty() ||
      !details.ParseFromString(status.error_details())) {
    return result;
  }
  for (const auto& any : details.details()) {
    google::rpc::ErrorInfo info;
    if (any.UnpackTo(&info)) {
      result.SetPayload(kErrorInfoPayloadUrl,
                        absl::Cord(info.SerializeAsString()));
      break;
    }
  }
  return result;
}

absl::Status MakeHubError(absl::StatusCode code, absl::string_view reason,
                          absl::string_view message,
                          const std::map<std::string, std::string>& metadata) {
  absl::Status result(code, message);
  if (result.ok() || reason.empty()) return result;
  google::rpc::ErrorInfo info;
  info.set_reason(std::string(reason));
  info.set_domain("hub.v1");
  for (const auto& [key, value] : metadata) {
    (*info.mutable_metadata())[key] = value;
  }
  result.SetPayload(kErrorInfoPayloadUrl, absl::Cord(info.SerializeAsString()));
  return result;
}

std::optional<google::rpc::ErrorInfo> ErrorInfoOf(const absl::Status& status) {
  auto payload = status.GetPayload(kErrorInfoPayloadUrl);
  if (!payload.has_value()) return std::nullopt;
  google::rpc::ErrorInfo info;
  if (!info.ParseFromString(std::string(*payload))) return std::nullopt;
  return info;
}

std::string ReasonOf(const absl::Status& status) {
  std::optional<google::rpc::ErrorInfo> info = ErrorInfoOf(status);
  return info.has_value() ? info->reason() : std::string();
}

std::string ErrorMetadata(const absl::Status& status, absl::string_view key) {
  std::optional<google::rpc::ErrorInfo> info = ErrorInfoOf(status);
  if (!info.has_value()) return std::string();
  auto it = info->metadata().find(std::string(key));
  return it == info->metadata().end() ? std::string() : it->second;
}

}  // namespace hub::client
