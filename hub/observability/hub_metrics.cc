#include "hub/observability/hub_metrics.h"

#include "hub/observability/log.h"

namespace hub {
namespace {

// Unary latencies: 0.5 ms (a heartbeat in memory) to 10 s (a slow commit
// or a long Ask).
const std::vector<double>& LatencyBuckets() {
  static const std::vector<double> buckets = {
      0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
      0.1,    0.25,  0.5,    1,     2.5,  5,     10};
  return buckets;
}

}  // namespace

HubMetrics::HubMetrics()
    : rpc_handled(registry_.AddCounter(
          "hub_rpc_handled_total",
          "RPCs completed, by method and gRPC status code.",
          {"method", "code"})),
      rpc_seconds(registry_.AddHistogram(
          "hub_rpc_duration_seconds",
          "Time from the start of a unary RPC to its status, by method and "
          "gRPC status code.",
          {"method", "code"}, LatencyBuckets())),
      rpc_failures(registry_.AddCounter(
          "hub_rpc_failures_total",
          "Failed RPCs by method, gRPC status code and hub reason code "
          "(google.rpc.ErrorInfo reason; empty when none).",
          {"method", "code", "reason"})),
      fencing_rejections(registry_.AddCounter(
          "hub_fencing_rejections_total",
          "Requests refused by a fence: a stale presence generation, epoch, "
          "activation, version or hub instance.",
          {"reason"})),
      open_streams(registry_.AddGauge("hub_open_streams",
                                      "Streaming RPCs open now, by method.",
                                      {"method"})),
      messages_published(registry_.AddCounter(
          "hub_messages_published_total",
          "Messages accepted by Publish and Ask (durable before the reply).")),
      messages_delivered(registry_.AddCounter(
          "hub_messages_delivered_total",
          "Message deliveries sent to agents: pushed on a presence stream or "
          "returned by ListPending (not peek).",
          {"via"})),
      messages_acked(registry_.AddCounter(
          "hub_messages_acked_total",
          "Message deliveries acknowledged by their recipient (Ack RPC or "
          "presence stream).")),
      messages_dead_lettered(registry_.AddCounter(
          "hub_messages_dead_lettered_total",
          "Messages the expiry sweep moved to the dead letters, by reason.",
          {"reason"})),
      role_transitions(registry_.AddCounter(
          "hub_role_transitions_total",
          "Committed role state changes, by previous and new state.",
          {"from", "to"})),
      role_activations(registry_.AddCounter(
          "hub_role_activations_total",
          "Roles that became active (an activation ACK was accepted).")),
      role_failovers(registry_.AddCounter(
          "hub_role_failovers_total",
          "Roles that became active under a different agent than their "
          "previous holder.")),
      role_kernel_transitions(registry_.AddCounter(
          "hub_role_kernel_transitions_total",
          "Role writes decided by the transition kernel, by state before, "
          "trigger and state after (\"removed\" for a closed scope).",
          {"from", "trigger", "to"})),
      role_transitions_refused(registry_.AddCounter(
          "hub_role_transitions_refused_total",
          "Role writes the transition kernel refused (INVALID_ROLE_TRANSITION: "
          "no table row for the state and trigger); nothing was written.",
          {"from", "trigger"})),
      reservations_granted(registry_.AddCounter(
          "hub_reservations_granted_total",
          "Path reservations granted (durable before the reply).")),
      reservations_conflicts(registry_.AddCounter(
          "hub_reservations_conflicts_total",
          "Reserve calls refused with RESERVATION_CONFLICT (nothing "
          "written).")),
      reservations_ended(registry_.AddCounter(
          "hub_reservations_ended_total",
          "Path reservations that ended, by reason: released (by the "
          "holder), forced (by an operator), expired (TTL, found by the "
          "sweep), holder_gone (stream grace ran out, offline, deregistered "
          "or registered again).",
          {"reason"})),
      reservation_waits(registry_.AddCounter(
          "hub_reservation_waits_total",
          "Reserve calls with `wait`, by how they ended: granted (at once "
          "or after waiting), timeout (RESERVATION_CONFLICT at the "
          "deadline), cancelled (the caller went away, or the hub stopped), "
          "error.",
          {"outcome"})),
      reservation_wait_attempts(registry_.AddCounter(
          "hub_reservation_wait_attempts_total",
          "Attempts of Reserve calls with `wait` (one write each): the first, "
          "then one per change that can free the paths it waits for, or per "
          "expiry among its conflicts.")),
      commit_group_size(registry_.AddHistogram(
          "hub_store_commit_group_size",
          "Write operations per group commit (one transaction, one sync).", {},
          {1, 2, 4, 8, 16, 32, 64, 128, 256})),
      commit_seconds(registry_.AddHistogram(
          "hub_store_commit_duration_seconds",
          "Time of one group commit, BEGIN to COMMIT (includes the sync).", {},
          LatencyBuckets())) {}

void HubMetrics::OnReservations(ReservationEvent event, int64_t n) {
  if (n <= 0) return;
  switch (event) {
    case ReservationEvent::kGranted:
      reservations_granted->Add({}, n);
      return;
    case ReservationEvent::kConflict:
      reservations_conflicts->Add({}, n);
      return;
    case ReservationEvent::kReleased:
      reservations_ended->Add({"released"}, n);
      return;
    case ReservationEvent::kForced:
      reservations_ended->Add({"forced"}, n);
      return;
    case ReservationEvent::kExpired:
      reservations_ended->Add({"expired"}, n);
      return;
    case ReservationEvent::kHolderGone:
      reservations_ended->Add({"holder_gone"}, n);
      return;
  }
}

void HubMetrics::SeedRoles(const std::vector<RoleRecord>& rows) {
  absl::MutexLock lock(&roles_mu_);
  for (const RoleRecord& row : rows) {
    RoleSeen& seen = roles_[row.role_key_wire];
    if (row.version > seen.version) seen = RoleSeen{row.state, row.version};
  }
}

void HubMetrics::OnRoleEvent(const RoleEvent& event) {
  const RoleRecord& row = event.role;
  std::string from;
  {
    absl::MutexLock lock(&roles_mu_);
    if (event.kind == RoleChangeKind::kRemoved) {
      roles_.erase(row.role_key_wire);
      return;
    }
    RoleSeen& seen = roles_[row.role_key_wire];
    if (row.version <= seen.version) return;  // already counted
    from = seen.version < 0 ? "none" : std::string(RoleStateName(seen.state));
    seen = RoleSeen{row.state, row.version};
  }
  const std::string to(RoleStateName(row.state));
  if (from == to) return;
  role_transitions->Add({from, to});
  const std::string holder = row.holder_agent_id.value_or("");
  log::Info("role_transition", {{"role", row.role_key_wire},
                                {"from", from},
                                {"to", to},
                                {"epoch", row.epoch},
                                {"holder", holder},
                                {"reason", row.last_reason},
                                {"version", row.version}});
  if (row.state != RoleState::kActive) return;
  role_activations->Add({});
  const std::string previous = row.previous_holder_agent_id.value_or("");
  if (!previous.empty() && previous != holder) {
    role_failovers->Add({});
    log::Info("role_failover", {{"role", row.role_key_wire},
                                {"from_holder", previous},
                                {"to_holder", holder},
                                {"epoch", row.epoch}});
  }
}

void HubMetrics::OnRoleTransition(const RoleTransitionNote& note) {
  const std::string trigger(RoleTriggerName(note.trigger));
  const std::string from(RoleStateName(note.from));
  if (note.refused) {
    role_transitions_refused->Add({from, trigger});
    log::Warn("role_transition_refused", {{"role", note.role_key_wire},
                                          {"state", from},
                                          {"trigger", trigger},
                                          {"version", note.version}});
    return;
  }
  const std::string to =
      note.to.has_value() ? std::string(RoleStateName(*note.to)) : "removed";
  role_kernel_transitions->Add({from, trigger, to});
}

void HubMetrics::SeedReservations(
    const storage::ReservationSnapshot& snapshot) {
  absl::MutexLock lock(&held_mu_);
  held_.clear();
  for (const storage::ReservationRecord& r : snapshot.reservations) {
    ++held_[r.project_id];
  }
}

void HubMetrics::OnReservationChange(const storage::ReservationChange& change) {
  using K = storage::ReservationChangeKind;
  int delta = 0;
  switch (change.kind) {
    case K::kGranted:
      delta = 1;
      break;
    case K::kReleased:
    case K::kForced:
    case K::kExpired:
    case K::kHolderGone:
      delta = -1;
      break;
    case K::kRenewed:
    case K::kNarrowed:
    case K::kWaiting:
    case K::kWaitEnded:
      return;
  }
  absl::MutexLock lock(&held_mu_);
  int64_t& n = held_[change.reservation.project_id];
  n += delta;
  if (n <= 0) held_.erase(change.reservation.project_id);
}

std::vector<MetricSample> HubMetrics::ReservationsHeld() {
  std::vector<MetricSample> samples;
  absl::MutexLock lock(&held_mu_);
  for (const auto& [project, n] : held_) {
    samples.push_back({{project}, static_cast<double>(n)});
  }
  return samples;
}

std::vector<MetricSample> HubMetrics::RolesByState() {
  std::map<std::string, int64_t> counts;
  for (const StoredWord<RoleState>& entry : kRoleStateWords) {
    counts[std::string(entry.word)] = 0;
  }
  {
    absl::MutexLock lock(&roles_mu_);
    for (const auto& [wire, seen] : roles_) {
      ++counts[std::string(RoleStateName(seen.state))];
    }
  }
  std::vector<MetricSample> samples;
  for (const auto& [state, n] : counts) {
    samples.push_back({{state}, static_cast<double>(n)});
  }
  return samples;
}

void HubMetrics::OnGroupCommitted(int ops, absl::Duration latency) {
  commit_group_size->Observe({}, ops);
  commit_seconds->Observe({}, absl::ToDoubleSeconds(latency));
}

void HubMetrics::OnDeadLetter(const MessageRecord& message,
                              const storage::ExpiryTransition& transition) {
  messages_dead_lettered->Add({transition.reason});
  log::Info("message_dead_lettered",
            {{"message_id", transition.message_id},
             {"from", message.from_agent},
             {"to", message.to_agent},
             {"topic", message.topic},
             {"previous_status",
              std::string(MessageStatusName(transition.previous_status))},
             {"reason", transition.reason}});
}

}  // namespace hub
