// Fuzz target: every RPC of every hub.v1 service, through gRPC against one
// in-process HubServer (the real handlers, validation, mapping and store).
//
// Input: byte 0 picks the RPC (rpc_request_fuzz.h lists them in order), byte
// 1 says how the rest is read: 't' as a text-format request (the seed
// corpus is written that way), anything else as a binary one. For Attach the
// request is an AttachFrames message (its frames are written in order, then
// the stream is half-closed). Bytes that do not parse are ignored.
//
// Invariant: the hub never answers UNKNOWN or INTERNAL, and every refusal
// of a request's content carries an ErrorInfo reason (errors.proto).
#include "tests/fuzz/rpc_request_fuzz.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "google/protobuf/text_format.h"
#include "hub/server.h"
#include "tests/hub_test_util.h"

namespace hub::fuzz {
namespace {

struct Hub {
  std::unique_ptr<HubServer> server;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<hub::v1::HubService::Stub> hub;
  std::unique_ptr<hub::v1::PresenceService::Stub> presence;
  std::unique_ptr<hub::v1::RoleService::Stub> roles;
  std::unique_ptr<hub::v1::MessageService::Stub> messages;
};

// One hub for the whole run: state accumulates across inputs, as it would
// in production.
Hub* TheHub() {
  static Hub* hub = [] {
    const char* dir = std::getenv("TEST_TMPDIR");
    HubServerOptions options;
    options.listen = "127.0.0.1:0";
    options.db_path = absl::StrCat(dir != nullptr ? dir : "/tmp",
                                   "/rpc_request_fuzz_", getpid(), ".sqlite");
    options.synchronous = storage::SqliteStoreOptions::Synchronous::kNormal;
    options.presence.detach_grace = absl::Milliseconds(50);
    options.tick_interval = absl::Milliseconds(20);
    options.limits.requests_per_second = 0;  // the fuzzer is one principal
    // Never wake a real tmux session from fuzz input.
    options.activator.cto_manager_enabled = false;
    options.activator.lead_manager_enabled = false;
    auto server = HubServer::Start(options);
    if (!server.ok()) {
      std::fprintf(stderr, "rpc_request_fuzz: %s\n",
                   server.status().ToString().c_str());
      std::abort();
    }
    auto* h = new Hub;
    h->server = std::move(*server);
    h->channel = grpc::CreateChannel(h->server->address(),
                                     grpc::InsecureChannelCredentials());
    h->hub = hub::v1::HubService::NewStub(h->channel);
    h->presence = hub::v1::PresenceService::NewStub(h->channel);
    h->roles = hub::v1::RoleService::NewStub(h->channel);
    h->messages = hub::v1::MessageService::NewStub(h->channel);
    return h;
  }();
  return hub;
}

bool Parse(const std::string& bytes, bool text,
           google::protobuf::Message* message) {
  if (text) {
    google::protobuf::TextFormat::Parser parser;
    parser.AllowPartialMessage(true);
    return parser.ParseFromString(bytes, message);
  }
  return message->ParseFromString(bytes);
}

void Check(const grpc::Status& status, int rpc) {
  const grpc::StatusCode code = status.error_code();
  bool ok =
      code != grpc::StatusCode::UNKNOWN && code != grpc::StatusCode::INTERNAL;
  if (ok && (code == grpc::StatusCode::INVALID_ARGUMENT ||
             code == grpc::StatusCode::NOT_FOUND ||
             code == grpc::StatusCode::FAILED_PRECONDITION ||
             code == grpc::StatusCode::ABORTED ||
             code == grpc::StatusCode::PERMISSION_DENIED)) {
    ok = !testing::Reason(status).empty();
  }
  if (!ok) {
    std::fprintf(stderr, "rpc_request_fuzz: %s answered %d (%s) reason '%s'\n",
                 RpcName(rpc), static_cast<int>(code),
                 status.error_message().c_str(),
                 testing::Reason(status).c_str());
    std::abort();
  }
}

template <typename Stub, typename Request, typename Response>
grpc::Status Unary(Stub* stub,
                   grpc::Status (Stub::*method)(grpc::ClientContext*,
                                                const Request&, Response*),
                   const std::string& bytes, bool text,
                   const std::function<void(Request&)>& tame = nullptr) {
  Request request;
  if (!Parse(bytes, text, &request)) return grpc::Status::OK;
  if (tame) tame(request);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
  Response response;
  return (stub->*method)(&context, request, &response);
}

grpc::Status Attach(Hub* hub, const std::string& bytes, bool text) {
  std::vector<hub::v1::AttachRequest> frames;
  if (text) {
    for (absl::string_view part : absl::StrSplit(bytes, "\n---\n")) {
      if (!Parse(std::string(part), true, &frames.emplace_back())) {
        return grpc::Status::OK;
      }
    }
  } else {
    for (size_t i = 0; i < bytes.size();) {
      const size_t length = static_cast<uint8_t>(bytes[i]);
      if (!Parse(bytes.substr(i + 1, length), false, &frames.emplace_back())) {
        return grpc::Status::OK;
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
  while (stream->Read(&response)) {
    if (response.has_frame_error()) {
      const hub::v1::ErrorStatus& e = response.frame_error();
      if (e.code() == 0 || e.code() == 2 || e.code() == 13 ||
          e.reason() == hub::v1::ERROR_REASON_UNSPECIFIED) {
        std::fprintf(stderr, "rpc_request_fuzz: Attach frame_error %d %s\n",
                     e.code(), e.message().c_str());
        std::abort();
      }
    }
  }
  return stream->Finish();
}

grpc::Status WatchRoles(Hub* hub, const std::string& bytes, bool text) {
  hub::v1::WatchRolesRequest request;
  if (!Parse(bytes, text, &request)) return grpc::Status::OK;
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
  if (request.await_timeout().seconds() != 0 ||
      request.await_timeout().nanos() > 100'000'000) {
    request.mutable_await_timeout()->set_seconds(0);
    request.mutable_await_timeout()->set_nanos(100'000'000);
  }
}

grpc::Status Call(Hub* h, int rpc, const std::string& bytes, bool text) {
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
    case Rpc::kCount:
      break;
  }
  return grpc::Status::OK;
}

}  // namespace
}  // namespace hub::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const int rpc = data[0] % static_cast<int>(hub::fuzz::Rpc::kCount);
  const bool text = data[1] == 't';
  const std::string bytes(reinterpret_cast<const char*>(data + 2), size - 2);
  hub::fuzz::Check(hub::fuzz::Call(hub::fuzz::TheHub(), rpc, bytes, text), rpc);
  return 0;
}
