#include "hub/services/reservation_service.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hub/services/error_mapping.h"
#include "hub/services/proto_time.h"
#include "status/status.h"

namespace hub {

namespace {

using hub::v1::ReservationMode;

absl::StatusOr<bool> Exclusive(ReservationMode mode) {
  switch (mode) {
    case hub::v1::RESERVATION_MODE_UNSPECIFIED:
    case hub::v1::RESERVATION_MODE_EXCLUSIVE:
      return true;
    case hub::v1::RESERVATION_MODE_SHARED:
      return false;
    default:
      return InvalidArgumentError("RESERVATION_MODE_INVALID",
                                  absl::StrCat("mode ", static_cast<int>(mode),
                                               " is not a ReservationMode"));
  }
}

ReservationMode ModeOf(bool exclusive) {
  return exclusive ? hub::v1::RESERVATION_MODE_EXCLUSIVE
                   : hub::v1::RESERVATION_MODE_SHARED;
}

}  // namespace

hub::v1::Reservation ReservationToProto(const storage::ReservationRecord& r) {
  hub::v1::Reservation p;
  p.set_reservation_id(r.reservation_id);
  p.set_project_id(r.project_id);
  p.set_agent_id(r.agent_id);
  p.set_presence_generation(r.presence_generation);
  p.set_mode(ModeOf(r.exclusive));
  p.set_token(r.token);
  for (const std::string& pattern : r.patterns) p.add_patterns(pattern);
  p.set_reason(r.reason);
  *p.mutable_created_at() =
      ToProtoTimestamp(absl::FromUnixMillis(r.created_at_ms));
  *p.mutable_expires_at() =
      ToProtoTimestamp(absl::FromUnixMillis(r.expires_at_ms));
  p.set_waiter_count(static_cast<int32_t>(r.waiter_count));
  for (const std::string& agent : r.waiting_agent_ids) {
    p.add_waiting_agent_ids(agent);
  }
  for (const std::string& id : r.waits_for) p.add_waits_for(id);
  return p;
}

namespace {

hub::v1::Reservation ToProto(const storage::ReservationRecord& r) {
  return ReservationToProto(r);
}

hub::v1::ReservationConflict ToProto(const storage::ReservationConflict& c) {
  hub::v1::ReservationConflict p;
  p.set_reservation_id(c.reservation_id);
  p.set_holder_agent_id(c.agent_id);
  p.set_mode(ModeOf(c.exclusive));
  p.set_token(c.token);
  p.set_held_pattern(c.held_pattern);
  p.set_pattern(c.pattern);
  *p.mutable_expires_at() =
      ToProtoTimestamp(absl::FromUnixMillis(c.expires_at_ms));
  return p;
}

std::vector<std::string> Strings(
    const google::protobuf::RepeatedPtrField<std::string>& values) {
  return std::vector<std::string>(values.begin(), values.end());
}

// The TTL field: unset, or a valid duration.
absl::StatusOr<std::optional<absl::Duration>> Ttl(
    bool has, const google::protobuf::Duration& ttl) {
  if (!has) return std::optional<absl::Duration>();
  if (absl::Status s = CheckProtoDuration(ttl, "ttl"); !s.ok()) return s;
  return std::optional<absl::Duration>(FromProtoDuration(ttl));
}

// A Reserve with `wait`: its own reactor, so that a client that goes away
// (cancel, deadline) takes its waiter out of the queue at once.
class WaitingReserve final : public grpc::ServerUnaryReactor {
 public:
  WaitingReserve(ReservationWaits* waits, hub::v1::ReserveResponse* response)
      : waits_(waits), response_(response), id_(waits->NewId()) {}

  void Begin(PathReserveInput in, absl::Duration wait) {
    waits_->Reserve(id_, std::move(in), wait,
                    [this](absl::StatusOr<storage::ReservationRecord> r) {
                      if (r.ok())
                        *response_->mutable_reservation() =
                            ReservationToProto(*r);
                      Finish(ToGrpcStatus(r.status()));
                    });
  }
  void OnCancel() override { waits_->Cancel(id_); }
  void OnDone() override { delete this; }

 private:
  ReservationWaits* const waits_;
  hub::v1::ReserveResponse* const response_;
  const int64_t id_;
};

// The `wait` field: 1 ms .. kMaxReservationWait.
absl::StatusOr<absl::Duration> WaitOf(const google::protobuf::Duration& wait) {
  if (absl::Status s = CheckProtoDuration(wait, "wait"); !s.ok()) {
    return WithMetadata(
        InvalidArgumentError("RESERVATION_WAIT_INVALID", s.message()), "field",
        "wait");
  }
  const absl::Duration d = FromProtoDuration(wait);
  if (d < absl::Milliseconds(1) || d > kMaxReservationWait) {
    return WithMetadata(
        InvalidArgumentError(
            "RESERVATION_WAIT_INVALID",
            absl::StrCat("wait must be 1 ms .. ",
                         absl::FormatDuration(kMaxReservationWait), ", got ",
                         absl::FormatDuration(d))),
        "field", "wait");
  }
  return d;
}

}  // namespace

grpc::ServerUnaryReactor* ReservationServiceImpl::Reserve(
    grpc::CallbackServerContext* context,
    const hub::v1::ReserveRequest* request,
    hub::v1::ReserveResponse* response) {
  absl::StatusOr<Principal> principal =
      admission_->AdmitCall(*context, *request);
  if (!principal.ok()) return FinishUnary(context, principal.status());
  PathReserveInput in;
  absl::StatusOr<bool> exclusive = Exclusive(request->mode());
  if (!exclusive.ok()) return FinishUnary(context, exclusive.status());
  absl::StatusOr<std::optional<absl::Duration>> ttl =
      Ttl(request->has_ttl(), request->ttl());
  if (!ttl.ok()) return FinishUnary(context, ttl.status());
  in.project_id = request->project_id();
  in.agent_id = request->agent_id();
  if (request->has_presence_generation()) {
    in.presence_generation = request->presence_generation();
  }
  in.patterns = Strings(request->patterns());
  in.exclusive = *exclusive;
  in.ttl = *ttl;
  in.reason = request->reason();
  if (request->has_wait()) {
    absl::StatusOr<absl::Duration> wait = WaitOf(request->wait());
    if (!wait.ok()) return FinishUnary(context, wait.status());
    if (waits_ == nullptr) {
      return FinishUnary(context,
                         UnavailableError("HUB_SHUTTING_DOWN",
                                          "this hub cannot wait for paths"));
    }
    auto* waiting = new WaitingReserve(waits_, response);
    waiting->Begin(std::move(in), *wait);
    return waiting;
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  write_pool_->Schedule([this, reactor, response, in = std::move(in)] {
    absl::StatusOr<storage::ReservationRecord> r = book_->Reserve(in);
    if (!r.ok()) {
      reactor->Finish(ToGrpcStatus(r.status()));
      return;
    }
    *response->mutable_reservation() = ToProto(*r);
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

grpc::ServerUnaryReactor* ReservationServiceImpl::RenewReservation(
    grpc::CallbackServerContext* context,
    const hub::v1::RenewReservationRequest* request,
    hub::v1::RenewReservationResponse* response) {
  if (absl::StatusOr<Principal> principal =
          admission_->AdmitCall(*context, *request);
      !principal.ok()) {
    return FinishUnary(context, principal.status());
  }
  absl::StatusOr<std::optional<absl::Duration>> ttl =
      Ttl(request->has_ttl(), request->ttl());
  if (!ttl.ok()) return FinishUnary(context, ttl.status());
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  write_pool_->Schedule([this, reactor, request, response, ttl = *ttl] {
    absl::StatusOr<storage::ReservationRecord> r = book_->Renew(
        request->reservation_id(), request->agent_id(), request->token(), ttl);
    if (!r.ok()) {
      reactor->Finish(ToGrpcStatus(r.status()));
      return;
    }
    *response->mutable_reservation() = ToProto(*r);
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

grpc::ServerUnaryReactor* ReservationServiceImpl::ReleaseReservation(
    grpc::CallbackServerContext* context,
    const hub::v1::ReleaseReservationRequest* request,
    hub::v1::ReleaseReservationResponse* response) {
  if (absl::StatusOr<Principal> principal =
          admission_->AdmitCall(*context, *request);
      !principal.ok()) {
    return FinishUnary(context, principal.status());
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  write_pool_->Schedule([this, reactor, request, response] {
    std::optional<int64_t> token;
    if (request->has_token()) token = request->token();
    absl::StatusOr<std::optional<storage::ReservationRecord>> left =
        book_->Release(request->reservation_id(), request->agent_id(), token,
                       Strings(request->patterns()));
    if (!left.ok()) {
      reactor->Finish(ToGrpcStatus(left.status()));
      return;
    }
    response->set_ended(!left->has_value());
    if (left->has_value()) *response->mutable_reservation() = ToProto(**left);
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

grpc::ServerUnaryReactor* ReservationServiceImpl::ListReservations(
    grpc::CallbackServerContext* context,
    const hub::v1::ListReservationsRequest* request,
    hub::v1::ListReservationsResponse* response) {
  absl::StatusOr<Principal> principal =
      admission_->AdmitCall(*context, *request);
  if (!principal.ok()) return FinishUnary(context, principal.status());
  // A project named is in the token's scope (admission); without one, the
  // list leaves the other projects out (auth.md, "Reads are scoped").
  ReservationListQuery q;
  if (!request->project_id().empty()) {
    q.project_id = request->project_id();
  } else {
    q.projects = ScopeOf(*principal).StoreProjects();
  }
  if (!request->agent_id().empty()) q.agent_id = request->agent_id();
  if (!request->path().empty()) q.path = request->path();
  q.page_size = request->page_size();
  q.page_token = request->page_token();
  absl::StatusOr<ReservationPage> page = book_->List(q);
  if (!page.ok()) return FinishUnary(context, page.status());
  for (const storage::ReservationRecord& r : page->reservations) {
    *response->add_reservations() = ToProto(r);
  }
  response->set_next_page_token(page->next_page_token);
  return FinishUnary(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* ReservationServiceImpl::CheckReservations(
    grpc::CallbackServerContext* context,
    const hub::v1::CheckReservationsRequest* request,
    hub::v1::CheckReservationsResponse* response) {
  absl::StatusOr<Principal> principal =
      admission_->AdmitCall(*context, *request);
  if (!principal.ok()) return FinishUnary(context, principal.status());
  absl::StatusOr<bool> exclusive = Exclusive(request->mode());
  if (!exclusive.ok()) return FinishUnary(context, exclusive.status());
  PathCheckInput in;
  in.project_id = request->project_id();
  if (!request->agent_id().empty()) in.agent_id = request->agent_id();
  in.patterns = Strings(request->patterns());
  in.exclusive = *exclusive;
  in.literal = request->literal();
  absl::StatusOr<std::vector<storage::ReservationConflict>> conflicts =
      book_->Check(in);
  if (!conflicts.ok()) return FinishUnary(context, conflicts.status());
  for (const storage::ReservationConflict& c : *conflicts) {
    *response->add_conflicts() = ToProto(c);
  }
  return FinishUnary(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* ReservationServiceImpl::ForceReleaseReservation(
    grpc::CallbackServerContext* context,
    const hub::v1::ForceReleaseReservationRequest* request,
    hub::v1::ForceReleaseReservationResponse* response) {
  absl::StatusOr<Principal> principal =
      admission_->AdmitCall(*context, *request);
  if (!principal.ok()) return FinishUnary(context, principal.status());
  // The project is the reservation's, so it is read first.
  absl::StatusOr<storage::ReservationRecord> held =
      book_->Get(request->reservation_id());
  if (!held.ok()) return FinishUnary(context, held.status());
  if (absl::Status s = RequireProject(*principal, held->project_id); !s.ok()) {
    return FinishUnary(context, s);
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  write_pool_->Schedule([this, reactor, request, response] {
    absl::StatusOr<storage::ReservationRecord> r =
        book_->ForceRelease(request->reservation_id());
    if (!r.ok()) {
      reactor->Finish(ToGrpcStatus(r.status()));
      return;
    }
    *response->mutable_reservation() = ToProto(*r);
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

}  // namespace hub
