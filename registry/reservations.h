// ReservationBook: path reservations of agents (docs/design/reservations.md).
//
// Validates requests (patterns, TTLs, ids, limits), names new reservations,
// reads the clock, and runs each operation as one store call, where the
// conflict decision and the write happen in one transaction. It keeps no
// reservation state of its own, so any number of hubs over one database
// agree. Also ends the reservations of agents presence declares gone, and
// sweeps ended ones.
#ifndef HUB_REGISTRY_RESERVATIONS_H_
#define HUB_REGISTRY_RESERVATIONS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "registry/clock.h"
#include "storage/store.h"

namespace hub {

struct ReservationLimits {
  // Live reservations one agent may hold in one project (0 = no limit).
  int64_t max_per_agent = 256;
  // Reservations one project may hold (0 = no limit).
  int64_t max_per_project = 100'000;
  // Patterns of one reservation.
  int64_t max_patterns = 64;
};

// Reservation counters for metrics, since start.
struct ReservationCounters {
  int64_t granted = 0;
  int64_t conflicts = 0;    // reserves refused for a conflict
  int64_t released = 0;     // by their holder (whole reservations)
  int64_t forced = 0;       // by an operator
  int64_t expired = 0;      // deleted by the sweep: TTL passed
  int64_t holder_gone = 0;  // deleted because the holder left
};

// What a ReservationBook observer is told about.
enum class ReservationEvent {
  kGranted,
  kConflict,
  kReleased,
  kForced,
  kExpired,
  kHolderGone,
};

struct PathReserveInput {
  std::string project_id;
  std::string agent_id;
  std::optional<int64_t> presence_generation;
  std::vector<std::string> patterns;  // as the client wrote them
  bool exclusive = true;
  std::optional<absl::Duration> ttl;  // unset: kDefaultReservationTtl
  std::string reason;
};

struct PathCheckInput {
  std::string project_id;
  std::optional<std::string> agent_id;  // exempt
  std::vector<std::string> patterns;
  bool exclusive = true;
  bool literal = false;  // patterns are paths
};

struct ReservationListQuery {
  std::optional<std::string> project_id;
  // Only reservations of these projects, when set (a token's scope).
  std::optional<std::vector<std::string>> projects;
  std::optional<std::string> agent_id;
  std::optional<std::string> path;  // a pattern; requires project_id
  int page_size = 0;                // 0: 100; at most 1000
  std::string page_token;
};
struct ReservationPage {
  std::vector<storage::ReservationRecord> reservations;
  std::string next_page_token;  // "" on the last page
};

inline constexpr absl::Duration kDefaultReservationTtl = absl::Minutes(5);
inline constexpr absl::Duration kMinReservationTtl = absl::Seconds(1);
inline constexpr absl::Duration kMaxReservationTtl = absl::Hours(24);
inline constexpr size_t kMaxCheckPaths = 10'000;
inline constexpr size_t kMaxReservationReasonBytes = 512;
inline constexpr size_t kMaxReportedConflicts = 100;

class ReservationBook {
 public:
  // `store` and `clock` must outlive the book. `new_id` names reservations
  // (default: UUIDv7).
  ReservationBook(storage::ReservationStore* store, const Clock* clock,
                  ReservationLimits limits,
                  std::function<std::string()> new_id = nullptr);

  // Grants all of the patterns or none. FAILED_PRECONDITION /
  // RESERVATION_CONFLICT (storage::ReservationConflictError) on a conflict;
  // the validation and holder reasons of reservation.proto otherwise.
  absl::StatusOr<storage::ReservationRecord> Reserve(
      const PathReserveInput& in);
  // One attempt of Reserve (as `waiter_id`'s retry when set: only waiters
  // ahead of it conflict, and a grant takes it out of the queue): the
  // conflicts come back in the outcome, uncounted.
  absl::StatusOr<storage::ReservationOutcome> Attempt(
      const PathReserveInput& in, const std::optional<std::string>& waiter_id);
  // Queues `in` as a waiter until `deadline` (ReservationWaits), waiting
  // behind `waits_for` (the ids its attempt conflicted with: WaitsFor).
  absl::StatusOr<storage::ReservationWaiter> Enqueue(
      const PathReserveInput& in, absl::Time deadline,
      std::vector<std::string> waits_for = {});
  // Takes a waiter out of its queue (its wait ended without a grant).
  void LeaveQueue(const std::string& waiter_id);
  // Counts a waiting reserve that ended in a conflict.
  void CountConflict() { Count(conflicts_, ReservationEvent::kConflict, 1); }
  absl::StatusOr<storage::ReservationRecord> Renew(
      const std::string& reservation_id, const std::string& agent_id,
      int64_t token, std::optional<absl::Duration> ttl);
  // What is left, nullopt when the reservation ended.
  absl::StatusOr<std::optional<storage::ReservationRecord>> Release(
      const std::string& reservation_id, const std::string& agent_id,
      std::optional<int64_t> token, const std::vector<std::string>& patterns);
  // Ends a reservation whoever holds it; returns it as it was.
  absl::StatusOr<storage::ReservationRecord> ForceRelease(
      const std::string& reservation_id);
  // A live reservation (RESERVATION_NOT_FOUND otherwise).
  absl::StatusOr<storage::ReservationRecord> Get(
      const std::string& reservation_id);
  absl::StatusOr<ReservationPage> List(const ReservationListQuery& query);
  // The conflicts a reservation of `in` would meet (at most
  // kMaxReportedConflicts); writes nothing.
  absl::StatusOr<std::vector<storage::ReservationConflict>> Check(
      const PathCheckInput& in);

  // The agent is gone at `generation` (stream grace ran out, offline,
  // deregistered, superseded): its reservations end now.
  void OnAgentGone(const std::string& agent_id, int64_t generation);
  // Deletes ended reservations; runs at most once per `interval` (the
  // search reads every reservation whose holder left). Returns how many.
  int64_t Sweep(absl::Duration interval = absl::Seconds(5));

  ReservationCounters counters() const;
  // Told about every change counted in counters(), with how many; set
  // before serving (metrics). Default: nothing.
  void SetObserver(std::function<void(ReservationEvent, int64_t)> observer) {
    observer_ = std::move(observer);
  }
  // Called after every write that committed a change (a grant, renewal,
  // release, forced release, or reservations ended), on the writing
  // thread: hubd kicks its ReservationFeed and hints the other hubs. Set
  // before serving. Default: nothing.
  void SetOnCommitted(std::function<void()> on_committed) {
    on_committed_ = std::move(on_committed);
  }

  // A WatchReservations filter's ids: PROJECT_ID_INVALID (required),
  // AGENT_ID_INVALID (when not empty).
  static absl::Status ValidateWatch(const std::string& project_id,
                                    const std::string& agent_id);

  // The normalized, distinct patterns, or the first pattern reason:
  // RESERVATION_TOO_MANY_PATTERNS when none, or more than `max` distinct
  // (duplicates after normalization count once). `literal`: paths.
  static absl::StatusOr<std::vector<std::string>> NormalizePatterns(
      const std::vector<std::string>& patterns, size_t max, bool literal);

 private:
  int64_t NowMs() const;
  void Count(std::atomic<int64_t>& counter, ReservationEvent event, int64_t n);
  absl::StatusOr<int64_t> TtlMs(std::optional<absl::Duration> ttl) const;

  storage::ReservationStore* const store_;
  const Clock* const clock_;
  const ReservationLimits limits_;
  std::function<std::string()> new_id_;
  std::function<void(ReservationEvent, int64_t)> observer_;
  std::function<void()> on_committed_;
  void Committed() const {
    if (on_committed_) on_committed_();
  }
  std::atomic<int64_t> last_sweep_ms_{0};
  std::atomic<int64_t> granted_{0}, conflicts_{0}, released_{0}, forced_{0},
      expired_{0}, holder_gone_{0};
};

}  // namespace hub

#endif  // HUB_REGISTRY_RESERVATIONS_H_
