#include "tests/rpc_caller.h"

#include <grpcpp/client_context.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"

namespace hub::testing {

HubStubs::HubStubs(std::shared_ptr<grpc::Channel> c)
    : channel(std::move(c)),
      hub(hub::v1::HubService::NewStub(channel)),
      presence(hub::v1::PresenceService::NewStub(channel)),
      roles(hub::v1::RoleService::NewStub(channel)),
      messages(hub::v1::MessageService::NewStub(channel)) {}

grpc::Status FromErrorStatus(const hub::v1::ErrorStatus& error) {
  google::rpc::ErrorInfo info;
  info.set_domain("hub.v1");
  std::string reason = hub::v1::ErrorReason_Name(error.reason());
  if (absl::StartsWith(reason, "ERROR_REASON_")) reason = reason.substr(13);
  info.set_reason(reason);
  for (const auto& [key, value] : error.metadata()) {
    (*info.mutable_metadata())[key] = value;
  }
  google::rpc::Status details;
  details.set_code(error.code());
  details.set_message(error.message());
  details.add_details()->PackFrom(info);
  return grpc::Status(static_cast<grpc::StatusCode>(error.code()),
                      error.message(), details.SerializeAsString());
}

namespace {

// Text that does not parse is expected (fuzz input): no log line for it.
class QuietErrors : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int, int, const std::string&) override {}
};
QuietErrors kQuiet;

bool Parse(const std::string& bytes, bool text,
           google::protobuf::Message* message) {
  if (text) {
    google::protobuf::TextFormat::Parser parser;
    parser.AllowPartialMessage(true);
    parser.RecordErrorsTo(&kQuiet);
    return parser.ParseFromString(bytes, message);
  }
  return message->ParseFromString(bytes);
}

template <typename Stub, typename Request, typename Response>
std::optional<grpc::Status> Unary(
    Stub* stub,
    grpc::Status (Stub::*method)(grpc::ClientContext*, const Request&,
                                 Response*),
    const std::string& bytes, bool text,
    const std::function<void(Request&)>& tame = nullptr) {
  Request request;
  if (!Parse(bytes, text, &request)) return std::nullopt;
  if (tame) tame(request);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
  Response response;
  return (stub->*method)(&context, request, &response);
}

std::optional<grpc::Status> Attach(HubStubs* hub, const std::string& bytes,
                                   bool text) {
  std::vector<hub::v1::AttachRequest> frames;
  if (text) {
    for (absl::string_view part : absl::StrSplit(bytes, "\n---\n")) {
      if (!Parse(std::string(part), true, &frames.emplace_back())) {
        return std::nullopt;
      }
    }
  } else {
    for (size_t i = 0; i < bytes.size();) {
      const size_t length = static_cast<uint8_t>(bytes[i]);
      if (!Parse(bytes.substr(i + 1, length), false, &frames.emplace_back())) {
        return std::nullopt;
      }
      i += 1 + length;
    }
  }
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
  auto stream = hub->presence->Attach(&context);
  for (const hub::v1::AttachRequest& frame : frames) {
    if (!stream->Write(frame)) break;
  }
  stream->WritesDone();
  hub::v1::AttachResponse response;
  std::optional<grpc::Status> first_error;
  while (stream->Read(&response)) {
    if (response.has_frame_error() && !first_error.has_value()) {
      first_error = FromErrorStatus(response.frame_error());
    }
  }
  grpc::Status end = stream->Finish();
  return first_error.has_value() ? *first_error : end;
}

std::optional<grpc::Status> WatchRoles(HubStubs* hub, const std::string& bytes,
                                       bool text) {
  hub::v1::WatchRolesRequest request;
  if (!Parse(bytes, text, &request)) return std::nullopt;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
  auto reader = hub->roles->WatchRoles(&context, request);
  hub::v1::WatchRolesResponse response;
  while (reader->Read(&response)) {
    if (response.has_snapshot_end()) {
      context.TryCancel();
      while (reader->Read(&response)) {
      }
      grpc::Status s = reader->Finish();
      return s.error_code() == grpc::StatusCode::CANCELLED ? grpc::Status::OK
                                                           : s;
    }
  }
  return reader->Finish();
}

// Asks wait for an answer: at most a moment here.
void TameAsk(hub::v1::AskRequest& request) {
  const google::protobuf::Duration& wait = request.await_timeout();
  if (!request.has_await_timeout() || wait.seconds() > 0 ||
      (wait.seconds() == 0 && wait.nanos() > 100'000'000)) {
    request.mutable_await_timeout()->set_seconds(0);
    request.mutable_await_timeout()->set_nanos(100'000'000);
  }
}

}  // namespace

std::optional<grpc::Status> CallRpc(HubStubs* h, int rpc,
                                    const std::string& bytes, bool text) {
  using H = hub::v1::HubService::Stub;
  using P = hub::v1::PresenceService::Stub;
  using R = hub::v1::RoleService::Stub;
  using M = hub::v1::MessageService::Stub;
  switch (static_cast<Rpc>(rpc)) {
    case Rpc::kGetStatus:
      return Unary(h->hub.get(), &H::GetStatus, bytes, text);
    case Rpc::kEncodeRoleKey:
      return Unary(h->hub.get(), &H::EncodeRoleKey, bytes, text);
    case Rpc::kDecodeRoleKey:
      return Unary(h->hub.get(), &H::DecodeRoleKey, bytes, text);
    case Rpc::kRegisterAgent:
      return Unary(h->presence.get(), &P::RegisterAgent, bytes, text);
    case Rpc::kHeartbeat:
      return Unary(h->presence.get(), &P::Heartbeat, bytes, text);
    case Rpc::kDeregister:
      return Unary(h->presence.get(), &P::Deregister, bytes, text);
    case Rpc::kGetAgent:
      return Unary(h->presence.get(), &P::GetAgent, bytes, text);
    case Rpc::kListAgents:
      return Unary(h->presence.get(), &P::ListAgents, bytes, text);
    case Rpc::kAttach:
      return Attach(h, bytes, text);
    case Rpc::kReserveRole:
      return Unary(h->roles.get(), &R::ReserveRole, bytes, text);
    case Rpc::kCompareAndSetRole:
      return Unary(h->roles.get(), &R::CompareAndSetRole, bytes, text);
    case Rpc::kGetRole:
      return Unary(h->roles.get(), &R::GetRole, bytes, text);
    case Rpc::kListRoles:
      return Unary(h->roles.get(), &R::ListRoles, bytes, text);
    case Rpc::kWatchRoles:
      return WatchRoles(h, bytes, text);
    case Rpc::kEnsureRole:
      return Unary(h->roles.get(), &R::EnsureRole, bytes, text);
    case Rpc::kAckRoleActivation:
      return Unary(h->roles.get(), &R::AckRoleActivation, bytes, text);
    case Rpc::kUpsertRoleCandidate:
      return Unary(h->roles.get(), &R::UpsertRoleCandidate, bytes, text);
    case Rpc::kListRoleCandidates:
      return Unary(h->roles.get(), &R::ListRoleCandidates, bytes, text);
    case Rpc::kReportCandidateProbe:
      return Unary(h->roles.get(), &R::ReportCandidateProbe, bytes, text);
    case Rpc::kPublish:
      return Unary(h->messages.get(), &M::Publish, bytes, text);
    case Rpc::kAck:
      return Unary(h->messages.get(), &M::Ack, bytes, text);
    case Rpc::kListPending:
      return Unary(h->messages.get(), &M::ListPending, bytes, text);
    case Rpc::kListDeadLetters:
      return Unary(h->messages.get(), &M::ListDeadLetters, bytes, text);
    case Rpc::kAsk:
      return Unary<M, hub::v1::AskRequest, hub::v1::AskResponse>(
          h->messages.get(), &M::Ask, bytes, text, TameAsk);
    case Rpc::kListTrace:
      return Unary(h->messages.get(), &M::ListTrace, bytes, text);
    case Rpc::kCloseRoleScope:
      return Unary(h->roles.get(), &R::CloseRoleScope, bytes, text);
    case Rpc::kListClosedScopes:
      return Unary(h->roles.get(), &R::ListClosedScopes, bytes, text);
    case Rpc::kCount:
      break;
  }
  return std::nullopt;
}

}  // namespace hub::testing
