// hub.v1.ReservationService over ReservationBook: Reserve, Renew, Release,
// List, Check and ForceRelease on the callback API
// (docs/design/reservations.md). Writes run on the write pool, so
// concurrent reserves share a group commit; Check and List read on gRPC's
// thread, as the other listings do.
#ifndef HUB_HUB_SERVICES_RESERVATION_SERVICE_H_
#define HUB_HUB_SERVICES_RESERVATION_SERVICE_H_

#include <set>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "hub/blocking_pool.h"
#include "hub/edge/admission.h"
#include "hub/edge/auth.h"
#include "hub/v1/reservation.grpc.pb.h"
#include "registry/reservation_feed.h"
#include "registry/reservation_waits.h"
#include "registry/reservations.h"

namespace hub {

// The NOTIFY channel of reservation changes (hubs sharing a database).
inline constexpr char kReservationChangesChannel[] = "hub_reservation_changes";

class ReservationServiceImpl final
    : public hub::v1::ReservationService::CallbackService {
 public:
  // Everything must outlive the service.
  ReservationServiceImpl(ReservationBook* book, BlockingPool* write_pool)
      : book_(book), write_pool_(write_pool) {}
  ~ReservationServiceImpl() override;

  // Admits every call (hub/edge/admission.h): authentication, authority,
  // limits. Set before serving; must outlive the service. Without one every
  // call is admitted as the anonymous admin, unlimited.
  void SetAdmission(const Admission* admission) { admission_ = admission; }
  // WatchReservations' source; set before serving (without it the call
  // answers UNAVAILABLE). Must outlive the service.
  void SetFeed(ReservationFeed* feed) { feed_ = feed; }
  // Reserve's `wait`; set before serving (without it `wait` answers
  // UNAVAILABLE). Must outlive the service.
  void SetWaits(ReservationWaits* waits) { waits_ = waits; }
  // Ends every watch stream (HUB_SHUTTING_DOWN) and refuses new ones.
  void Shutdown();

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
  grpc::ServerWriteReactor<hub::v1::WatchReservationsResponse>*
  WatchReservations(grpc::CallbackServerContext* context,
                    const hub::v1::WatchReservationsRequest* request) override;

 private:
  class WatchReactor;  // reservation_service_watch.cc
  void Untrack(WatchReactor* reactor);

  ReservationBook* const book_;
  BlockingPool* const write_pool_;
  const Admission* admission_ = &Admission::Open();
  ReservationFeed* feed_ = nullptr;
  ReservationWaits* waits_ = nullptr;
  absl::Mutex mu_;
  std::set<WatchReactor*> watches_ ABSL_GUARDED_BY(mu_);
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
};

// The wire form of a reservation.
hub::v1::Reservation ReservationToProto(const storage::ReservationRecord& r);
// The wire form of a reservation change (WatchReservations, and the
// reservation_ended event of a presence stream).
hub::v1::ReservationChange ReservationChangeToProto(
    const storage::ReservationChange& change);

}  // namespace hub

#endif  // HUB_HUB_SERVICES_RESERVATION_SERVICE_H_
