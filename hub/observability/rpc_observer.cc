#include "hub/observability/rpc_observer.h"

#include <grpcpp/support/status.h>

#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "hub/observability/log.h"
#include "hub/v1/errors.pb.h"
#include "hub/v1/hub.pb.h"
#include "hub/v1/message.pb.h"
#include "hub/v1/presence.pb.h"

namespace hub {
namespace {

using grpc::experimental::InterceptionHookPoints;
using grpc::experimental::InterceptorBatchMethods;
using grpc::experimental::ServerRpcInfo;

constexpr absl::string_view kPresence = "hub.v1.PresenceService/";
constexpr absl::string_view kMessage = "hub.v1.MessageService/";

struct Failure {
  std::string reason;
  std::vector<std::pair<std::string, std::string>> metadata;
};

// The hub's ErrorInfo from a status's details (error_mapping.cc packs it).
Failure FailureOf(const grpc::Status& status) {
  Failure failure;
  google::rpc::Status details;
  if (status.error_details().empty() ||
      !details.ParseFromString(status.error_details())) {
    return failure;
  }
  for (const auto& any : details.details()) {
    google::rpc::ErrorInfo info;
    if (any.UnpackTo(&info)) {
      failure.reason = info.reason();
      for (const auto& [k, v] : info.metadata()) {
        failure.metadata.emplace_back(k, v);
      }
      break;
    }
  }
  return failure;
}

// The interceptor: a CallObserver fed from the call's hook points.
class RpcObserver final : public grpc::experimental::Interceptor {
 public:
  RpcObserver(HubMetrics* metrics, ServerRpcInfo* info)
      : call_(metrics, info->method() ? info->method() : "",
              info->type() != ServerRpcInfo::Type::UNARY) {}

  void Intercept(InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            InterceptionHookPoints::POST_RECV_MESSAGE)) {
      call_.Received(methods->GetRecvMessage());
    }
    if (methods->QueryInterceptionHookPoint(
            InterceptionHookPoints::PRE_SEND_MESSAGE)) {
      call_.Sending(methods->GetSendMessage());
    }
    if (methods->QueryInterceptionHookPoint(
            InterceptionHookPoints::PRE_SEND_STATUS)) {
      call_.Finished(methods->GetSendStatus());
    }
    methods->Proceed();
  }

 private:
  CallObserver call_;
};

}  // namespace

CallObserver::CallObserver(HubMetrics* metrics, absl::string_view method,
                           bool streaming)
    : metrics_(metrics),
      // "/pkg.Service/Method" -> "pkg.Service/Method"
      method_(absl::StripPrefix(method, "/")),
      streaming_(streaming),
      start_(absl::Now()) {
  if (streaming_) metrics_->open_streams->Add({method_}, 1);
}

CallObserver::~CallObserver() {
  if (streaming_) metrics_->open_streams->Add({method_}, -1);
  // A call that ended without a status (the client went away).
  if (!finished_) Finished(grpc::Status(grpc::StatusCode::CANCELLED, ""));
}

bool CallObserver::Is(absl::string_view service, absl::string_view name) const {
  return method_.size() == service.size() + name.size() &&
         absl::StartsWith(method_, service) && absl::EndsWith(method_, name);
}

// Requests are read only where a reply's meaning depends on them.
void CallObserver::Received(const void* message) {
  if (message == nullptr) return;
  if (Is(kMessage, "ListPending")) {
    peek_ = static_cast<const v1::ListPendingRequest*>(message)->peek();
  } else if (Is(kPresence, "Attach")) {
    const auto* frame = static_cast<const v1::AttachRequest*>(message);
    if (frame->has_hello()) agent_id_ = frame->hello().agent_id();
  }
}

void CallObserver::Sending(const void* message) {
  if (message == nullptr) return;
  if (Is(kPresence, "Attach")) {
    const auto* frame = static_cast<const v1::AttachResponse*>(message);
    if (frame->has_event() && frame->event().has_message()) {
      metrics_->messages_delivered->Add({"stream"});
    } else if (frame->has_message_ack_result()) {
      metrics_->messages_acked->Add(
          {}, frame->message_ack_result().acked_message_ids_size());
    } else if (frame->has_frame_error()) {
      FrameRejected(frame->frame_error());
    }
  } else if (Is(kMessage, "Publish") || Is(kMessage, "Ask")) {
    metrics_->messages_published->Add({});
  } else if (Is(kMessage, "Ack")) {
    metrics_->messages_acked->Add({},
                                  static_cast<const v1::AckResponse*>(message)
                                      ->result()
                                      .acked_message_ids_size());
  } else if (Is(kMessage, "ListPending") && !peek_) {
    metrics_->messages_delivered->Add(
        {"list_pending"}, static_cast<const v1::ListPendingResponse*>(message)
                              ->deliveries_size());
  } else if (Is(kPresence, "RegisterAgent")) {
    const auto* reply = static_cast<const v1::RegisterAgentResponse*>(message);
    log::Info("agent_registered",
              {{"agent_id", reply->agent().agent_id()},
               {"generation", reply->presence_generation()},
               {"cli", v1::AgentCli_Name(reply->agent().cli())},
               {"project_id", reply->agent().project_id()},
               {"ttl_ms", reply->heartbeat_ttl().seconds() * 1000 +
                              reply->heartbeat_ttl().nanos() / 1000000}});
  }
}

// A client frame on Attach that was refused while the stream stays open
// (e.g. a stale generation on a message_ack frame).
void CallObserver::FrameRejected(const v1::ErrorStatus& error) {
  const std::string reason(
      absl::StripPrefix(v1::ErrorReason_Name(error.reason()), "ERROR_REASON_"));
  if (!IsFencingReason(reason)) return;
  metrics_->fencing_rejections->Add({reason});
  log::Info("fencing_rejected", {{"method", method_},
                                 {"frame", "frame_error"},
                                 {"reason", reason},
                                 {"agent_id", agent_id_},
                                 {"message", error.message()}});
}

void CallObserver::Finished(const grpc::Status& status) {
  if (finished_) return;
  finished_ = true;
  const std::string code(StatusCodeName(status.error_code()));
  metrics_->rpc_handled->Add({method_, code});
  if (!streaming_) {
    metrics_->rpc_seconds->Observe({method_, code},
                                   absl::ToDoubleSeconds(absl::Now() - start_));
  }
  if (status.ok()) return;
  const Failure failure = FailureOf(status);
  metrics_->rpc_failures->Add({method_, code, failure.reason});
  const bool fenced = IsFencingReason(failure.reason);
  if (fenced) metrics_->fencing_rejections->Add({failure.reason});
  const log::Level level = fenced ? log::Level::kInfo : log::Level::kDebug;
  if (!log::Enabled(level)) return;
  std::string metadata;
  // A unary call names no agent of its own: the refusal's metadata may
  // (a stale Deregister or Heartbeat names its agent_id).
  std::string agent_id = agent_id_;
  for (const auto& [k, v] : failure.metadata) {
    absl::StrAppend(&metadata, metadata.empty() ? "" : ",", k, ":", v);
    if (k == "agent_id" && agent_id.empty()) agent_id = v;
  }
  log::Event(level, fenced ? "fencing_rejected" : "rpc_failed",
             {{"method", method_},
              {"code", code},
              {"reason", failure.reason},
              {"agent_id", agent_id},
              {"metadata", metadata},
              {"message", status.error_message()}});
}

grpc::experimental::Interceptor* RpcObserverFactory::CreateServerInterceptor(
    ServerRpcInfo* info) {
  // The presence stream observes itself (PresenceServiceImpl): an
  // interceptor on a stream costs every frame an extra trip through the
  // completion queue.
  if (info->method() != nullptr &&
      absl::string_view(info->method()) == kSelfObservedAttach) {
    return nullptr;
  }
  return new RpcObserver(metrics_, info);
}

absl::string_view StatusCodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return "OK";
    case grpc::StatusCode::CANCELLED:
      return "CANCELLED";
    case grpc::StatusCode::UNKNOWN:
      return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND:
      return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS:
      return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED:
      return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION:
      return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED:
      return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE:
      return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED:
      return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL:
      return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE:
      return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS:
      return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED:
      return "UNAUTHENTICATED";
    default:
      return "UNKNOWN";
  }
}

bool IsFencingReason(absl::string_view reason) {
  return absl::StartsWith(reason, "STALE_") || reason == "CAS_CONFLICT" ||
         reason == "STORE_FINGERPRINT_MISMATCH" ||
         reason == "PRESENCE_STREAM_REPLACED";
}

}  // namespace hub
