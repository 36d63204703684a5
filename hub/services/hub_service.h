// hub.v1.HubService: the hub's own status and the role key codec.
//
// Stateless apart from the hub identity it reports; the role key RPCs are pure
// functions over registry/role_key.h.
#ifndef HUB_HUB_SERVICES_HUB_SERVICE_H_
#define HUB_HUB_SERVICES_HUB_SERVICE_H_

#include <string>

#include "absl/time/time.h"
#include "hub/edge/admission.h"
#include "hub/edge/auth.h"
#include "hub/v1/hub.grpc.pb.h"
#include "registry/clock.h"
#include "registry/presence.h"
#include "registry/role_registry.h"

namespace hub {

// What the hub reports about itself; fixed for the life of the process.
struct HubIdentity {
  std::string hub_instance_id;    // UUIDv7, new at every start
  std::string store_type;         // "sqlite"
  std::string store_path;         // absolute path of the database file
  std::string store_fingerprint;  // "sqlite:" + sha256 hex of store_path
  absl::Time started_at;
};

class HubServiceImpl final : public hub::v1::HubService::CallbackService {
 public:
  // Admits every call (hub/edge/admission.h): authentication, authority,
  // limits. Set before serving; must outlive the service. Without one every
  // call is admitted as the anonymous admin, unlimited.
  void SetAdmission(const Admission* admission) { admission_ = admission; }

  // `clock` and `presence` must outlive the service.
  HubServiceImpl(HubIdentity identity, const Clock* clock,
                 PresenceRegistry* presence, RoleRegistry* roles);

  grpc::ServerUnaryReactor* GetStatus(
      grpc::CallbackServerContext* context,
      const hub::v1::GetStatusRequest* request,
      hub::v1::GetStatusResponse* response) override;

  grpc::ServerUnaryReactor* EncodeRoleKey(
      grpc::CallbackServerContext* context,
      const hub::v1::EncodeRoleKeyRequest* request,
      hub::v1::EncodeRoleKeyResponse* response) override;

  grpc::ServerUnaryReactor* DecodeRoleKey(
      grpc::CallbackServerContext* context,
      const hub::v1::DecodeRoleKeyRequest* request,
      hub::v1::DecodeRoleKeyResponse* response) override;

 private:
  const HubIdentity identity_;
  const Clock* const clock_;
  PresenceRegistry* const presence_;
  RoleRegistry* const roles_;
  const Admission* admission_ = &Admission::Open();
};

}  // namespace hub

#endif  // HUB_HUB_SERVICES_HUB_SERVICE_H_
