// ConsoleModel: what the console shows, read from hubd's registries and
// store, and the live changes its pages follow (docs/design/console.md).
//
// Responsible for the views' JSON (the fleet: agents with status, stream,
// lease, roles held and pending inbox; the roles: state, holder, fence,
// candidates with reachability, backlog and the role's recent transitions),
// for turning what changed (a role write seen by its watch, an agent's
// presence, a publish or an ack, a job's change, a log event) into rows
// posted on the feed,
// and for the operator actions the console offers. Not responsible for HTTP,
// sessions or who may see what: callers pass the principal's project scope
// and check authority first (ConsoleHttp).
//
// Changed agents and roles are collected in sets and rendered by one worker
// thread, so a burst of changes to one row costs one render and no
// registry's caller waits for it. Thread-safe.
#ifndef HUB_HUB_CONSOLE_CONSOLE_MODEL_H_
#define HUB_HUB_CONSOLE_CONSOLE_MODEL_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "hub/console/console_feed.h"
#include "nlohmann/json.hpp"
#include "registry/activator.h"
#include "registry/clock.h"
#include "registry/messaging.h"
#include "registry/presence.h"
#include "registry/project_scope.h"
#include "registry/reservation_feed.h"
#include "registry/reservations.h"
#include "registry/role_registry.h"
#include "storage/store.h"

namespace hub::console {

struct ConsoleSources {
  PresenceRegistry* presence = nullptr;
  RoleRegistry* roles = nullptr;
  Activator* activator = nullptr;
  Messaging* messaging = nullptr;
  storage::Store* store = nullptr;
  // Path reservations (null: the console shows none).
  ReservationBook* reservations = nullptr;
  ReservationFeed* reservation_feed = nullptr;
  const Clock* clock = nullptr;
  std::string hub_instance_id;
};

struct ConsoleModelOptions {
  // Versions of each role kept for its timeline.
  size_t history_per_role = 50;
  // Log events kept for a page that opens (the events view's backlog).
  size_t recent_events = 200;
  // Messages this hub published or saw change, newest kept, for the
  // messages view.
  size_t recent_messages = 200;
  // Jobs the jobs view lists at most: waiting (blocked, queued), with a
  // live attempt (offered, running, waiting on a human), and ended (the
  // most recently changed).
  int64_t jobs_waiting = 500;
  int64_t jobs_live = 500;
  int64_t jobs_ended = 200;
  size_t feed_capacity = 4096;
};

class ConsoleModel {
 public:
  // Every source must outlive the model.
  ConsoleModel(ConsoleSources sources, ConsoleModelOptions options = {});
  // Stop().
  ~ConsoleModel();
  ConsoleModel(const ConsoleModel&) = delete;
  ConsoleModel& operator=(const ConsoleModel&) = delete;

  // Watches every role (seeding each timeline from the rows as they are,
  // and on a store with a role change log from the changes it still holds)
  // and starts the worker.
  absl::Status Start();
  // Stops watching and rendering, and closes the feed. Idempotent.
  void Stop();

  ConsoleFeed* feed() { return &feed_; }
  // The messaging the views read (the console's re-drive action).
  Messaging* messaging() const { return sources_.messaging; }
  // The reservations (the console's release action); may be null.
  ReservationBook* reservations() const { return sources_.reservations; }

  // What changed; any thread, never blocks on the store.
  void AgentChanged(const std::string& agent_id);
  void AgentsChanged(const std::vector<std::string>& agent_ids);
  void RoleChanged(const std::string& wire);
  // Messages whose state changed (published, delivered, acknowledged,
  // handed over, dead-lettered); they join the recent messages.
  void MessagesChanged(const std::vector<std::string>& message_ids);
  // Jobs whose row changed (any committed write, a late result kept).
  void JobsChanged(const std::vector<std::string>& job_ids);
  // Tells every open page to load its snapshots again (changes may have
  // been missed: the console's hints from other hubs were lost).
  void Resync();
  void LogEvent(absl::string_view level, absl::string_view event,
                const std::vector<std::pair<std::string, std::string>>& fields);

  // The views, limited to `scope`; each carries "seq", the feed's head read
  // before the rows, so that a page applies every change after it.
  //
  // The fleet: every agent, in the page's order (project, then agent id),
  // with the counts the page shows ("agents", "online", "stale",
  // "offline"; "roles" and "roles_active"). With `first`, only the first
  // that many agents in that order ("partial": true) and every count: what
  // a page draws before the whole fleet arrives.
  absl::StatusOr<nlohmann::json> Fleet(
      const ProjectScope& scope, std::optional<size_t> first = std::nullopt);
  absl::StatusOr<nlohmann::json> Roles(const ProjectScope& scope);
  // The recent messages with their recipients' states, and the dead
  // letters (newest 100) with their reasons.
  absl::StatusOr<nlohmann::json> Messages(const ProjectScope& scope);
  // The live path reservations (every hub's, from the reservation feed):
  // holder, patterns, mode, token, expiry, reason; and how many conflicting
  // reserves this hub refused since it started; and the reserves waiting in
  // their projects' queues (agent, patterns, since, deadline) that this
  // hub's feed saw join since it started.
  absl::StatusOr<nlohmann::json> Reservations(const ProjectScope& scope);
  // The jobs (JobStore::ListJobs, every hub's): the queue (blocked and
  // queued), those with a live attempt (worker, attempt, deadline), and
  // the most recently ended (failures with their errors; late results of
  // superseded attempts ride on their job's row).
  absl::StatusOr<nlohmann::json> Jobs(const ProjectScope& scope);
  // The messages of one trace (ListTrace's rules).
  absl::StatusOr<nlohmann::json> Trace(const std::string& trace_id,
                                       const ProjectScope& scope);
  nlohmann::json RecentEvents(const ProjectScope& scope);

  // Whether a change or event of `projects` is visible in `scope`.
  static bool Visible(const ProjectScope& scope,
                      const std::vector<std::string>& projects);

 private:
  struct HistoryEntry {
    int64_t version = 0;
    std::string kind;  // created | updated | removed
    std::string state;
    std::optional<std::string> holder;
    int64_t epoch = 0;
    int64_t activation_seq = 0;
    std::string reason;
    std::optional<std::string> blocked_reason;
    int64_t at_ms = 0;
  };
  struct RecentEvent {
    std::vector<std::string> projects;
    nlohmann::json json;
  };
  struct RenderedMessage {
    std::vector<std::string> projects;
    nlohmann::json json;
  };
  // A log event that names agents (agent_id, from, to) but no project:
  // the worker reads their projects before posting it.
  struct UnscopedEvent {
    nlohmann::json json;
    std::vector<std::string> projects;  // from its fields (a role, a topic)
    std::vector<std::string> agents;
  };

  // Posts a log event on the feed and keeps it for the events view.
  void PostEvent(nlohmann::json event, std::vector<std::string> projects);

  // One version of a role for its timeline; `kind`: created, updated,
  // removed or seen (the row as read at start).
  static HistoryEntry EntryOf(const RoleRecord& row, std::string kind,
                              int64_t at_ms);
  void OnRoleEvent(const RoleEvent& event);
  void Record(const std::string& wire, HistoryEntry entry);
  void Run();
  void RenderAgent(const std::string& agent_id, int64_t now_ms);
  void RenderRole(const std::string& wire, int64_t now_ms);
  // A message with its recipients' states and dead letter, and the projects
  // that may see it (Messaging's InScope rule: its role's, its sender's,
  // its addressee's). nullopt when it cannot be read.
  std::optional<RenderedMessage> RenderMessage(
      const MessageRecord& m,
      absl::flat_hash_map<std::string, std::optional<std::string>>* projects);
  std::optional<std::string> AgentProject(
      const std::string& agent_id,
      absl::flat_hash_map<std::string, std::optional<std::string>>* cache);
  // `pending`: the agent's pending inbox size (-1: unknown).
  nlohmann::json AgentJson(const AgentView& agent,
                           const std::vector<std::string>& roles_held,
                           int64_t pending);
  nlohmann::json RoleJson(
      const RoleRecord& role, const std::vector<CandidateRecord>& cands,
      const absl::flat_hash_map<std::string, nlohmann::json>& candidate_agents,
      int64_t now_ms);
  nlohmann::json HistoryJson(const std::string& wire);
  int64_t PendingFor(const std::string& agent_id, int64_t now_ms);
  // Subscribes to the reservation feed (its snapshot fills reservations_).
  absl::Status WatchReservations();
  void OnReservationChange(const storage::ReservationChange& change);
  // Reads the job and posts its row (console_jobs.cc).
  void RenderJob(const std::string& job_id);
  int64_t Now() const;

  const ConsoleSources sources_;
  const ConsoleModelOptions options_;
  ConsoleFeed feed_;
  std::unique_ptr<RoleWatch> watch_;

  absl::Mutex history_mu_;
  absl::flat_hash_map<std::string, std::deque<HistoryEntry>> history_
      ABSL_GUARDED_BY(history_mu_);
  std::deque<RecentEvent> events_ ABSL_GUARDED_BY(history_mu_);
  // Newest last; each id once.
  std::deque<std::string> recent_messages_ ABSL_GUARDED_BY(history_mu_);
  absl::flat_hash_set<std::string> recent_set_ ABSL_GUARDED_BY(history_mu_);

  // The live reservations by id, kept from the feed; changes are posted
  // under the lock the view reads them with (no overlap, no gap).
  absl::Mutex resv_mu_;
  std::map<std::string, storage::ReservationRecord> reservations_
      ABSL_GUARDED_BY(resv_mu_);
  // The reserves waiting in their projects' queues, by waiter id, from the
  // feed's waiting / wait_ended changes and the grants of waiters; kept
  // across a new subscription (snapshots hold no waiters), dropped once
  // past their deadline.
  std::map<std::string, storage::ReservationRecord> waiters_
      ABSL_GUARDED_BY(resv_mu_);
  // The subscription ended (changes missed): the next view subscribes again.
  bool resv_ended_ ABSL_GUARDED_BY(resv_mu_) = false;
  std::unique_ptr<ReservationFeed::Subscription> resv_sub_;

  absl::Mutex dirty_mu_;
  absl::flat_hash_set<std::string> dirty_agents_ ABSL_GUARDED_BY(dirty_mu_);
  absl::flat_hash_set<std::string> dirty_roles_ ABSL_GUARDED_BY(dirty_mu_);
  absl::flat_hash_set<std::string> dirty_messages_ ABSL_GUARDED_BY(dirty_mu_);
  absl::flat_hash_set<std::string> dirty_jobs_ ABSL_GUARDED_BY(dirty_mu_);
  std::deque<UnscopedEvent> unscoped_events_ ABSL_GUARDED_BY(dirty_mu_);
  bool stop_ ABSL_GUARDED_BY(dirty_mu_) = false;
  // Signalled when a set gains a member and on Stop (a CondVar for
  // ThreadSanitizer's shim, tools/tsan/README.md).
  absl::CondVar dirty_cv_;
  std::thread worker_;
};

}  // namespace hub::console

#endif  // HUB_HUB_CONSOLE_CONSOLE_MODEL_H_
