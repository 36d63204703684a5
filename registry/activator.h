// Activator: makes a role active under exactly one holder, and keeps it so.
//
// Responsible for EnsureRole (singleflight per role, the dispositions of
// TRIFLUX-HUB §5.8), choosing an eligible candidate, reserving the role (a
// new epoch), reaching the holder (its presence stream first, else its
// transport locators through adapters), the activation ACK and its checks,
// ACK timeouts, candidate failure accounting with backoff and quarantine,
// and failover when a holder is gone. Every state change it makes names a
// trigger of the transition kernel (role_transitions.h) and is written by
// RoleRegistry::Transition, which stores the kernel's next state. Not
// responsible for the fences (the store's SQL), validation of role writes
// (RoleRegistry, through which every write goes so watchers see it), or
// gRPC. See docs/design/activator.md.
//
// Nothing here sleeps or owns a thread: I/O runs on the injected executor and
// time-driven work runs in Tick(), so tests drive it with a FakeClock and an
// inline executor, step by step. Thread-safe.
#ifndef HUB_REGISTRY_ACTIVATOR_H_
#define HUB_REGISTRY_ACTIVATOR_H_

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "registry/activation_envelope.h"
#include "registry/activation_policy.h"
#include "registry/clock.h"
#include "registry/presence.h"
#include "registry/role_registry.h"
#include "registry/role_transitions.h"
#include "registry/transport_adapter.h"
#include "storage/store.h"

namespace hub {

enum class EnsureDisposition {
  kStarted,
  kJoined,
  kAlreadyActive,
  kManagerDisabled,
  kScopeClosed,
  kNoCandidate,
};
absl::string_view EnsureDispositionName(EnsureDisposition disposition);

struct EnsureRequest {
  RoleKeyRef role;
  // session_start, publish_no_holder, lease_expired, restart_recovery,
  // hygiene_changed, charter_issued, manual, holder_offline,
  // candidate_changed (ENSURE_ROLE_REQUEST_INVALID otherwise).
  std::string trigger;
  std::string cause_id;  // non-empty (ENSURE_ROLE_REQUEST_INVALID)
  // Agents this decision must not elect: a holder that just stepped down
  // (StepDown). Default: none.
  std::set<std::string> passed_over;
};

struct EnsureReceipt {
  bool accepted = false;
  EnsureDisposition disposition = EnsureDisposition::kJoined;
  RoleRecord role;  // the row after the decision
  // There is no row (a closed lead scope, or a joined election whose row
  // could not be read): `role` names the key only and has no state.
  bool no_row = false;
  std::string trigger;
  std::string cause_id;
};

// A holder giving up its role on purpose (ReleaseRole).
struct StepDownInput {
  RoleKeyRef role;
  std::string agent_id;  // the holder
  int64_t epoch = 0;     // the epoch it gives up (>= 1)
};

struct StepDownOutcome {
  RoleRecord released;  // the row right after the release
  // The election that followed, at once (no detach grace), the agent that
  // stepped down passed over; its error when it failed.
  absl::StatusOr<EnsureReceipt> next = EnsureReceipt{};
};

// `tfx.role-activation-ack.v1`, as the holder sends it.
struct ActivationAck {
  std::string schema;  // "tfx.role-activation-ack.v1"
  std::string activation_id;
  RoleKeyRef role;
  int64_t epoch = 0;
  int64_t activation_seq = 0;
  std::string holder_agent_id;
  bool reachable = false;
  bool has_charter_ack = false;
  RoleKeyRef charter_role;
  int64_t charter_epoch = 0;
  std::string charter_version;
  // The agent the call is authenticated as (the stream's agent, or the
  // unary call's agent_id).
  std::string principal_agent_id;
};

// The ACK that accepts `activation` and its charter, as its holder sends it
// when it takes the role, authenticated as `principal_agent_id`.
inline ActivationAck AcceptingAck(const ActivationEnvelope& activation,
                                  const std::string& principal_agent_id) {
  ActivationAck a;
  a.schema = "tfx.role-activation-ack.v1";
  a.activation_id = activation.activation_id;
  a.role.wire = activation.role_key_wire;
  a.epoch = activation.epoch;
  a.activation_seq = activation.activation_seq;
  a.holder_agent_id = activation.holder_agent_id;
  a.reachable = true;
  a.has_charter_ack = true;
  a.charter_role.wire = activation.role_key_wire;
  a.charter_epoch = activation.epoch;
  a.charter_version = activation.charter_version;
  a.principal_agent_id = principal_agent_id;
  return a;
}

// A role's backlog as handed to its new holder: how many messages became
// the holder's (durable), and the pushes of them to its stream, to run after
// the ACK's answer is queued, with no lock held (may be empty).
struct BacklogHandover {
  int64_t handed_over = 0;
  std::function<void()> push;
};

struct AckOutcome {
  bool idempotent = false;
  RoleRecord role;
  // Backlog messages this ACK handed to the holder (0 when idempotent).
  int64_t backlog_delivered = 0;
  // The pushes of those messages: the caller runs it once the ACK's answer
  // is on its way, so the holder learns it holds the role first.
  std::function<void()> push_backlog;
};

// How the activator reaches an agent over its presence stream, and, when
// hubs share a database, which hub holds the agent's presence (only that
// hub can probe it and push its activation: docs/design/multi-hub.md,
// "Elections across hubs").
class StreamReach {
 public:
  virtual ~StreamReach() = default;
  // Whether `agent_id` has a presence stream attached here.
  virtual bool Attached(const std::string& agent_id) = 0;
  // Probes the agent over its stream (a RoleProbe event answered by a
  // probe_reply frame), waiting at most `timeout`.
  virtual StreamProbeResult Probe(const std::string& agent_id,
                                  const RoleProbeEnvelope& probe,
                                  absl::Duration timeout) = 0;
  // Pushes the activation to the agent's stream; false if it is not there.
  virtual bool Deliver(const std::string& agent_id,
                       const ActivationEnvelope& envelope) = 0;
  // Whether other hubs share this hub's database. Default: no.
  virtual bool Shared() { return false; }
  // Whether this hub holds the agent's presence (one hub: every agent).
  virtual bool HeldHere(const std::string& agent_id) { return true; }
  // Which of `agent_ids` another hub's live seat holds: agent id -> hub id
  // (a read of the database; empty when it cannot say). Default: none.
  virtual std::map<std::string, std::string> HeldElsewhere(
      const std::vector<std::string>& agent_ids) {
    return {};
  }
  // Tells `hub_id` that a reservation waits for an agent it holds (a hint:
  // the hub's scan finds it anyway). Never blocks. Default: nothing.
  virtual void HandOver(const std::string& hub_id) {}
};

// StreamReach over the presence registry's attached streams; with a
// membership (hubs sharing the database), over the other hubs' seats too,
// `hand_over` hinting the hub a flight is handed to.
class PresenceStreamReach final : public StreamReach {
 public:
  explicit PresenceStreamReach(
      PresenceRegistry* presence, storage::Membership* membership = nullptr,
      std::function<void(const std::string& hub_id)> hand_over = nullptr)
      : presence_(presence),
        membership_(membership),
        hand_over_(std::move(hand_over)) {}
  bool Attached(const std::string& agent_id) override {
    return presence_->StreamAttached(agent_id);
  }
  StreamProbeResult Probe(const std::string& agent_id,
                          const RoleProbeEnvelope& probe,
                          absl::Duration timeout) override {
    return presence_->ProbeStream(agent_id, probe, timeout);
  }
  bool Deliver(const std::string& agent_id,
               const ActivationEnvelope& envelope) override {
    return presence_->DeliverActivation(agent_id, envelope);
  }
  bool Shared() override { return membership_ != nullptr; }
  bool HeldHere(const std::string& agent_id) override {
    return !presence_->shared() || presence_->Held(agent_id);
  }
  std::map<std::string, std::string> HeldElsewhere(
      const std::vector<std::string>& agent_ids) override;
  void HandOver(const std::string& hub_id) override {
    if (hand_over_) hand_over_(hub_id);
  }

 private:
  PresenceRegistry* const presence_;
  storage::Membership* const membership_;
  const std::function<void(const std::string& hub_id)> hand_over_;
};

struct ActivatorOptions {
  ActivatorConfig config;
  // This host's id: locators of other hosts are not usable here. nullopt:
  // accept any host (single-host deployments).
  std::optional<std::string> local_host_id;
  // Runs I/O work (probes, wakes) off the caller's thread. Default: inline.
  std::function<void(std::function<void()>)> executor;
  // Per-kind managers (the kill switch): a disabled kind's ensures fence
  // the role and report manager_disabled.
  bool cto_manager_enabled = true;
  bool lead_manager_enabled = true;
  // Called after an activation ACK moved a role to active (the CAS
  // applied), with the active row and no activator lock held, on the ACK's
  // thread (which may hold the holder's stream lock: it must not push on
  // that stream itself). Messaging hands the role's backlog to the new
  // holder here and returns how many messages it handed over, which the
  // ACK answers (AckOutcome::backlog_delivered). Default: nothing.
  std::function<BacklogHandover(const RoleRecord& active)> on_role_active;
  // Whether the role has role-addressed messages waiting for a holder
  // (backlog). A candidate event ensures such a role even when no ensure
  // asked for it yet. Default: none has.
  std::function<bool(const std::string& wire)> has_backlog;
  // Called after CloseScope closed a scope (not for a repeat), on the
  // caller's thread with no activator lock held. Messaging sends the
  // dead-letter notices of the backlog here. Default: nothing.
  std::function<void(const storage::ScopeCloseResult& closed)> on_scope_closed;
};

class Activator {
 public:
  // Everything injected must outlive the activator.
  Activator(RoleRegistry* roles, PresenceRegistry* presence,
            StreamReach* streams, const Clock* clock, ActivatorOptions options);
  ~Activator();

  // Registers a transport adapter for its kind (tmux, claude-uds).
  void AddAdapter(std::unique_ptr<TransportAdapter> adapter);

  absl::StatusOr<EnsureReceipt> Ensure(const EnsureRequest& request);
  absl::StatusOr<AckOutcome> Ack(const ActivationAck& ack);
  // Closes a lead scope (RoleRegistry::CloseScope) and ends the activator's
  // part in it: a flight for that role is dropped (it can write nothing
  // more: the row is gone and the store refuses to bring it back, so it ends
  // at its next gate), later ensures answer scope_closed and later ACKs
  // ROLE_SCOPE_CLOSED. Then on_scope_closed.
  absl::StatusOr<ScopeCloseOutcome> CloseScope(const ScopeCloseInput& input);
  // The holder steps down: fenced by the epoch (the release raises it, so
  // whatever the holder fenced with it is refused from then on), the role
  // is released (active: holder_offline; still probing:
  // holder_lease_expired; last_reason "released") and the next eligible
  // candidate is elected at once, the one stepping down passed over for
  // that election (it stays a candidate for later ones). Backlog stays for
  // the next holder. Errors: role-key reasons, AGENT_ID_INVALID,
  // REQUEST_INVALID (epoch < 1) (INVALID_ARGUMENT); ROLE_NOT_FOUND; STALE_EPOCH
  // (the role is past or before `epoch`, or not held) and HOLDER_MISMATCH
  // (someone else holds it) (FAILED_PRECONDITION), with the row's fence in
  // metadata.
  absl::StatusOr<StepDownOutcome> StepDown(const StepDownInput& input);
  // The presence registry's gone signal: fences every role the agent holds
  // (at that generation or older) and ensures it again.
  void OnAgentGone(const std::string& agent_id, AgentGoneReason reason);
  // ACK timeouts, due retries, holders whose lease ran out; with hubs
  // sharing the database, reservations handed to this hub
  // (ContinueHandedFlights).
  void Tick();
  // Hubs sharing the database: runs the flight of every reservation that
  // waits for an agent this hub holds and that no flight of this hub has
  // carried yet (another hub reserved it and handed it over, or its holder
  // moved here): the probe, the ACK deadline if unarmed, the activation
  // push. A hint from the reserving hub, the tick, and a rejoin call it.
  void ContinueHandedFlights();
  // Roles whose last flight this hub remembers (tests: it stays bounded).
  size_t remembered_flights() {
    absl::MutexLock lock(&mu_);
    return flown_.size();
  }

  // Candidate events (TRIFLUX-HUB §5.6's notifyCandidateChanged): an agent
  // that may be a candidate registered or attached its presence stream
  // (OnCandidateArrived: every role it is a candidate of), or a candidate
  // row of `wire` was written (OnCandidateChanged). Each such role that
  // waits for a holder (electable, with no holder, and asked for: its last
  // ensure found no candidate, or it has backlog) is ensured again with
  // trigger candidate_changed. A role whose ensure is in flight is looked at
  // again when that flight lands, so an event that comes while an ensure
  // reads the candidates is never lost. May block (it ensures): call from
  // the executor's threads, not from a stream's or the store's.
  void OnCandidateArrived(const std::string& agent_id);
  void OnCandidateChanged(const std::string& wire, const std::string& agent_id);

 private:
  struct Flight;

  std::string CharterVersion(RoleKind kind) const;
  bool ManagerEnabled(RoleKind kind) const;
  absl::StatusOr<EnsureReceipt> Decide(const ResolvedRoleKey& key,
                                       const EnsureRequest& request);
  // Elects the first eligible candidate of `row`, which is electable
  // (candidate_selected) or unreachable with its retry due (retry_due).
  // Nobody eligible: an electable row records no_candidate; an unreachable
  // one stays as it is.
  absl::StatusOr<EnsureReceipt> ReserveNext(const ResolvedRoleKey& key,
                                            const RoleRecord& row,
                                            const EnsureRequest& request,
                                            const std::set<std::string>& tried);
  // Reserves `holder` (a new epoch and activation id) by `trigger`'s row and
  // starts its flight.
  absl::StatusOr<EnsureReceipt> ReserveHolder(
      const ResolvedRoleKey& key, const RoleRecord& row,
      const std::string& holder, RoleTrigger trigger,
      const EnsureRequest& request, const std::set<std::string>& tried);
  std::vector<CandidateFacts> Candidates(const ResolvedRoleKey& key);
  void Fly(ResolvedRoleKey key, RoleRecord reserved,
           std::set<std::string> tried, std::string trigger);
  bool Gate(const RoleRecord& reserved);
  // Hubs sharing the database: when another hub's live seat holds the
  // reserved holder, hints that hub, lands this flight and returns true;
  // false when this hub is the one to reach the holder (it holds it, or no
  // live seat does).
  bool HandOverFlight(const ResolvedRoleKey& key, const RoleRecord& reserved);
  // Whether this hub counts the ACK timeout of a reservation held by
  // `holder`: one hub, or the hub that holds the holder, or any hub when no
  // live seat holds it.
  bool OwnsAckTimeout(const std::string& holder);
  // A reservation without an ACK deadline (one this hub's flight did not
  // make) gets one when its holder answered the probe (probe_succeeded).
  // False when the row moved on.
  bool ArmDeadline(RoleKind kind, RoleRecord* reserved);
  // A candidate failure (`failure`: probe_failed, wake_failed, ack_timeout):
  // counts it, moves the role to unreachable, then fails over to the next
  // eligible candidate (started: that flight lands itself) or waits for the
  // retry (joined; quarantined once the candidate's failures are
  // exhausted). An error when someone newer owns the role. The caller lands
  // the flight unless started.
  absl::StatusOr<EnsureReceipt> CandidateFailed(const ResolvedRoleKey& key,
                                                const RoleRecord& reserved,
                                                const std::string& code,
                                                RoleTrigger failure,
                                                std::set<std::string> tried,
                                                const std::string& trigger);
  // Moves `row` by `trigger` to the kernel's state with no holder or
  // activation left (revocations, the kill switch, no_candidate, failover,
  // exclusion expiry), `blocked` as its blocked_reason and `reason` as its
  // last_reason: a reservation when the row holds an authority, else a
  // compare-and-set; nothing when that would change nothing.
  absl::StatusOr<RoleRecord> Release(const RoleRecord& row, RoleTrigger trigger,
                                     const std::string& reason,
                                     std::optional<std::string> blocked,
                                     bool reset_retries = false);
  // Revokes every role `agent_id` holds (active: `active_trigger`;
  // elected-probing: holder_lease_expired) and ensures each again.
  void RevokeHeld(const std::string& agent_id, RoleTrigger active_trigger,
                  const std::string& ensure_trigger,
                  const std::string& cause_id);
  // Ends the role's flight; a candidate event that came meanwhile
  // (recheck_) is then looked at again on the executor.
  void Land(const std::string& wire);
  // OnCandidateChanged's work for one role: ensures it if it waits for a
  // holder, or marks it for a recheck when its ensure is in flight.
  void ReconsiderRole(const std::string& wire, const std::string& cause_id);
  // Whether `row` waits for a holder that a new candidate may be.
  bool WaitsForHolder(const RoleRecord& row) const;

  RoleRegistry* const roles_;
  PresenceRegistry* const presence_;
  StreamReach* const streams_;
  const Clock* const clock_;
  ActivatorOptions options_;

  absl::Mutex mu_;
  // Roles with a flight in the air (singleflight).
  std::set<std::string> flying_ ABSL_GUARDED_BY(mu_);
  // Hubs sharing the database: the activation id each role's latest flight
  // here carried, so that a handed-over reservation is flown once, not again
  // at every scan; and when (flights_, counted) it was recorded. A scan of
  // ContinueHandedFlights forgets the roles it no longer saw waiting for an
  // ACK that were recorded before it began.
  struct Flown {
    std::string activation_id;
    uint64_t flight = 0;
  };
  absl::flat_hash_map<std::string, Flown> flown_ ABSL_GUARDED_BY(mu_);
  uint64_t flights_ ABSL_GUARDED_BY(mu_) = 0;
  // Roles in flying_ that a candidate event named meanwhile, with the
  // event's cause id: reconsidered when their flight lands.
  std::map<std::string, std::string> recheck_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> disabled_kinds_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::unique_ptr<TransportAdapter>> adapters_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace hub

#endif  // HUB_REGISTRY_ACTIVATOR_H_
