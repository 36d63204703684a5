#include "hub/services/error_mapping.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "status/status.h"

namespace hub {
namespace {

// ErrorInfo.reason and metadata keys are identifiers of the hub's own
// (google.rpc allows 63 and 64 characters); bounded all the same.
constexpr size_t kMaxReasonBytes = 63;
constexpr size_t kMaxKeyBytes = 64;

// A failure as it is sent, every part already bounded.
struct BoundedError {
  absl::StatusCode code = absl::StatusCode::kOk;
  std::string reason;  // "" only for codes without a fallback
  std::string message;
  std::vector<std::pair<std::string, std::string>> metadata;  // by key
};

// `lead_with_reason`: the message starts "REASON: ", for generic clients
// such as buf curl, which print the message but not always the ErrorInfo.
BoundedError Bound(const absl::Status& status, bool lead_with_reason) {
  BoundedError out;
  out.code = status.code() == absl::StatusCode::kUnknown
                 ? absl::StatusCode::kInternal
                 : status.code();
  std::string reason = ReasonOf(status);
  if (reason.empty()) reason = std::string(FallbackReason(out.code));
  out.reason = ErrorText(reason, kMaxReasonBytes);
  out.message =
      ErrorText(out.reason.empty() || !lead_with_reason
                    ? std::string(status.message())
                    : absl::StrCat(out.reason, ": ", status.message()),
                kMaxErrorMessageBytes);
  if (out.reason.empty()) return out;
  for (const auto& [key, value] : MetadataOf(status)) {
    out.metadata.emplace_back(ErrorText(key, kMaxKeyBytes), ErrorText(value));
  }
  return out;
}

}  // namespace

absl::string_view FallbackReason(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
    case absl::StatusCode::kCancelled:
    case absl::StatusCode::kDeadlineExceeded:
      return "";
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      return "REQUEST_INVALID";
    case absl::StatusCode::kResourceExhausted:
      return "LIMIT_EXCEEDED";
    case absl::StatusCode::kUnauthenticated:
      return "UNAUTHENTICATED";
    case absl::StatusCode::kPermissionDenied:
      return "PERMISSION_DENIED";
    default:
      return "INTERNAL";
  }
}

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  BoundedError error = Bound(status, /*lead_with_reason=*/true);
  google::rpc::Status details;
  details.set_code(static_cast<int>(error.code));
  details.set_message(error.message);
  if (!error.reason.empty()) {
    google::rpc::ErrorInfo info;
    info.set_reason(error.reason);
    info.set_domain(kErrorDomain);
    // What the Status weighs without metadata: its code, its message and
    // the Any around the ErrorInfo (type URL, tags and lengths).
    const size_t base = details.ByteSizeLong() + info.ByteSizeLong() + 64;
    for (const auto& [key, value] : error.metadata) {
      auto& metadata = *info.mutable_metadata();
      metadata[key] = value;
      // An entry that would push the detail past its bound is left out;
      // a shorter one after it may still fit.
      if (base + info.ByteSizeLong() > kMaxErrorDetailBytes) {
        metadata.erase(key);
      }
    }
    details.add_details()->PackFrom(info);
  }
  return grpc::Status(static_cast<grpc::StatusCode>(error.code),
                      std::move(error.message), details.SerializeAsString());
}

hub::v1::ErrorStatus ToErrorStatus(const absl::Status& status) {
  hub::v1::ErrorStatus out;
  if (status.ok()) return out;
  BoundedError error = Bound(status, /*lead_with_reason=*/false);
  out.set_code(static_cast<int>(error.code));
  hub::v1::ErrorReason reason = hub::v1::ERROR_REASON_UNSPECIFIED;
  hub::v1::ErrorReason_Parse(absl::StrCat("ERROR_REASON_", error.reason),
                             &reason);
  out.set_reason(reason);
  out.set_message(std::move(error.message));
  size_t size = out.ByteSizeLong();
  for (auto& [key, value] : error.metadata) {
    const size_t entry = key.size() + value.size() + 8;
    if (size + entry > kMaxErrorDetailBytes) continue;
    size += entry;
    (*out.mutable_metadata())[std::move(key)] = std::move(value);
  }
  return out;
}

grpc::ServerUnaryReactor* FinishUnary(grpc::CallbackServerContext* context,
                                      const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

}  // namespace hub
