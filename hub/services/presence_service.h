// hub.v1.PresenceService over the PresenceRegistry: unary registration,
// heartbeat, deregistration and lookups, and the Attach presence stream (one
// callback reactor per stream, no thread per stream).
#ifndef HUB_HUB_SERVICES_PRESENCE_SERVICE_H_
#define HUB_HUB_SERVICES_PRESENCE_SERVICE_H_

#include <atomic>

#include "absl/time/time.h"
#include "hub/blocking_pool.h"
#include "hub/edge/admission.h"
#include "hub/edge/auth.h"
#include "hub/observability/hub_metrics.h"
#include "hub/v1/presence.grpc.pb.h"
#include "registry/activator.h"
#include "registry/clock.h"
#include "registry/messaging.h"
#include "registry/presence.h"

namespace hub {

struct PresenceServiceOptions {
  absl::Duration detach_grace = absl::Seconds(2);
  absl::Duration keepalive_interval = absl::Seconds(5);
};

class PresenceServiceImpl final
    : public hub::v1::PresenceService::CallbackService {
 public:
  // Admits every call (hub/edge/admission.h): authentication, authority,
  // limits. Set before serving; must outlive the service. Without one every
  // call is admitted as the anonymous admin, unlimited.
  void SetAdmission(const Admission* admission) { admission_ = admission; }
  // Where Attach streams count themselves (hub/observability/rpc_observer.h:
  // the RPC interceptor leaves them alone); set before serving, must outlive
  // the service. Without it streams are not counted.
  void SetMetrics(HubMetrics* metrics) { metrics_ = metrics; }

  // `registry`, `clock` and `pool` must outlive the service. Calls that wait
  // for a durable write run on `pool`.
  PresenceServiceImpl(PresenceRegistry* registry, const Clock* clock,
                      BlockingPool* pool, PresenceServiceOptions options,
                      std::string hub_instance_id,
                      std::string store_fingerprint);

  // The activator that takes activation ACKs sent on presence streams; must
  // outlive the service. Without one such frames get
  // ROLE_ACTIVATOR_UNAVAILABLE.
  void SetActivator(Activator* activator) { activator_.store(activator); }
  // The messaging that takes message_ack frames and pushes an agent's
  // pending messages right after it attaches; must outlive the service.
  // Without one, message_ack frames get UNIMPLEMENTED in-band.
  void SetMessaging(Messaging* messaging) { messaging_.store(messaging); }
  // The agents' owners (docs/design/auth.md): a registration claims an
  // agent id nobody owns for its caller. Must outlive the service; set before
  // serving. Without one registrations claim nothing.
  void SetAuthority(Authority* authority) { authority_ = authority; }

  grpc::ServerUnaryReactor* RegisterAgent(
      grpc::CallbackServerContext* context,
      const hub::v1::RegisterAgentRequest* request,
      hub::v1::RegisterAgentResponse* response) override;
  grpc::ServerUnaryReactor* Heartbeat(
      grpc::CallbackServerContext* context,
      const hub::v1::HeartbeatRequest* request,
      hub::v1::HeartbeatResponse* response) override;
  grpc::ServerUnaryReactor* Deregister(
      grpc::CallbackServerContext* context,
      const hub::v1::DeregisterRequest* request,
      hub::v1::DeregisterResponse* response) override;
  grpc::ServerUnaryReactor* GetAgent(
      grpc::CallbackServerContext* context,
      const hub::v1::GetAgentRequest* request,
      hub::v1::GetAgentResponse* response) override;
  grpc::ServerUnaryReactor* ListAgents(
      grpc::CallbackServerContext* context,
      const hub::v1::ListAgentsRequest* request,
      hub::v1::ListAgentsResponse* response) override;
  grpc::ServerBidiReactor<hub::v1::AttachRequest, hub::v1::AttachResponse>*
  Attach(grpc::CallbackServerContext* context) override;

 private:
  class AttachReactor;

  // Registers `input` and answers on `reactor` once it is durable.
  void Register(grpc::ServerUnaryReactor* reactor, RegisterInput input,
                hub::v1::RegisterAgentResponse* response);

  PresenceRegistry* const registry_;
  const Clock* const clock_;
  BlockingPool* const pool_;
  std::atomic<Activator*> activator_{nullptr};
  std::atomic<Messaging*> messaging_{nullptr};
  Authority* authority_ = nullptr;
  const PresenceServiceOptions options_;
  const std::string hub_instance_id_;
  const std::string store_fingerprint_;
  const Admission* admission_ = &Admission::Open();
  HubMetrics* metrics_ = nullptr;
};

}  // namespace hub

#endif  // HUB_HUB_SERVICES_PRESENCE_SERVICE_H_
