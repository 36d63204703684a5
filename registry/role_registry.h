// RoleRegistry: the domain layer over the Store for fenced roles and their
// candidates (TRIFLUX-HUB §5.3-§5.6).
//
// Responsible for validating what a caller asks (role keys given structured
// and/or as a wire, states, holder ids, field-mask patches, the four-part CAS
// guard), turning it into the store's fenced primitives, surfacing every fence
// outcome as a reason-coded status that carries the row's current fence, and
// publishing every committed role change to watchers. Not responsible for the
// fences themselves (they live in the store's SQL), for choosing a holder or
// probing it (the activator, which moves roles through Transition so that the
// transition kernel decides every state it writes and watchers see
// everything), nor for gRPC.
//
// Time comes from the injected Clock. Thread-safe.
#ifndef HUB_REGISTRY_ROLE_REGISTRY_H_
#define HUB_REGISTRY_ROLE_REGISTRY_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "registry/activation_policy.h"
#include "registry/clock.h"
#include "registry/project_scope.h"
#include "registry/role_event.h"
#include "registry/role_key.h"
#include "registry/role_transitions.h"
#include "storage/store.h"

namespace hub {

// A role as a request names it: structured, as a wire, or both (then both
// must name the same role: ROLE_KEY_MISMATCH). Neither: ROLE_KEY_INVALID.
struct RoleKeyRef {
  std::optional<RoleKeyInput> key;
  std::optional<std::string> wire;
};

// A validated role key with its canonical wire.
struct ResolvedRoleKey {
  RoleKey key;
  std::string wire;
};

// Applies the role_key.proto rule. Reasons: the role-key codes, with metadata
// "field" = "role_key" or "role_key_wire"; ROLE_KEY_MISMATCH; ROLE_KEY_INVALID.
absl::StatusOr<ResolvedRoleKey> ResolveRoleKey(const RoleKeyRef& ref);

// A role write as a caller expresses it (role.proto "Patch semantics"): a
// field that has a value is "set"; `update_mask` lists field names. With an
// empty mask every set field is written and nothing is cleared; with a
// non-empty mask exactly the listed fields are written and a listed unset
// field is cleared. Field names are those of hub.v1.RolePatch.
struct RolePatchInput {
  std::optional<RoleState> state;
  // The request named a state that is none of the five: refused
  // (ROLE_REACHABILITY_STATE_INVALID) in the registry's check order.
  bool state_unknown = false;
  std::optional<std::string> holder_agent_id;
  std::optional<std::string> previous_holder_agent_id;
  std::optional<std::string> activation_id;
  std::optional<int64_t> activation_deadline_ms;
  std::optional<int64_t> holder_lease_expires_ms;
  std::optional<std::string> charter_version;
  std::optional<int64_t> charter_acked_epoch;
  std::optional<int64_t> retry_count;
  std::optional<int64_t> next_probe_ms;
  std::optional<std::string> blocked_reason;
  std::optional<int64_t> last_transition_ms;
  std::optional<std::string> last_reason;
  std::vector<std::string> update_mask;
};

// ReserveRole (§5.3). Absent guards are not checked; present ones must match
// the row (0 for a row that does not exist yet).
struct ReserveInput {
  RoleKeyRef role;
  std::optional<int64_t> expected_version;
  std::optional<int64_t> expected_epoch;
  std::optional<int64_t> next_epoch;
  std::optional<int64_t> next_activation_seq;
  RolePatchInput patch;
};

// CompareAndSetRole (§5.4). All four guards are required (INVALID_CAS).
// expected_activation_id: nullopt = guard absent; a nullopt inside = "the
// row has no activation_id".
struct CasInput {
  RoleKeyRef role;
  std::optional<int64_t> expected_version;
  std::optional<int64_t> expected_epoch;
  std::optional<int64_t> expected_activation_seq;
  std::optional<std::optional<std::string>> expected_activation_id;
  RolePatchInput patch;
};

struct ReserveResult {
  RoleRecord role;
  bool created = false;
};

// How a state change decided by the transition kernel is fenced.
enum class TransitionWrite {
  // A reservation (§5.3) guarded by the row's version and epoch: epoch and
  // activation_seq +1, so whatever authority the row held is fenced.
  kReserve,
  // A compare-and-set (§5.4) guarded by the row's version, epoch,
  // activation_seq and activation_id: epoch and activation_seq unchanged.
  kCompareAndSet,
};

// A role write whose state the transition kernel (role_transitions.h)
// decides: the caller names the trigger, the kernel gives the next state.
struct TransitionInput {
  // The row as the caller read it. The kernel reduces its state and its
  // fence guards the write, so the state the write replaces is the one the
  // kernel reduced.
  RoleRecord from;
  RoleTrigger trigger = RoleTrigger::kStaleAck;
  TransitionWrite write = TransitionWrite::kCompareAndSet;
  // Every other field, by RolePatchInput's rules. `state` must be unset: the
  // kernel sets it (and adds it to a non-empty mask).
  RolePatchInput patch;
};

struct TransitionResult {
  RoleRecord role;            // as committed
  RoleTransition transition;  // the table row that was applied
};

// One decision of the kernel behind a registry write, for observers.
struct RoleTransitionNote {
  std::string role_key_wire;
  RoleState from = RoleState::kElectable;  // the state reduced
  RoleTrigger trigger = RoleTrigger::kStaleAck;
  // The next state; nullopt when the row was removed (scope_closed) or the
  // pair was refused.
  std::optional<RoleState> to;
  // The kernel refused the pair (INVALID_ROLE_TRANSITION): nothing was
  // written.
  bool refused = false;
  // The committed version; for a refusal or a removal, the version of the
  // row the kernel reduced.
  int64_t version = 0;
};

// ListRoles filters (§5.5); they combine with AND, empty matches everything.
struct RoleListFilter {
  std::optional<std::string> project_id;
  std::optional<RoleKind> kind;
  std::optional<std::string> scope_id;
  std::vector<RoleState> states;
  // The request named a state that is none of the five (refused, as above).
  bool states_unknown = false;
  // Only roles of these projects (the caller's token), applied before paging.
  ProjectScope scope;
};

struct RolePage {
  std::vector<RoleRecord> roles;  // by wire ascending
  std::string next_page_token;    // "" on the last page
};

// A candidate write (role_candidate.proto RoleCandidatePatch, same mask
// rules as RolePatchInput). Locators come as JSON text or as a list of JSON
// objects (structured locators already converted); not both.
struct CandidatePatchInput {
  std::optional<std::string> source;  // grant | standup | operator
  std::optional<int64_t> priority;
  std::optional<std::vector<std::string>> transport_locator_objects;
  std::optional<std::string> transport_locators_json;
  std::optional<int64_t> consecutive_probe_failures;
  std::optional<int64_t> excluded_until_ms;
  std::optional<int64_t> last_probe_ms;
  std::optional<std::string> last_probe_code;
  std::vector<std::string> update_mask;
};

struct CandidateUpsertInput {
  RoleKeyRef role;
  std::string agent_id;
  CandidatePatchInput patch;
};

struct CandidateUpsertResult {
  CandidateRecord candidate;
  bool created = false;
};

// A probe result reported for a candidate (§5.6, ReportCandidateProbe).
struct ProbeReportInput {
  RoleKeyRef role;
  std::string agent_id;
  std::string code;  // "ok", "timeout", ... (ProbeCode's lower-case words)
  std::string transport_id;
  std::optional<int64_t> probed_at_ms;  // default: now
  std::optional<int64_t> consecutive_probe_failures;
  std::optional<int64_t> excluded_until_ms;
};

struct CandidateListInput {
  std::optional<RoleKeyRef> role;  // nullopt: every role, by wire
  std::optional<std::string> agent_id;
  int page_size = 0;  // 0: 100; capped at 1000; negative: REQUEST_INVALID
  std::string page_token;
  // Only candidates of roles of these projects, applied before paging.
  ProjectScope scope;
};

struct CandidatePage {
  std::vector<CandidateRecord> candidates;
  std::string next_page_token;
};

// ---- watching

// RoleChangeKind and RoleEvent: registry/role_event.h.

// Which roles a watcher sees; fields combine with AND, unset matches all.
struct RoleWatchFilter {
  std::optional<std::string> project_id;
  std::optional<RoleKind> kind;
  std::optional<std::string> wire;
  // Only roles of these projects (the caller's token).
  ProjectScope scope;
};

// Called for each matching committed change, with no registry lock held,
// in version order per role. With RolePublication::kChangeLog: every
// change made through any hub, each version of a role once, in the order
// they committed. With kOwnWrites: this registry's writes, where a change
// superseded before it was dispatched (two writers of one role finishing
// in the opposite order) is skipped: watchers always get the newest state.
// Must not block and must not cancel its own watch.
using RoleWatchCallback = std::function<void(const RoleEvent&)>;

// A registered watch. Destroying it (or Cancel) unregisters it; after
// Cancel returns the callback is not running and never runs again.
class RoleWatch {
 public:
  virtual ~RoleWatch() = default;
  virtual void Cancel() = 0;
};

struct RoleWatchStart {
  std::unique_ptr<RoleWatch> watch;
  // The matching rows read after the watch was registered, by wire. A change
  // may be delivered to the callback before this is returned, or describe a
  // version the snapshot already holds: consumers drop versions they have.
  std::vector<RoleRecord> snapshot;
  int64_t read_at_ms = 0;
};

// Closing a lead scope (RoleService.CloseRoleScope).
struct ScopeCloseInput {
  RoleKeyRef role;        // a lead key; a cto key is ROLE_KIND_UNSUPPORTED
  std::string closed_by;  // the principal closing it (required)
  std::string reason;     // 0..256 characters, recorded with the scope
};

struct ScopeCloseOutcome {
  ResolvedRoleKey key;
  storage::ScopeCloseResult result;
};

// ListClosedScopes filters; they combine with AND, empty matches everything.
struct ClosedScopeListFilter {
  std::optional<std::string> project_id;
  std::optional<std::string> scope_id;
  // Only scopes of these projects (the caller's token), applied before
  // paging.
  ProjectScope scope;
};

struct ClosedScopePage {
  std::vector<ClosedScopeRecord> closed;  // by wire ascending
  std::string next_page_token;            // "" on the last page
};

// Where watchers' changes come from.
enum class RolePublication {
  // The registry publishes each of its own writes once committed: the
  // store has no role change log and this hub is the database's only
  // writer (SQLite).
  kOwnWrites,
  // Every change, this hub's and every other hub's, reaches watchers
  // through PublishLogged in the store's log order (RoleChangeFollower);
  // the registry's own writes publish nothing themselves, so a watcher
  // never sees a local version ahead of a remote one still unread.
  kChangeLog,
};

struct RoleRegistryOptions {
  // A uniform random number in [0, 1) for the probe backoff jitter; default:
  // a process-wide generator.
  std::function<double()> random_unit;
  // The activator's policy: ReportProbe excludes a failing candidate for
  // ExclusionMillis(failures, random_unit(), policy) (backoff with jitter,
  // then the quarantine from max_probe_failures on). Share the activator's
  // config so both agree.
  ActivatorConfig policy;
  // Told of every kernel decision behind a write: after a Transition
  // committed or a closed scope removed a row, and when the kernel refused a
  // pair (nothing written). Runs on the writer's thread with no registry lock
  // held; must not block. hubd: metrics and a log line. Default: nothing.
  std::function<void(const RoleTransitionNote&)> on_transition;
  // Told after UpsertCandidate committed a candidate row (role wire, agent
  // id), on the caller's thread with no registry lock held; must not block.
  // hubd: the activator's candidate event. Default: nothing.
  std::function<void(const std::string& wire, const std::string& agent_id)>
      on_candidate_written;
  // Told after RemoveCandidate deleted a candidate row, likewise. hubd: the
  // console's role card. Default: nothing.
  std::function<void(const std::string& wire, const std::string& agent_id)>
      on_candidate_removed;
  RolePublication publication = RolePublication::kOwnWrites;
  // Told after each role write of this registry committed (a row written or
  // removed), in either publication mode, on the writer's thread with no
  // registry lock held; must not block. hubd on a change log: wakes the
  // follower and hints the other hubs. Default: nothing.
  std::function<void()> on_role_committed;
};

class RoleRegistry {
 public:
  // `store` and `clock` must outlive the registry.
  RoleRegistry(storage::RoleStore* store, const Clock* clock,
               RoleRegistryOptions options = {});
  ~RoleRegistry();
  RoleRegistry(const RoleRegistry&) = delete;
  RoleRegistry& operator=(const RoleRegistry&) = delete;

  // §5.3: creates the row (epoch 0, activation_seq 0, version 0) or fences
  // the current authority (epoch and activation_seq exactly +1). Errors:
  // validation (INVALID_ARGUMENT); STALE_VERSION, CAS_CONFLICT (ABORTED);
  // STALE_EPOCH, STALE_ACTIVATION_SEQ (FAILED_PRECONDITION), with the row's
  // fence in metadata; store errors.
  absl::StatusOr<ReserveResult> Reserve(const ReserveInput& input);
  // §5.4: writes the patch only if version, epoch, activation_seq and
  // activation_id (null-safe) match; version +1, epoch and seq unchanged.
  // Errors: validation incl. INVALID_CAS; ROLE_NOT_FOUND; STALE_VERSION,
  // CAS_CONFLICT (ABORTED); STALE_EPOCH, STALE_ACTIVATION_SEQ,
  // STALE_ACTIVATION_ID (FAILED_PRECONDITION), with the row's fence.
  absl::StatusOr<RoleRecord> CompareAndSet(const CasInput& input);
  // Reserve and CompareAndSet without parking the caller: `done` runs once,
  // on the caller's thread for a request refused before the write, else on a
  // store thread once the write is durable (or failed).
  void ReserveAsync(const ReserveInput& input,
                    storage::Callback<ReserveResult> done);
  void CompareAndSetAsync(const CasInput& input,
                          storage::Callback<RoleRecord> done);
  // A state change decided by the transition kernel, the way every in-hub
  // state change is written (the activator's, and the release of a
  // quarantined role): ReduceRoleTransition(from.state, trigger) gives the
  // next state, which the patch then writes as a Reserve or CompareAndSet
  // guarded by `from` (their fences, errors and publication). When the table
  // has no row for the pair, or its row writes nothing (stale_ack only
  // rejects an ACK; scope_closed is CloseScope's), nothing is written and the
  // answer is FAILED_PRECONDITION / INVALID_ROLE_TRANSITION with metadata
  // role_key_wire, state, trigger and version (the role's state does not
  // allow the change); on_transition is told either way. A patch that sets
  // state is REQUEST_INVALID.
  absl::StatusOr<TransitionResult> Transition(const TransitionInput& input);

  // ROLE_NOT_FOUND when absent.
  absl::StatusOr<RoleRecord> Get(const RoleKeyRef& role);
  // §5.5 filters, by wire, paged (0: 100 per page, at most 1000).
  // PROJECT_ID_INVALID, SCOPE_ID_INVALID, ROLE_REACHABILITY_STATE_INVALID,
  // REQUEST_INVALID, PAGE_TOKEN_INVALID.
  absl::StatusOr<RolePage> List(const RoleListFilter& filter, int page_size,
                                const std::string& page_token);

  // §5.6 merge upsert. Creates the role row first when absent (electable,
  // epoch 0). Creating a candidate or changing its locators resets its
  // failures and exclusion (unless the call sets them) and releases a
  // quarantined role to electable by a reservation.
  absl::StatusOr<CandidateUpsertResult> UpsertCandidate(
      const CandidateUpsertInput& input);
  // Removes the candidate; true when there was one (an absent candidate or
  // role is no error). Role-key reasons, AGENT_ID_INVALID.
  absl::StatusOr<bool> RemoveCandidate(const RoleKeyRef& role,
                                       const std::string& agent_id);
  // Activator order: priority DESC, updated_at DESC, agent_id ASC.
  absl::StatusOr<CandidatePage> ListCandidates(const CandidateListInput& input);
  // §5.6 reachability update: ok resets failures and exclusion;
  // adapter_unavailable keeps both; anything else counts one failure and
  // excludes for the policy's backoff with jitter (the quarantine, 120 s by
  // default, from max_probe_failures on). The count and the exclusion it
  // implies are decided inside the store's write, so concurrent failure
  // reports each get their own count's exclusion.
  // CANDIDATE_NOT_FOUND when absent.
  absl::StatusOr<CandidateRecord> ReportProbe(const ProbeReportInput& input);

  // Closes a lead scope for good (docs/design/roles.md "Closing a lead
  // scope"): one store transaction records it, deletes the role row and its
  // candidates and dead-letters the role's pending messages (reason
  // ROLE_SCOPE_CLOSED); watchers then get a REMOVED change with the row's
  // last state. Closing a closed scope changes nothing (already_closed).
  // Errors: role-key reasons, ROLE_KEY_MISMATCH, ROLE_KIND_UNSUPPORTED (a
  // cto key), REQUEST_INVALID (reason over 256 characters)
  // (INVALID_ARGUMENT); store errors.
  absl::StatusOr<ScopeCloseOutcome> CloseScope(const ScopeCloseInput& input);
  // The closed lead scopes, as recorded, by wire, paged like List (0: 100
  // per page, at most 1000). PROJECT_ID_INVALID, SCOPE_ID_INVALID,
  // REQUEST_INVALID, PAGE_TOKEN_INVALID.
  absl::StatusOr<ClosedScopePage> ListClosedScopes(
      const ClosedScopeListFilter& filter, int page_size,
      const std::string& page_token);
  // Whether `key` names a lead scope that is closed (a cto key: never).
  // Closed scopes never reopen, so a positive answer is remembered; a
  // negative one reads the store each time.
  absl::StatusOr<bool> ScopeClosed(const ResolvedRoleKey& key);

  // Registers `callback` for changes matching `filter`, then reads the
  // matching rows. Validation: PROJECT_ID_INVALID.
  absl::StatusOr<RoleWatchStart> Watch(const RoleWatchFilter& filter,
                                       RoleWatchCallback callback);

  // Registered watches (for tests and metrics).
  int WatchCount();

  // Publishes a change read from the store's role change log, with
  // publication kChangeLog (without it, does nothing). REQUIRES: changes
  // come from one caller at a time, in seq order (RoleChangeFollower).
  void PublishLogged(const storage::RoleChange& change);

 private:
  class Watcher;
  class WatchHandle;

  // The fenced writes behind Reserve and CompareAndSet, for built requests:
  // reason mapping and publication.
  absl::StatusOr<ReserveResult> ReserveStorePatch(
      const storage::RoleReservation& reservation);
  absl::StatusOr<RoleRecord> CompareAndSetStorePatch(
      const storage::RoleCas& cas);
  // Request validation (and the rule reads it needs) before a write.
  absl::StatusOr<storage::RoleReservation> BuildReservation(
      const ReserveInput& input);
  absl::StatusOr<storage::RoleCas> BuildCas(const CasInput& input);
  // After a write: reason mapping and publication.
  absl::StatusOr<ReserveResult> Reserved(const std::string& wire,
                                         absl::StatusOr<storage::RoleWrite> w);
  absl::StatusOr<RoleRecord> Written(const std::string& wire,
                                     absl::StatusOr<storage::RoleWrite> w);
  // After an own write committed a row: tells watchers (kOwnWrites; kind
  // derived from its version) and on_role_committed.
  void Publish(const RoleRecord& role);
  // After an own write deleted a row (`role`: its last state): the same.
  // Nothing of that wire is delivered afterwards.
  void PublishRemoved(const RoleRecord& role);
  void Dispatch(RoleEvent event);
  void Unregister(uint64_t id);
  absl::Status EnsureRoleRow(const ResolvedRoleKey& key);
  // Tells on_transition, if set.
  void Note(const RoleTransitionNote& note);
  // A registration event (candidate_registered, locator_registered) releases
  // a quarantined role to electable through the kernel.
  absl::Status ReleaseQuarantine(const std::string& wire, RoleTrigger trigger);
  double RandomUnit();

  storage::RoleStore* const store_;
  const Clock* const clock_;
  RoleRegistryOptions options_;

  absl::Mutex watch_mu_;
  uint64_t next_watch_id_ ABSL_GUARDED_BY(watch_mu_) = 1;
  absl::flat_hash_map<uint64_t, std::shared_ptr<Watcher>> watchers_
      ABSL_GUARDED_BY(watch_mu_);

  // Dispatch queue: events are delivered by one thread at a time, in queue
  // order; a version older than one already queued for the role is skipped.
  absl::Mutex dispatch_mu_;
  std::vector<RoleEvent> queue_ ABSL_GUARDED_BY(dispatch_mu_);
  bool dispatching_ ABSL_GUARDED_BY(dispatch_mu_) = false;
  absl::flat_hash_map<std::string, int64_t> queued_version_
      ABSL_GUARDED_BY(dispatch_mu_);

  absl::Mutex random_mu_;
  uint64_t random_state_ ABSL_GUARDED_BY(random_mu_);

  // Lead wires known to be closed (they never reopen).
  absl::Mutex closed_mu_;
  absl::flat_hash_set<std::string> closed_wires_ ABSL_GUARDED_BY(closed_mu_);
};

}  // namespace hub

#endif  // HUB_REGISTRY_ROLE_REGISTRY_H_
