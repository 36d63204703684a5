// The hub, through hub.v1: RegisterAgent for registration, the Attach
// presence stream (hello, then heartbeat frames answered by lease_ack) for
// heartbeats, ReserveRole + CompareAndSetRole (the four-part guard) for
// compare-and-set. An RPC the hub does not serve yet answers UNIMPLEMENTED,
// which the workload reports as "not_served".
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "hub/v1/presence.grpc.pb.h"
#include "hub/v1/reservation.grpc.pb.h"
#include "hub/v1/role_service.grpc.pb.h"
#include "tools/hubbench/targets.h"

namespace hubbench {
namespace {

using hub::v1::AttachRequest;
using hub::v1::AttachResponse;
using hub::v1::PresenceService;
using hub::v1::RoleService;

hub::v1::RegisterAgentRequest Registration(const std::string& agent_id) {
  hub::v1::RegisterAgentRequest request;
  request.set_agent_id(agent_id);
  request.set_cli(hub::v1::AGENT_CLI_OTHER);
  return request;
}

// Each op registers a new agent, as a fleet of starting agents does.
class RegisterOp : public UnaryOp {
 public:
  RegisterOp(std::shared_ptr<grpc::Channel> channel, std::string id_prefix)
      : stub_(PresenceService::NewStub(channel)),
        id_prefix_(std::move(id_prefix)) {}

  void Start(DoneFn done) override {
    context_ = NewCallContext();
    request_ = Registration(absl::StrCat(id_prefix_, ++count_));
    stub_->async()->RegisterAgent(
        context_.get(), &request_, &reply_, [done](grpc::Status status) {
          done(status.ok() ? Outcome::kDone : Outcome::kFailed, status, -1);
        });
  }

 private:
  std::unique_ptr<PresenceService::Stub> stub_;
  const std::string id_prefix_;
  int64_t count_ = 0;
  std::unique_ptr<grpc::ClientContext> context_;
  hub::v1::RegisterAgentRequest request_;
  hub::v1::RegisterAgentResponse reply_;
};

// CompareAndSetRole with all four guards taken from the last row seen. A
// lost race (ABORTED or FAILED_PRECONDITION) re-reads the row with GetRole
// before the op completes, so the next attempt is current.
class RoleCasOp : public UnaryOp {
 public:
  RoleCasOp(std::shared_ptr<grpc::Channel> channel, hub::v1::RoleKey key,
            hub::v1::Role row)
      : stub_(RoleService::NewStub(channel)),
        key_(std::move(key)),
        row_(std::move(row)) {}

  void Start(DoneFn done) override {
    context_ = NewCallContext();
    request_.Clear();
    *request_.mutable_role_key() = key_;
    request_.set_expected_version(row_.version());
    request_.set_expected_epoch(row_.epoch());
    request_.set_expected_activation_seq(row_.activation_seq());
    if (row_.has_activation_id()) {
      request_.mutable_expected_activation_id()->set_activation_id(
          row_.activation_id());
    } else {
      request_.mutable_expected_activation_id()->set_none(true);
    }
    request_.mutable_patch()->set_retry_count(++writes_);
    request_.mutable_update_mask()->add_paths("retry_count");
    stub_->async()->CompareAndSetRole(
        context_.get(), &request_, &reply_, [this, done](grpc::Status status) {
          if (status.ok()) {
            row_ = reply_.role();
            done(Outcome::kDone, status, row_.version());
          } else if (status.error_code() == grpc::StatusCode::ABORTED ||
                     status.error_code() ==
                         grpc::StatusCode::FAILED_PRECONDITION) {
            Refresh(done);
          } else {
            done(Outcome::kFailed, status, -1);
          }
        });
  }

 private:
  void Refresh(DoneFn done) {
    context_ = NewCallContext();
    get_.Clear();
    *get_.mutable_role_key() = key_;
    stub_->async()->GetRole(context_.get(), &get_, &got_,
                            [this, done](grpc::Status status) {
                              if (!status.ok()) {
                                done(Outcome::kFailed, status, -1);
                                return;
                              }
                              row_ = got_.role();
                              done(Outcome::kLost, status, -1);
                            });
  }

  std::unique_ptr<RoleService::Stub> stub_;
  const hub::v1::RoleKey key_;
  hub::v1::Role row_;
  int64_t writes_ = 0;
  std::unique_ptr<grpc::ClientContext> context_;
  hub::v1::CompareAndSetRoleRequest request_;
  hub::v1::CompareAndSetRoleResponse reply_;
  hub::v1::GetRoleRequest get_;
  hub::v1::GetRoleResponse got_;
};

// Reserve one path of the client's own, exclusively, then release it: a
// lock round trip (both writes durable before their answers).
class ReserveReleaseOp : public UnaryOp {
 public:
  ReserveReleaseOp(std::shared_ptr<grpc::Channel> channel,
                   const std::string& project, const std::string& agent_id,
                   int client)
      : stub_(hub::v1::ReservationService::NewStub(channel)) {
    reserve_.set_project_id(project);
    reserve_.set_agent_id(agent_id);
    reserve_.add_patterns(absl::StrCat("hubbench/lock/", client));
    reserve_.set_mode(hub::v1::RESERVATION_MODE_EXCLUSIVE);
    release_.set_agent_id(agent_id);
  }

  void Start(DoneFn done) override {
    context_ = NewCallContext();
    stub_->async()->Reserve(
        context_.get(), &reserve_, &reserved_,
        [this, done](grpc::Status status) {
          if (!status.ok()) return done(Outcome::kFailed, status, -1);
          context_ = NewCallContext();
          release_.set_reservation_id(reserved_.reservation().reservation_id());
          release_.set_token(reserved_.reservation().token());
          stub_->async()->ReleaseReservation(
              context_.get(), &release_, &released_, [done](grpc::Status s) {
                done(s.ok() ? Outcome::kDone : Outcome::kFailed, s, -1);
              });
        });
  }

 private:
  std::unique_ptr<hub::v1::ReservationService::Stub> stub_;
  std::unique_ptr<grpc::ClientContext> context_;
  hub::v1::ReserveRequest reserve_;
  hub::v1::ReserveResponse reserved_;
  hub::v1::ReleaseReservationRequest release_;
  hub::v1::ReleaseReservationResponse released_;
};

// hello (bound to the registration made at setup), then heartbeat frames.
class AttachProtocol : public StreamProtocol<AttachRequest, AttachResponse> {
 public:
  AttachProtocol(std::string agent_id, int64_t generation)
      : agent_id_(std::move(agent_id)), generation_(generation) {}

  void Start(std::shared_ptr<grpc::Channel> channel,
             grpc::ClientContext* context,
             grpc::ClientBidiReactor<AttachRequest, AttachResponse>* reactor)
      override {
    stub_ = PresenceService::NewStub(channel);
    stub_->async()->Attach(context, reactor);
  }
  bool Hello(AttachRequest* request) override {
    request->set_frame_id(++frame_id_);
    request->mutable_hello()->set_agent_id(agent_id_);
    request->mutable_hello()->set_presence_generation(generation_);
    return true;
  }
  void Ping(AttachRequest* request) override {
    request->Clear();
    request->set_frame_id(++frame_id_);
    request->mutable_heartbeat();
  }
  Answer Classify(const AttachResponse& response, std::string* error) override {
    switch (response.frame_case()) {
      case AttachResponse::kAttached:
      case AttachResponse::kLeaseAck:
        return Answer::kAck;
      case AttachResponse::kFrameError:
        *error = absl::StrCat(
            "frame_error ",
            hub::v1::ErrorReason_Name(response.frame_error().reason()), ": ",
            response.frame_error().message());
        return Answer::kError;
      default:
        return Answer::kIgnore;  // Events: drained, not answered here.
    }
  }

 private:
  std::unique_ptr<PresenceService::Stub> stub_;
  const std::string agent_id_;
  const int64_t generation_;
  int64_t frame_id_ = 0;
};

class HubTarget : public Target {
 public:
  explicit HubTarget(std::string run_id) : run_id_(std::move(run_id)) {}

  std::unique_ptr<UnaryOp> NewRegisterOp(std::shared_ptr<grpc::Channel> channel,
                                         int client) override {
    return std::make_unique<RegisterOp>(
        channel, absl::StrCat("hubbench-", run_id_, "-r", client, "-"));
  }

  absl::StatusOr<std::unique_ptr<UnaryOp>> NewCasOp(
      std::shared_ptr<grpc::Channel> channel, int client, int key) override {
    hub::v1::RoleKey role_key;
    // prj_ + 22 base64url characters: "hb", the run id, the key number.
    role_key.set_project_id(
        absl::StrFormat("prj_hb%s%012d", run_id_, key).substr(0, 26));
    role_key.set_kind(hub::v1::ROLE_KIND_CTO);
    absl::StatusOr<hub::v1::Role> row = ReadOrReserve(channel, role_key);
    if (!row.ok()) return row.status();
    return std::make_unique<RoleCasOp>(channel, role_key, *std::move(row));
  }

  // Registers the client's agent (the holder), then reserves and releases
  // a path of its own in one project per run.
  absl::StatusOr<std::unique_ptr<UnaryOp>> NewLockOp(
      std::shared_ptr<grpc::Channel> channel, int client) override {
    const std::string agent_id =
        absl::StrCat("hubbench-", run_id_, "-l", client);
    const std::string project =
        absl::StrFormat("prj_hb%s%012d", run_id_, 0).substr(0, 26);
    std::unique_ptr<PresenceService::Stub> stub =
        PresenceService::NewStub(channel);
    hub::v1::RegisterAgentRequest request = Registration(agent_id);
    request.set_project_id(project);
    hub::v1::RegisterAgentResponse reply;
    std::unique_ptr<grpc::ClientContext> context = NewCallContext();
    grpc::Status status = stub->RegisterAgent(context.get(), request, &reply);
    if (!status.ok()) return ToAbsl(status);
    return std::make_unique<ReserveReleaseOp>(channel, project, agent_id,
                                              client);
  }

  absl::StatusOr<std::unique_ptr<PingStreamBase>> NewStream(
      std::shared_ptr<grpc::Channel> setup, int index, StreamBoard* board,
      bool hold, absl::Duration max_life) override {
    const std::string agent_id =
        absl::StrCat("hubbench-", run_id_, "-s", index);
    std::unique_ptr<PresenceService::Stub> stub =
        PresenceService::NewStub(setup);
    hub::v1::RegisterAgentResponse reply;
    std::unique_ptr<grpc::ClientContext> context = NewCallContext();
    grpc::Status status =
        stub->RegisterAgent(context.get(), Registration(agent_id), &reply);
    if (!status.ok()) return ToAbsl(status);
    return std::make_unique<PingStream<AttachRequest, AttachResponse>>(
        std::make_unique<AttachProtocol>(agent_id, reply.presence_generation()),
        board, hold, max_life);
  }

 private:
  // The role's row: read it, or create it when absent (clients sharing a key
  // race here; the loser reads the winner's row).
  static absl::StatusOr<hub::v1::Role> ReadOrReserve(
      std::shared_ptr<grpc::Channel> channel, const hub::v1::RoleKey& key) {
    std::unique_ptr<RoleService::Stub> stub = RoleService::NewStub(channel);
    for (int attempt = 0; attempt < 3; ++attempt) {
      hub::v1::GetRoleRequest get;
      *get.mutable_role_key() = key;
      hub::v1::GetRoleResponse got;
      grpc::Status status = stub->GetRole(NewCallContext().get(), get, &got);
      if (status.ok()) return got.role();
      if (status.error_code() != grpc::StatusCode::NOT_FOUND) {
        return ToAbsl(status);
      }
      hub::v1::ReserveRoleRequest reserve;
      *reserve.mutable_role_key() = key;
      reserve.set_expected_version(0);
      hub::v1::ReserveRoleResponse reserved;
      status = stub->ReserveRole(NewCallContext().get(), reserve, &reserved);
      if (status.ok()) return reserved.role();
      if (status.error_code() != grpc::StatusCode::ABORTED) {
        return ToAbsl(status);
      }
    }
    return absl::AbortedError("hub: cannot read or reserve the bench role");
  }

  const std::string run_id_;
};

}  // namespace

std::unique_ptr<Target> NewHubTarget(const std::string& run_id) {
  return std::make_unique<HubTarget>(run_id);
}

}  // namespace hubbench
