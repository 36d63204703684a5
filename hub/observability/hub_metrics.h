// HubMetrics: what hubd measures, and the observers that measure it.
//
// Responsible for the hub's metric families (docs/operations.md lists them),
// for turning committed role changes into role counts, transitions,
// activations and failovers (with one log line each), and for recording
// group commits and dead letters. RPC counts, latencies and message counts
// come from RpcObserverFactory (rpc_observer.h). Thread-safe.
#ifndef HUB_HUB_OBSERVABILITY_HUB_METRICS_H_
#define HUB_HUB_OBSERVABILITY_HUB_METRICS_H_

#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "hub/observability/metrics.h"
#include "registry/reservations.h"
#include "registry/role_registry.h"
#include "storage/store.h"

namespace hub {

class HubMetrics {
  MetricRegistry registry_;  // first: the families below live in it

 public:
  HubMetrics();
  HubMetrics(const HubMetrics&) = delete;
  HubMetrics& operator=(const HubMetrics&) = delete;

  MetricRegistry& registry() { return registry_; }

  // RPCs: every call, by method ("hub.v1.PresenceService/RegisterAgent")
  // and gRPC code name ("OK", "FAILED_PRECONDITION", ...).
  CounterFamily* const rpc_handled;
  HistogramFamily* const rpc_seconds;       // unary calls only
  CounterFamily* const rpc_failures;        // + reason (ErrorInfo), non-OK only
  CounterFamily* const fencing_rejections;  // by reason
  GaugeFamily* const open_streams;          // streaming calls, by method
  // Messages.
  CounterFamily* const messages_published;
  CounterFamily* const messages_delivered;  // by via: stream | list_pending
  CounterFamily* const messages_acked;
  CounterFamily* const messages_dead_lettered;  // by reason
  // Roles.
  CounterFamily* const role_transitions;  // by from, to
  CounterFamily* const role_activations;
  CounterFamily* const role_failovers;
  // Decisions of the transition kernel: applied by trigger (from, trigger,
  // to), refused by pair (from, trigger).
  CounterFamily* const role_kernel_transitions;
  CounterFamily* const role_transitions_refused;
  // Path reservations (docs/design/reservations.md).
  CounterFamily* const reservations_granted;
  CounterFamily* const reservations_conflicts;  // reserves refused
  CounterFamily* const reservations_ended;      // by reason
  CounterFamily* const reservation_waits;       // Reserve with wait, by outcome
  CounterFamily* const reservation_wait_attempts;  // their writes
  // Storage.
  HistogramFamily* const commit_group_size;
  HistogramFamily* const commit_seconds;

  // Seeds the role counts with the rows a whole-hub watch started from.
  void SeedRoles(const std::vector<RoleRecord>& rows);
  // A committed role change (the whole-hub RoleWatch callback).
  void OnRoleEvent(const RoleEvent& event);
  // A decision of the transition kernel behind a registry write
  // (RoleRegistryOptions::on_transition); a refusal also logs a warning.
  void OnRoleTransition(const RoleTransitionNote& note);
  // Roles by state, for the hub_roles gauge.
  std::vector<MetricSample> RolesByState();

  // Live path reservations per project (hub_reservations_held), kept from a
  // ReservationFeed subscription of every project, so every hub's changes
  // count and a scrape reads a map, not the store: the snapshot it started
  // from, then +1 per grant and -1 per end. A reservation whose TTL passed
  // counts until its end is logged (the sweep, every 5 s).
  void SeedReservations(const storage::ReservationSnapshot& snapshot);
  void OnReservationChange(const storage::ReservationChange& change);
  std::vector<MetricSample> ReservationsHeld();

  // A group commit of `ops` operations that took `latency` (BEGIN .. COMMIT).
  void OnGroupCommitted(int ops, absl::Duration latency);
  // `n` path reservations changed as `event` says (ReservationBook's
  // observer).
  void OnReservations(ReservationEvent event, int64_t n);
  // A message the expiry sweep dead-lettered.
  void OnDeadLetter(const MessageRecord& message,
                    const storage::ExpiryTransition& transition);

 private:
  struct RoleSeen {
    RoleState state = RoleState::kElectable;
    int64_t version = -1;
  };
  absl::Mutex held_mu_;
  std::map<std::string, int64_t> held_ ABSL_GUARDED_BY(held_mu_);
  absl::Mutex roles_mu_;
  std::map<std::string, RoleSeen> roles_ ABSL_GUARDED_BY(roles_mu_);
};

}  // namespace hub

#endif  // HUB_HUB_OBSERVABILITY_HUB_METRICS_H_
