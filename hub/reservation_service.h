// hub.v1.ReservationService over ReservationBook: Reserve, Renew, Release,
// List, Check and ForceRelease on the callback API
// (docs/design/reservations.md). Writes run on the write pool, so
// concurrent reserves share a group commit; Check and List read on gRPC's
// thread, as the other listings do.
#ifndef HUB_HUB_RESERVATION_SERVICE_H_
#define HUB_HUB_RESERVATION_SERVICE_H_

#include "hub/auth.h"
#include "hub/blocking_pool.h"
#include "hub/call_gate.h"
#include "hub/v1/reservation.grpc.pb.h"
#include "registry/reservations.h"

namespace hub {

class ReservationServiceImpl final
    : public hub::v1::ReservationService::CallbackService {
 public:
  // Everything must outlive the service.
  ReservationServiceImpl(ReservationBook* book, BlockingPool* write_pool)
      : book_(book), write_pool_(write_pool) {}

  // Set before serving; must outlive the service. Without them every call
  // is allowed and unlimited.
  void SetCallGate(CallGate* gate) { gate_ = gate; }
  void SetAuthority(const Authority* authority) { authority_ = authority; }

  grpc::ServerUnaryReactor* Reserve(
      grpc::CallbackServerContext* context,
      const hub::v1::ReserveRequest* request,
      hub::v1::ReserveResponse* response) override;
  grpc::ServerUnaryReactor* RenewReservation(
      grpc::CallbackServerContext* context,
      const hub::v1::RenewReservationRequest* request,
      hub::v1::RenewReservationResponse* response) override;
  grpc::ServerUnaryReactor* ReleaseReservation(
      grpc::CallbackServerContext* context,
      const hub::v1::ReleaseReservationRequest* request,
      hub::v1::ReleaseReservationResponse* response) override;
  grpc::ServerUnaryReactor* ListReservations(
      grpc::CallbackServerContext* context,
      const hub::v1::ListReservationsRequest* request,
      hub::v1::ListReservationsResponse* response) override;
  grpc::ServerUnaryReactor* CheckReservations(
      grpc::CallbackServerContext* context,
      const hub::v1::CheckReservationsRequest* request,
      hub::v1::CheckReservationsResponse* response) override;
  grpc::ServerUnaryReactor* ForceReleaseReservation(
      grpc::CallbackServerContext* context,
      const hub::v1::ForceReleaseReservationRequest* request,
      hub::v1::ForceReleaseReservationResponse* response) override;

 private:
  ReservationBook* const book_;
  BlockingPool* const write_pool_;
  CallGate* gate_ = nullptr;
  const Authority* authority_ = nullptr;
};

}  // namespace hub

#endif  // HUB_HUB_RESERVATION_SERVICE_H_
