#include "clients/cpp/hub_client.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>
#include <grpcpp/support/client_interceptor.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace hub::client {
namespace {

// Adds `authorization: Bearer <token>` to every call's initial metadata.
// An interceptor rather than call credentials: gRPC sends call credentials
// only over TLS, and a loopback hub may take tokens over plaintext.
class BearerTokenInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit BearerTokenInterceptor(const std::string* header)
      : header_(header) {}
  void Intercept(
      grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::
                PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->insert({"authorization", *header_});
    }
    methods->Proceed();
  }

 private:
  const std::string* header_;
};

class BearerTokenFactory final
    : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit BearerTokenFactory(const std::string& token)
      : header_(absl::StrCat("Bearer ", token)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo* /*info*/) override {
    return new BearerTokenInterceptor(&header_);
  }

 private:
  const std::string header_;
};

}  // namespace

absl::StatusOr<std::string> ReadPemFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(absl::StrCat("cannot read ", path));
  }
  std::stringstream text;
  text << in.rdbuf();
  if (text.str().find("-----BEGIN ") == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " holds no PEM block"));
  }
  return text.str();
}

std::shared_ptr<grpc::Channel> CreateHubChannel(
    const HubClientOptions& options) {
  grpc::ChannelArguments args;
  const int max_backoff_ms = std::max(
      1, static_cast<int>(
             absl::ToInt64Milliseconds(options.max_reconnect_backoff)));
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, max_backoff_ms);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS,
              std::min(max_backoff_ms, 100));
  // Despite its name, gRPC C++ (1.51) uses this as the minimum time a
  // connection attempt (TCP connect + HTTP/2 handshake) may take before it
  // is abandoned. Once set to 200 ms, like the backoff: an attempt that no
  // thread was polling for could not finish in time, and every attempt
  // failed with "tcp handshaker shutdown" until the 5 s backup poller
  // happened to run during one (docs/RELIABILITY.md).
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 5000);
  // Every HubClient gets its own connection and reconnect state, as in
  // gRPC's other languages: in C++'s default global pool, channels to the
  // same address share one subchannel, so 64 clients made one TCP
  // connection and a new client inherited an old one's backoff.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  std::shared_ptr<grpc::ChannelCredentials> credentials =
      grpc::InsecureChannelCredentials();
  if (options.tls || !options.tls_root_certs_pem.empty() ||
      !options.tls_cert_chain_pem.empty()) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = options.tls_root_certs_pem;
    ssl.pem_cert_chain = options.tls_cert_chain_pem;
    ssl.pem_private_key = options.tls_private_key_pem;
    credentials = grpc::SslCredentials(ssl);
    if (!options.tls_server_name.empty()) {
      args.SetSslTargetNameOverride(options.tls_server_name);
    }
  }
  std::vector<
      std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
      interceptors;
  if (!options.token.empty()) {
    interceptors.push_back(std::make_unique<BearerTokenFactory>(options.token));
  }
  return grpc::experimental::CreateCustomChannelWithInterceptors(
      options.address, credentials, args, std::move(interceptors));
}

HubClient::HubClient(HubClientOptions options)
    : HubClient(CreateHubChannel(options), options) {}

HubClient::HubClient(std::shared_ptr<grpc::Channel> channel,
                     HubClientOptions options)
    : options_(std::move(options)),
      channel_(std::move(channel)),
      hub_(hub::v1::HubService::NewStub(channel_)),
      presence_(hub::v1::PresenceService::NewStub(channel_)),
      roles_(hub::v1::RoleService::NewStub(channel_)),
      messages_(hub::v1::MessageService::NewStub(channel_)),
      admin_(hub::v1::AdminService::NewStub(channel_)),
      reservations_(hub::v1::ReservationService::NewStub(channel_)),
      jobs_(hub::v1::JobService::NewStub(channel_)) {}

bool HubClient::WaitForConnected(absl::Duration timeout) const {
  return channel_->WaitForConnected(absl::ToChronoTime(absl::Now() + timeout));
}

template <typename Stub, typename Request, typename Response>
absl::StatusOr<Response> HubClient::Unary(
    Stub* stub,
    grpc::Status (Stub::*method)(grpc::ClientContext*, const Request&,
                                 Response*),
    const Request& request, const CallOptions& call) const {
  grpc::ClientContext context;
  const absl::Duration deadline =
      call.deadline.value_or(options_.default_deadline);
  context.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
  context.set_wait_for_ready(call.wait_for_ready);
  Response response;
  absl::Status status =
      FromGrpcStatus((stub->*method)(&context, request, &response));
  if (!status.ok()) return status;
  return response;
}

#define HUB_CLIENT_UNARY(stub, Rpc)                                          \
  absl::StatusOr<hub::v1::Rpc##Response> HubClient::Rpc(                     \
      const hub::v1::Rpc##Request& request, const CallOptions& call) const { \
    return Unary(stub.get(), &std::remove_reference_t<decltype(*stub)>::Rpc, \
                 request, call);                                             \
  }

HUB_CLIENT_UNARY(hub_, GetStatus)
HUB_CLIENT_UNARY(hub_, EncodeRoleKey)
HUB_CLIENT_UNARY(hub_, DecodeRoleKey)
HUB_CLIENT_UNARY(presence_, RegisterAgent)
HUB_CLIENT_UNARY(presence_, Heartbeat)
HUB_CLIENT_UNARY(presence_, Deregister)
HUB_CLIENT_UNARY(presence_, GetAgent)
HUB_CLIENT_UNARY(presence_, ListAgents)
HUB_CLIENT_UNARY(roles_, ReserveRole)
HUB_CLIENT_UNARY(roles_, CompareAndSetRole)
HUB_CLIENT_UNARY(roles_, GetRole)
HUB_CLIENT_UNARY(roles_, ListRoles)
HUB_CLIENT_UNARY(roles_, EnsureRole)
HUB_CLIENT_UNARY(roles_, AckRoleActivation)
HUB_CLIENT_UNARY(roles_, UpsertRoleCandidate)
HUB_CLIENT_UNARY(roles_, ListRoleCandidates)
HUB_CLIENT_UNARY(roles_, ReportCandidateProbe)
HUB_CLIENT_UNARY(roles_, CloseRoleScope)
HUB_CLIENT_UNARY(roles_, ListClosedScopes)
HUB_CLIENT_UNARY(messages_, Publish)
HUB_CLIENT_UNARY(messages_, Ack)
HUB_CLIENT_UNARY(messages_, ListPending)
HUB_CLIENT_UNARY(messages_, ListDeadLetters)
HUB_CLIENT_UNARY(messages_, RedriveDeadLetter)
HUB_CLIENT_UNARY(messages_, ListTrace)
HUB_CLIENT_UNARY(reservations_, Reserve)
HUB_CLIENT_UNARY(reservations_, RenewReservation)
HUB_CLIENT_UNARY(reservations_, ReleaseReservation)
HUB_CLIENT_UNARY(reservations_, ListReservations)
HUB_CLIENT_UNARY(reservations_, CheckReservations)
HUB_CLIENT_UNARY(reservations_, ForceReleaseReservation)
HUB_CLIENT_UNARY(jobs_, CreateJob)
HUB_CLIENT_UNARY(jobs_, ClaimJob)
HUB_CLIENT_UNARY(jobs_, HeartbeatJob)
HUB_CLIENT_UNARY(jobs_, CompleteJob)
HUB_CLIENT_UNARY(jobs_, FailJob)
HUB_CLIENT_UNARY(jobs_, GetJob)
HUB_CLIENT_UNARY(jobs_, ListJobs)
HUB_CLIENT_UNARY(jobs_, CancelJob)
HUB_CLIENT_UNARY(jobs_, RetryJob)

#undef HUB_CLIENT_UNARY

absl::StatusOr<hub::v1::AskResponse> HubClient::Ask(
    const hub::v1::AskRequest& request, const CallOptions& call) const {
  CallOptions effective = call;
  if (!effective.deadline.has_value()) {
    const absl::Duration wait =
        request.has_await_timeout()
            ? absl::Seconds(request.await_timeout().seconds()) +
                  absl::Nanoseconds(request.await_timeout().nanos())
            : absl::Seconds(30);
    effective.deadline = wait + absl::Seconds(5);
  }
  return Unary(messages_.get(), &hub::v1::MessageService::Stub::Ask, request,
               effective);
}

absl::StatusOr<int64_t> HubClient::BackupStore(std::ostream& out,
                                               const CallOptions& call) const {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(
      absl::Now() + call.deadline.value_or(options_.default_deadline)));
  context.set_wait_for_ready(call.wait_for_ready);
  std::unique_ptr<grpc::ClientReader<hub::v1::BackupStoreResponse>> reader =
      admin_->BackupStore(&context, hub::v1::BackupStoreRequest());
  hub::v1::BackupStoreResponse chunk;
  int64_t written = 0;
  int64_t total = -1;
  while (reader->Read(&chunk)) {
    total = chunk.total_bytes();
    out.write(chunk.data().data(),
              static_cast<std::streamsize>(chunk.data().size()));
    written += static_cast<int64_t>(chunk.data().size());
    if (!out) {
      context.TryCancel();
      reader->Finish();
      return absl::DataLossError("writing the backup failed");
    }
  }
  absl::Status status = FromGrpcStatus(reader->Finish());
  if (!status.ok()) return status;
  if (written != total) {
    return absl::DataLossError(
        absl::StrCat("backup ended after ", written, " of ", total, " bytes"));
  }
  return written;
}

std::unique_ptr<
    grpc::ClientReaderWriter<hub::v1::AttachRequest, hub::v1::AttachResponse>>
HubClient::Attach(grpc::ClientContext* context) const {
  return presence_->Attach(context);
}

std::unique_ptr<grpc::ClientReader<hub::v1::WatchRolesResponse>>
HubClient::WatchRoles(grpc::ClientContext* context,
                      const hub::v1::WatchRolesRequest& request) const {
  return roles_->WatchRoles(context, request);
}

std::unique_ptr<grpc::ClientReader<hub::v1::WatchReservationsResponse>>
HubClient::WatchReservations(
    grpc::ClientContext* context,
    const hub::v1::WatchReservationsRequest& request) const {
  return reservations_->WatchReservations(context, request);
}

hub::v1::CompareAndSetRoleRequest CasGuardedBy(const hub::v1::Role& row) {
  hub::v1::CompareAndSetRoleRequest request;
  request.set_role_key_wire(row.role_key_wire());
  request.set_expected_version(row.version());
  request.set_expected_epoch(row.epoch());
  request.set_expected_activation_seq(row.activation_seq());
  if (row.has_activation_id()) {
    request.mutable_expected_activation_id()->set_activation_id(
        row.activation_id());
  } else {
    request.mutable_expected_activation_id()->set_none(true);
  }
  return request;
}

}  // namespace hub::client
