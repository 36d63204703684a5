// hub.v1.RoleService over the RoleRegistry: the fenced primitives
// (ReserveRole, CompareAndSetRole), reads (GetRole, ListRoles), candidates,
// closing lead scopes (CloseRoleScope, ListClosedScopes), and the WatchRoles
// stream (one callback
// reactor per stream). EnsureRole and AckRoleActivation are answered by the
// activator (role_service_activation.cc).
#ifndef HUB_HUB_SERVICES_ROLE_SERVICE_H_
#define HUB_HUB_SERVICES_ROLE_SERVICE_H_

#include <atomic>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "hub/blocking_pool.h"
#include "hub/edge/admission.h"
#include "hub/edge/auth.h"
#include "hub/v1/role_service.grpc.pb.h"
#include "registry/activator.h"
#include "registry/clock.h"
#include "registry/presence.h"
#include "registry/role_registry.h"

namespace hub {

class RoleServiceImpl final : public hub::v1::RoleService::CallbackService {
 public:
  // The largest priority (and, negated, the smallest) an agent token may
  // give its own candidacy; beyond it only operators rank candidates
  // (docs/design/auth.md, "An agent's own candidacy").
  static constexpr int64_t kMaxAgentPriority = 1'000'000;

  // Admits every call (hub/edge/admission.h): authentication, authority,
  // limits. Set before serving; must outlive the service. Without one every
  // call is admitted as the anonymous admin, unlimited.
  void SetAdmission(const Admission* admission) { admission_ = admission; }

  // `registry`, `clock` and `pool` must outlive the service. Calls that wait
  // for a durable write run on `pool`.
  RoleServiceImpl(RoleRegistry* registry, const Clock* clock,
                  BlockingPool* pool);
  // REQUIRES: Shutdown() was called and the server is shut down.
  ~RoleServiceImpl() override;

  // Ends every WatchRoles stream with UNAVAILABLE / HUB_SHUTTING_DOWN and
  // refuses new ones. Call before grpc::Server::Shutdown (watch streams
  // never end on their own).
  void Shutdown();

  // The activator that answers EnsureRole and AckRoleActivation; must
  // outlive the service. Without one, EnsureRole reports MANAGER_DISABLED
  // (blocked_reason activator_unavailable) and AckRoleActivation fails with
  // UNAVAILABLE / ROLE_ACTIVATOR_UNAVAILABLE, as triflux does.
  void SetActivator(Activator* activator);
  // Where EnsureRole looks up the agent_id it is called for (registered:
  // AGENT_NOT_FOUND; same project as the role: PROJECT_SCOPE_MISMATCH). Must
  // outlive the service; without one agent_id is only validated.
  void SetPresence(PresenceRegistry* presence) { presence_.store(presence); }

  // Open WatchRoles streams (for tests and metrics).
  int ActiveWatches();

  grpc::ServerUnaryReactor* ReserveRole(
      grpc::CallbackServerContext* context,
      const hub::v1::ReserveRoleRequest* request,
      hub::v1::ReserveRoleResponse* response) override;
  grpc::ServerUnaryReactor* CompareAndSetRole(
      grpc::CallbackServerContext* context,
      const hub::v1::CompareAndSetRoleRequest* request,
      hub::v1::CompareAndSetRoleResponse* response) override;
  grpc::ServerUnaryReactor* GetRole(
      grpc::CallbackServerContext* context,
      const hub::v1::GetRoleRequest* request,
      hub::v1::GetRoleResponse* response) override;
  grpc::ServerUnaryReactor* ListRoles(
      grpc::CallbackServerContext* context,
      const hub::v1::ListRolesRequest* request,
      hub::v1::ListRolesResponse* response) override;
  grpc::ServerWriteReactor<hub::v1::WatchRolesResponse>* WatchRoles(
      grpc::CallbackServerContext* context,
      const hub::v1::WatchRolesRequest* request) override;
  grpc::ServerUnaryReactor* EnsureRole(
      grpc::CallbackServerContext* context,
      const hub::v1::EnsureRoleRequest* request,
      hub::v1::EnsureRoleResponse* response) override;
  grpc::ServerUnaryReactor* AckRoleActivation(
      grpc::CallbackServerContext* context,
      const hub::v1::AckRoleActivationRequest* request,
      hub::v1::AckRoleActivationResponse* response) override;
  grpc::ServerUnaryReactor* ReleaseRole(
      grpc::CallbackServerContext* context,
      const hub::v1::ReleaseRoleRequest* request,
      hub::v1::ReleaseRoleResponse* response) override;
  grpc::ServerUnaryReactor* UpsertRoleCandidate(
      grpc::CallbackServerContext* context,
      const hub::v1::UpsertRoleCandidateRequest* request,
      hub::v1::UpsertRoleCandidateResponse* response) override;
  grpc::ServerUnaryReactor* RemoveRoleCandidate(
      grpc::CallbackServerContext* context,
      const hub::v1::RemoveRoleCandidateRequest* request,
      hub::v1::RemoveRoleCandidateResponse* response) override;
  grpc::ServerUnaryReactor* ListRoleCandidates(
      grpc::CallbackServerContext* context,
      const hub::v1::ListRoleCandidatesRequest* request,
      hub::v1::ListRoleCandidatesResponse* response) override;
  grpc::ServerUnaryReactor* ReportCandidateProbe(
      grpc::CallbackServerContext* context,
      const hub::v1::ReportCandidateProbeRequest* request,
      hub::v1::ReportCandidateProbeResponse* response) override;
  grpc::ServerUnaryReactor* CloseRoleScope(
      grpc::CallbackServerContext* context,
      const hub::v1::CloseRoleScopeRequest* request,
      hub::v1::CloseRoleScopeResponse* response) override;
  grpc::ServerUnaryReactor* ListClosedScopes(
      grpc::CallbackServerContext* context,
      const hub::v1::ListClosedScopesRequest* request,
      hub::v1::ListClosedScopesResponse* response) override;

 private:
  // EnsureRole's agent_id: registered, and of the role's project.
  absl::Status CheckEnsureAgent(const EnsureRequest& in,
                                const std::string& agent_id);
  // The start the holder's own calls share (AckRoleActivation,
  // ReleaseRole): admission (the caller owns the request's agent), then
  // `work` runs on the pool with the activator (ROLE_ACTIVATOR_UNAVAILABLE
  // without one) and finishes `reactor` itself.
  template <typename Request>
  grpc::ServerUnaryReactor* AsHolder(
      grpc::CallbackServerContext* context, const Request& request,
      std::function<void(grpc::ServerUnaryReactor* reactor,
                         Activator* activator)>
          work);
  class WatchReactor;

  void Untrack(WatchReactor* reactor);

  RoleRegistry* const registry_;
  const Clock* const clock_;
  BlockingPool* const pool_;
  std::atomic<Activator*> activator_{nullptr};
  std::atomic<PresenceRegistry*> presence_{nullptr};

  absl::Mutex mu_;
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_set<WatchReactor*> watches_ ABSL_GUARDED_BY(mu_);
  const Admission* admission_ = &Admission::Open();
};

}  // namespace hub

#endif  // HUB_HUB_SERVICES_ROLE_SERVICE_H_
