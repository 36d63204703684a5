// HubClient: a thin, typed, thread-safe wrapper over the hub.v1 services
// (HubService, PresenceService, RoleService, MessageService,
// ReservationService, JobService, AdminService's backup).
//
// Every unary call gets a deadline (HubClientOptions::default_deadline unless
// the call's CallOptions say otherwise) and returns absl::StatusOr; a failure
// keeps the gRPC code and message and carries hub's google.rpc.ErrorInfo
// (ReasonOf / ErrorMetadata in hub_error.h). The streams (Attach, WatchRoles)
// are opened raw here; PresenceSession and RoleWatcher manage them.
#ifndef HUB_CLIENTS_CPP_HUB_CLIENT_H_
#define HUB_CLIENTS_CPP_HUB_CLIENT_H_

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>
#include <grpcpp/support/sync_stream.h>

#include <memory>
#include <optional>
#include <ostream>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "clients/cpp/hub_error.h"
#include "hub/v1/admin.grpc.pb.h"
#include "hub/v1/hub.grpc.pb.h"
#include "hub/v1/job.grpc.pb.h"
#include "hub/v1/message.grpc.pb.h"
#include "hub/v1/presence.grpc.pb.h"
#include "hub/v1/reservation.grpc.pb.h"
#include "hub/v1/role_service.grpc.pb.h"

namespace hub::client {

// The address every hub tool uses when none is given.
inline constexpr char kDefaultHubAddress[] = "127.0.0.1:27889";

struct HubClientOptions {
  // host:port of hubd.
  std::string address = kDefaultHubAddress;
  // TLS (docs/design/auth.md). On when `tls` is true or a CA is given; the
  // hub's certificate is checked against tls_root_certs_pem (PEM text; empty:
  // the system's roots). A client certificate and key (PEM text) are sent for
  // mutual TLS. ReadPemFile() reads them from files.
  bool tls = false;
  std::string tls_root_certs_pem;
  std::string tls_cert_chain_pem;
  std::string tls_private_key_pem;
  // The name the hub's certificate must carry when it differs from the
  // address's host (e.g. dialling an IP of a host named in the certificate).
  std::string tls_server_name;
  // Bearer token sent as `authorization: Bearer <token>` on every call and
  // stream (the hub's --token_file). Empty: none.
  std::string token;
  // Deadline of a unary call whose CallOptions give none. Must be positive.
  absl::Duration default_deadline = absl::Seconds(10);
  // Upper bound of gRPC's own reconnect backoff on the channel (gRPC's
  // default grows to 120 s). While the hub is down the channel tries to
  // connect about this often, so it bounds how long a client that waits for
  // the channel (WaitForConnected, PresenceSession) stays away from a hub
  // that came back: docs/RELIABILITY.md.
  absl::Duration max_reconnect_backoff = absl::Milliseconds(500);
};

// Per-call overrides.
struct CallOptions {
  // The call's deadline, counted from the call's start. Absent: the client's
  // default_deadline.
  std::optional<absl::Duration> deadline;
  // Wait for the channel to become ready (within the deadline) instead of
  // failing at once with UNAVAILABLE while the hub is unreachable.
  bool wait_for_ready = false;
};

class HubClient {
 public:
  explicit HubClient(HubClientOptions options = {});
  // Uses an existing channel; options.address is ignored.
  HubClient(std::shared_ptr<grpc::Channel> channel, HubClientOptions options);

  HubClient(const HubClient&) = delete;
  HubClient& operator=(const HubClient&) = delete;

  const HubClientOptions& options() const { return options_; }
  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }

  // Waits up to `timeout` for the channel to be connected to the hub,
  // starting a connection attempt if there is none; true once connected
  // (at once when it already is). The waiting thread also runs the
  // channel's I/O: with gRPC's synchronous API nothing else does, so a
  // connection attempt that no thread waits for completes only when gRPC's
  // backup poller comes by (every 5 s). Retry loops wait here rather than
  // sleep and fail fast against a channel in backoff.
  bool WaitForConnected(absl::Duration timeout) const;

  // ---- HubService ----
  absl::StatusOr<hub::v1::GetStatusResponse> GetStatus(
      const hub::v1::GetStatusRequest& request = {},
      const CallOptions& call = {}) const;
  absl::StatusOr<hub::v1::EncodeRoleKeyResponse> EncodeRoleKey(
      const hub::v1::EncodeRoleKeyRequest& request,
      const CallOptions& call = {}) const;
  absl::StatusOr<hub::v1::DecodeRoleKeyResponse> DecodeRoleKey(
      const hub::v1::DecodeRoleKeyRequest& request,
      const CallOptions& call = {}) const;

  // ---- PresenceService ----
  absl::StatusOr<hub::v1::RegisterAgentResponse> RegisterAgent(
      const hub::v1::RegisterAgentRequest& request,
      const CallOptions& call = {}) const;
  absl::StatusOr<hub::v1::HeartbeatResponse> Heartbeat(
      const hub::v1::HeartbeatRequest& request,
      const CallOptions& call = {}) const;
  absl::StatusOr<hub::v1::DeregisterResponse> Deregister(
      const hub::v1::DeregisterRequest& request,
      const CallOptions& call = {}) const;
  absl::StatusOr<hub::v1::GetAgentResponse> GetAgent(
      const hub::v1::GetAgentRequest& request,
      const CallOptions& call = {}) const;
  absl::StatusOr<hub::v1::ListAgentsResponse> ListAgents(
      const hub::v1::ListAgentsRequest& request,
      const CallOptions& call = {}) const;

  // ---- RoleService ----
  absl::StatusOr<hub::v1::ReserveRoleResponse> ReserveRole(
      const hub::v1::ReserveRoleRequest& request,
      const CallOptions& call = {}) const;
  absl::StatusOr<hub::v1::CompareAndSetRoleResponse> CompareAndSetRole(
      const hub::v1::CompareAndSetRoleRequest& request,
      const CallOptions& call = {}) const;
  absl::StatusOr<hub::v1::GetRoleResponse> GetRole(
      const hub::v1::GetRoleRequest& request,
      const CallOptions& call = {}) const;
  absl::StatusOr<hub::v1::ListRolesResponse> ListRoles(
      const hub::v1::ListRolesRequest& request,
      const CallOptions& call = {}) const;
  absl::StatusOr<hub::v1::EnsureRoleResponse> EnsureRole(
      const hub::v1::EnsureRoleRequest& request,
      const CallOptions& call = {}) const;
  absl::StatusOr<hub::v1::AckRoleActivationResponse> AckRoleActivation(
      const hub::v1::AckRoleActivationRequest& request,
      const CallOptions& call = {}) const;
  absl::StatusOr<hub::v1::UpsertRoleCandidateResponse> UpsertRoleCandidate(
      const hub::v1::UpsertRoleCandidateRequest& request,
      const CallOptions& call = {}) const;
  absl::StatusOr<hub::v1::ListRoleCandidatesResponse> ListRoleCandidates(
      const hub::v1::ListRoleCandidatesRequest& request,
      const CallOptions& call = {}) const;
  absl::StatusOr<hub::v1::ReportCandidateProbeResponse> ReportCandidateProbe(
      const hub::v1::ReportCandidateProbeRequest& request,
      const CallOptions& call = {}) const;
  absl::StatusOr<hub::v1::CloseRoleScopeResponse> CloseRoleScope(
      const hub::v1::CloseRoleScopeRequest& request,
      const CallOptions& call = {}) const;
  absl::StatusOr<hub::v1::ListClosedScopesResponse> ListClosedScopes(
      const hub::v1::ListClosedScopesRequest& request,
      const CallOptions& call = {}) const;

  // ---- MessageService ----
  absl::StatusOr<hub::v1::PublishResponse> Publish(
      const hub::v1::PublishRequest& request,
      const CallOptions& call = {}) const;
  absl::StatusOr<hub::v1::AckResponse> Ack(const hub::v1::AckRequest& request,
                                           const CallOptions& call = {}) const;
  absl::StatusOr<hub::v1::ListPendingResponse> ListPending(
      const hub::v1::ListPendingRequest& request,
      const CallOptions& call = {}) const;
  absl::StatusOr<hub::v1::ListDeadLettersResponse> ListDeadLetters(
      const hub::v1::ListDeadLettersRequest& request,
      const CallOptions& call = {}) const;
  absl::StatusOr<hub::v1::RedriveDeadLetterResponse> RedriveDeadLetter(
      const hub::v1::RedriveDeadLetterRequest& request,
      const CallOptions& call = {}) const;
  // Ask waits for an answer (up to request.await_timeout, default 30 s): with
  // no explicit call deadline, the deadline is await_timeout + 5 s.
  absl::StatusOr<hub::v1::AskResponse> Ask(const hub::v1::AskRequest& request,
                                           const CallOptions& call = {}) const;
  absl::StatusOr<hub::v1::ListTraceResponse> ListTrace(
      const hub::v1::ListTraceRequest& request,
      const CallOptions& call = {}) const;

  // ---- ReservationService ----
  absl::StatusOr<hub::v1::ReserveResponse> Reserve(
      const hub::v1::ReserveRequest& request,
      const CallOptions& call = {}) const;
  absl::StatusOr<hub::v1::RenewReservationResponse> RenewReservation(
      const hub::v1::RenewReservationRequest& request,
      const CallOptions& call = {}) const;
  absl::StatusOr<hub::v1::ReleaseReservationResponse> ReleaseReservation(
      const hub::v1::ReleaseReservationRequest& request,
      const CallOptions& call = {}) const;
  absl::StatusOr<hub::v1::ListReservationsResponse> ListReservations(
      const hub::v1::ListReservationsRequest& request,
      const CallOptions& call = {}) const;
  absl::StatusOr<hub::v1::CheckReservationsResponse> CheckReservations(
      const hub::v1::CheckReservationsRequest& request,
      const CallOptions& call = {}) const;
  absl::StatusOr<hub::v1::ForceReleaseReservationResponse>
  ForceReleaseReservation(
      const hub::v1::ForceReleaseReservationRequest& request,
      const CallOptions& call = {}) const;

  // ---- JobService ----
  absl::StatusOr<hub::v1::CreateJobResponse> CreateJob(
      const hub::v1::CreateJobRequest& request,
      const CallOptions& call = {}) const;
  absl::StatusOr<hub::v1::ClaimJobResponse> ClaimJob(
      const hub::v1::ClaimJobRequest& request,
      const CallOptions& call = {}) const;
  absl::StatusOr<hub::v1::HeartbeatJobResponse> HeartbeatJob(
      const hub::v1::HeartbeatJobRequest& request,
      const CallOptions& call = {}) const;
  absl::StatusOr<hub::v1::CompleteJobResponse> CompleteJob(
      const hub::v1::CompleteJobRequest& request,
      const CallOptions& call = {}) const;
  absl::StatusOr<hub::v1::FailJobResponse> FailJob(
      const hub::v1::FailJobRequest& request,
      const CallOptions& call = {}) const;
  absl::StatusOr<hub::v1::GetJobResponse> GetJob(
      const hub::v1::GetJobRequest& request,
      const CallOptions& call = {}) const;
  absl::StatusOr<hub::v1::ListJobsResponse> ListJobs(
      const hub::v1::ListJobsRequest& request,
      const CallOptions& call = {}) const;
  absl::StatusOr<hub::v1::CancelJobResponse> CancelJob(
      const hub::v1::CancelJobRequest& request,
      const CallOptions& call = {}) const;
  absl::StatusOr<hub::v1::RetryJobResponse> RetryJob(
      const hub::v1::RetryJobRequest& request,
      const CallOptions& call = {}) const;

  // ---- AdminService ----
  // Streams a backup of the hub's database into `out` (docs/operations.md);
  // returns the bytes written. DATA_LOSS when the stream ended short of the
  // size the hub announced. The deadline (default: the client's) covers the
  // whole transfer: give a large database a longer one.
  absl::StatusOr<int64_t> BackupStore(std::ostream& out,
                                      const CallOptions& call = {}) const;

  // ---- Streams (no deadline; cancel through `context`) ----
  // Opens a presence stream. `context` must outlive the stream.
  std::unique_ptr<
      grpc::ClientReaderWriter<hub::v1::AttachRequest, hub::v1::AttachResponse>>
  Attach(grpc::ClientContext* context) const;
  // Opens a role watch. `context` must outlive the stream.
  std::unique_ptr<grpc::ClientReader<hub::v1::WatchRolesResponse>> WatchRoles(
      grpc::ClientContext* context,
      const hub::v1::WatchRolesRequest& request) const;
  // Opens a reservation watch. `context` must outlive the stream.
  std::unique_ptr<grpc::ClientReader<hub::v1::WatchReservationsResponse>>
  WatchReservations(grpc::ClientContext* context,
                    const hub::v1::WatchReservationsRequest& request) const;

 private:
  template <typename Stub, typename Request, typename Response>
  absl::StatusOr<Response> Unary(
      Stub* stub,
      grpc::Status (Stub::*method)(grpc::ClientContext*, const Request&,
                                   Response*),
      const Request& request, const CallOptions& call) const;

  HubClientOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<hub::v1::HubService::Stub> hub_;
  std::unique_ptr<hub::v1::PresenceService::Stub> presence_;
  std::unique_ptr<hub::v1::RoleService::Stub> roles_;
  std::unique_ptr<hub::v1::MessageService::Stub> messages_;
  std::unique_ptr<hub::v1::AdminService::Stub> admin_;
  std::unique_ptr<hub::v1::ReservationService::Stub> reservations_;
  std::unique_ptr<hub::v1::JobService::Stub> jobs_;
};

// A channel to `options.address` with the client's channel arguments, TLS
// credentials and bearer token.
std::shared_ptr<grpc::Channel> CreateHubChannel(
    const HubClientOptions& options);

// The contents of a PEM file (for the tls_* options); INVALID_ARGUMENT naming
// the file when it cannot be read or holds no PEM block.
absl::StatusOr<std::string> ReadPemFile(const std::string& path);

// A CompareAndSetRole of `row`'s role guarded by all four parts of `row` as
// read (version, epoch, activation_seq, activation_id or none); no patch:
// the caller adds it. Any write to the role since `row` makes it fail.
hub::v1::CompareAndSetRoleRequest CasGuardedBy(const hub::v1::Role& row);

}  // namespace hub::client

#endif  // HUB_CLIENTS_CPP_HUB_CLIENT_H_
