#include "hub/console/console_model.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "registry/role_key.h"
#include "status/status.h"

namespace hub::console {
namespace {

using nlohmann::json;

constexpr int kPageSize = 1000;
// Log events waiting for the worker to read their agents' projects, at most.
constexpr size_t kMaxUnscopedEvents = 1000;
// Pending messages counted per inbox at most (the inbox limit's default).
constexpr int64_t kMaxCountedPending = 1'000'000;
// Role messages whose recipients are looked at, per role.
constexpr size_t kMaxInspectedBacklog = 100;

json Nullable(const std::optional<std::string>& v) {
  return v.has_value() ? json(*v) : json(nullptr);
}
json Nullable(const std::optional<int64_t>& v) {
  return v.has_value() ? json(*v) : json(nullptr);
}

std::optional<std::string> ProjectOfWire(const std::string& wire) {
  absl::StatusOr<RoleKey> key = DecodeRoleKey(wire);
  if (!key.ok()) return std::nullopt;
  return key->project_id;
}

std::vector<std::string> ProjectList(const std::optional<std::string>& p) {
  if (!p.has_value() || p->empty()) return {};
  return {*p};
}

const char* KindWord(RoleChangeKind kind) {
  switch (kind) {
    case RoleChangeKind::kCreated:
      return "created";
    case RoleChangeKind::kRemoved:
      return "removed";
    case RoleChangeKind::kSnapshot:
      return "seen";
    case RoleChangeKind::kUpdated:
    default:
      return "updated";
  }
}

// How the activator could reach a candidate now, in one word.
std::string Reachability(const CandidateRecord& c, const json& agent,
                         int64_t now_ms) {
  if (c.excluded_until_ms.has_value() && *c.excluded_until_ms > now_ms) {
    return "excluded";
  }
  if (agent.is_null()) return "unregistered";
  const std::string status = agent.value("status", "");
  if (status != "online") return status;
  if (agent.value("attached", false)) return "stream";
  return c.transport_locators_json != "[]" ? "locator" : "no_route";
}

}  // namespace

ConsoleModel::ConsoleModel(ConsoleSources sources, ConsoleModelOptions options)
    : sources_(std::move(sources)),
      options_(options),
      feed_(options.feed_capacity) {}

ConsoleModel::~ConsoleModel() { Stop(); }

int64_t ConsoleModel::Now() const { return UnixMillis(sources_.clock->Now()); }

bool ConsoleModel::Visible(const ProjectScope& scope,
                           const std::vector<std::string>& projects) {
  if (scope.all) return true;
  for (const std::string& p : projects) {
    if (scope.Allows(p)) return true;
  }
  return false;
}

absl::Status ConsoleModel::Start() {
  absl::StatusOr<RoleWatchStart> watch = sources_.roles->Watch(
      RoleWatchFilter{}, [this](const RoleEvent& e) { OnRoleEvent(e); });
  if (!watch.ok()) return watch.status();
  watch_ = std::move(watch->watch);
  // The change log still holds the recent past of every role (PostgreSQL):
  // the timelines start from it; elsewhere from the rows as they are now.
  if (sources_.store->roles().HasRoleChangeLog()) {
    absl::StatusOr<int64_t> head = sources_.store->roles().RoleChangeHead();
    if (head.ok()) {
      const int64_t window = 5000;
      absl::StatusOr<storage::RoleChangePage> page =
          sources_.store->roles().ReadRoleChanges(
              std::max<int64_t>(0, *head - window), window);
      if (page.ok()) {
        for (const storage::RoleChange& c : page->changes) {
          const char* kind =
              c.kind == storage::RoleChange::Kind::kCreated   ? "created"
              : c.kind == storage::RoleChange::Kind::kRemoved ? "removed"
                                                              : "updated";
          Record(c.role.role_key_wire,
                 EntryOf(c.role, kind, c.committed_at_ms));
        }
      }
    }
  }
  for (const RoleRecord& row : watch->snapshot) {
    Record(row.role_key_wire, EntryOf(row, KindWord(RoleChangeKind::kSnapshot),
                                      row.last_transition_ms));
  }
  if (absl::Status s = WatchReservations(); !s.ok()) return s;
  worker_ = std::thread([this] { Run(); });
  return absl::OkStatus();
}

void ConsoleModel::Stop() {
  if (watch_ != nullptr) watch_->Cancel();
  if (resv_sub_ != nullptr) resv_sub_->Cancel();
  {
    absl::MutexLock lock(&dirty_mu_);
    stop_ = true;
    dirty_cv_.SignalAll();
  }
  if (worker_.joinable()) worker_.join();
  feed_.Close();
}

ConsoleModel::HistoryEntry ConsoleModel::EntryOf(const RoleRecord& row,
                                                 std::string kind,
                                                 int64_t at_ms) {
  HistoryEntry entry;
  entry.version = row.version;
  entry.kind = std::move(kind);
  entry.state = std::string(RoleStateName(row.state));
  entry.holder = row.holder_agent_id;
  entry.epoch = row.epoch;
  entry.activation_seq = row.activation_seq;
  entry.reason = row.last_reason;
  entry.blocked_reason = row.blocked_reason;
  entry.at_ms = at_ms;
  return entry;
}

void ConsoleModel::Record(const std::string& wire, HistoryEntry entry) {
  absl::MutexLock lock(&history_mu_);
  std::deque<HistoryEntry>& h = history_[wire];
  // Versions ascending, each once: the log's, the snapshot's and the
  // watch's views of one version are the same version.
  auto at = std::lower_bound(
      h.begin(), h.end(), entry.version,
      [](const HistoryEntry& e, int64_t v) { return e.version < v; });
  if (at != h.end() && at->version == entry.version) {
    if (entry.kind == "seen") return;
    *at = std::move(entry);
  } else {
    h.insert(at, std::move(entry));
  }
  while (h.size() > options_.history_per_role) h.pop_front();
}

void ConsoleModel::OnRoleEvent(const RoleEvent& event) {
  const RoleRecord& row = event.role;
  std::optional<std::string> before;
  {
    absl::MutexLock lock(&history_mu_);
    auto it = history_.find(row.role_key_wire);
    if (it != history_.end() && !it->second.empty()) {
      before = it->second.back().holder;
    }
  }
  Record(row.role_key_wire,
         EntryOf(row, KindWord(event.kind),
                 event.changed_at_ms != 0 ? event.changed_at_ms
                                          : row.last_transition_ms));
  RoleChanged(row.role_key_wire);
  // The roles an agent holds are part of its fleet row.
  std::vector<std::string> agents;
  if (before.has_value()) agents.push_back(*before);
  if (row.holder_agent_id.has_value() && row.holder_agent_id != before) {
    agents.push_back(*row.holder_agent_id);
  }
  AgentsChanged(agents);
}

void ConsoleModel::AgentChanged(const std::string& agent_id) {
  AgentsChanged({agent_id});
}

void ConsoleModel::AgentsChanged(const std::vector<std::string>& agent_ids) {
  if (agent_ids.empty()) return;
  absl::MutexLock lock(&dirty_mu_);
  dirty_agents_.insert(agent_ids.begin(), agent_ids.end());
  dirty_cv_.Signal();
}

void ConsoleModel::RoleChanged(const std::string& wire) {
  absl::MutexLock lock(&dirty_mu_);
  dirty_roles_.insert(wire);
  dirty_cv_.Signal();
}

void ConsoleModel::MessagesChanged(const std::vector<std::string>& ids) {
  if (ids.empty()) return;
  {
    absl::MutexLock lock(&history_mu_);
    // In the order first seen; a change to a known message keeps its place.
    for (const std::string& id : ids) {
      if (recent_set_.insert(id).second) recent_messages_.push_back(id);
    }
    while (recent_messages_.size() > options_.recent_messages) {
      recent_set_.erase(recent_messages_.front());
      recent_messages_.pop_front();
    }
  }
  absl::MutexLock lock(&dirty_mu_);
  dirty_messages_.insert(ids.begin(), ids.end());
  dirty_cv_.Signal();
}

void ConsoleModel::JobsChanged(const std::vector<std::string>& job_ids) {
  if (job_ids.empty()) return;
  absl::MutexLock lock(&dirty_mu_);
  dirty_jobs_.insert(job_ids.begin(), job_ids.end());
  dirty_cv_.Signal();
}

void ConsoleModel::Resync() { feed_.Post("reset", {}, "{}"); }

void ConsoleModel::LogEvent(
    absl::string_view level, absl::string_view event,
    const std::vector<std::pair<std::string, std::string>>& fields) {
  json j;
  j["at_ms"] = Now();
  j["level"] = std::string(level);
  j["event"] = std::string(event);
  json f = json::object();
  std::vector<std::string> project;
  std::vector<std::string> agents;
  for (const auto& [k, v] : fields) {
    f[k] = v;
    if (k == "project_id" && !v.empty()) project.push_back(v);
  }
  if (project.empty()) {
    for (const auto& [k, v] : fields) {
      if (k == "role") {
        if (std::optional<std::string> p = ProjectOfWire(v))
          project.push_back(*p);
      } else if (k == "agent_id" || k == "from" || k == "to" || k == "topic") {
        // A role's topic names its project; an agent's project is read by
        // the worker (never on the thread that logs).
        absl::string_view value = v;
        if (absl::ConsumePrefix(&value, "topic:role:")) {
          if (std::optional<std::string> p = ProjectOfWire(std::string(value)))
            project.push_back(*p);
        } else if (k != "topic" && !value.empty() &&
                   !absl::StartsWith(value, "topic:")) {
          agents.push_back(v);
        }
      }
    }
  }
  j["fields"] = std::move(f);
  if (!agents.empty()) {
    absl::MutexLock lock(&dirty_mu_);
    if (unscoped_events_.size() < kMaxUnscopedEvents) {
      std::sort(agents.begin(), agents.end());
      agents.erase(std::unique(agents.begin(), agents.end()), agents.end());
      unscoped_events_.push_back(
          UnscopedEvent{std::move(j), std::move(project), std::move(agents)});
      dirty_cv_.Signal();
      return;
    }
    // Too many waiting: shown as of no project (to every-project tokens).
  }
  PostEvent(std::move(j), std::move(project));
}

void ConsoleModel::PostEvent(json j, std::vector<std::string> projects) {
  // Posted under the lock that RecentEvents reads the backlog with, so
  // that a page's backlog and the feed after its seq never overlap.
  absl::MutexLock lock(&history_mu_);
  const int64_t seq =
      feed_.Post("event", projects,
                 j.dump(-1, ' ', false, json::error_handler_t::replace));
  j["seq"] = seq;
  events_.push_back(RecentEvent{std::move(projects), std::move(j)});
  while (events_.size() > options_.recent_events) events_.pop_front();
}

void ConsoleModel::Run() {
  while (true) {
    absl::flat_hash_set<std::string> agents;
    absl::flat_hash_set<std::string> roles;
    absl::flat_hash_set<std::string> messages;
    absl::flat_hash_set<std::string> jobs;
    std::deque<UnscopedEvent> events;
    {
      absl::MutexLock lock(&dirty_mu_);
      while (!stop_ && dirty_agents_.empty() && dirty_roles_.empty() &&
             dirty_messages_.empty() && dirty_jobs_.empty() &&
             unscoped_events_.empty()) {
        dirty_cv_.Wait(&dirty_mu_);
      }
      if (stop_) return;
      agents.swap(dirty_agents_);
      roles.swap(dirty_roles_);
      messages.swap(dirty_messages_);
      jobs.swap(dirty_jobs_);
      events.swap(unscoped_events_);
    }
    const int64_t now = Now();
    for (const std::string& wire : roles) RenderRole(wire, now);
    for (const std::string& id : agents) RenderAgent(id, now);
    for (const std::string& id : jobs) RenderJob(id);
    absl::flat_hash_map<std::string, std::optional<std::string>> projects;
    for (const std::string& id : messages) {
      absl::StatusOr<MessageRecord> m =
          sources_.store->messages().GetMessage(id);
      if (!m.ok()) continue;
      std::optional<RenderedMessage> r = RenderMessage(*m, &projects);
      if (r.has_value()) {
        feed_.Post(
            "message", std::move(r->projects),
            r->json.dump(-1, ' ', false, json::error_handler_t::replace));
      }
    }
    // Events of agents: seen by the tokens of those agents' projects.
    for (UnscopedEvent& e : events) {
      std::vector<std::string> of = std::move(e.projects);
      for (const std::string& agent : e.agents) {
        std::optional<std::string> p = AgentProject(agent, &projects);
        if (p.has_value() && !p->empty()) of.push_back(*p);
      }
      PostEvent(std::move(e.json), std::move(of));
    }
  }
}

int64_t ConsoleModel::PendingFor(const std::string& agent_id, int64_t now_ms) {
  absl::StatusOr<int64_t> n = sources_.store->messages().CountPendingForAgent(
      agent_id, now_ms, kMaxCountedPending);
  return n.ok() ? *n : -1;
}

json ConsoleModel::AgentJson(const AgentView& agent,
                             const std::vector<std::string>& roles_held,
                             int64_t pending) {
  const AgentRecord& r = agent.record;
  json j;
  j["agent_id"] = r.agent_id;
  j["project_id"] = Nullable(r.project_id);
  j["cli"] = r.cli;
  j["status"] = std::string(AgentStatusName(r.status));
  j["attached"] = agent.stream_attached;
  j["last_seen_ms"] = r.last_seen_ms;
  j["lease_expires_ms"] = r.lease_expires_ms;
  j["ttl_ms"] = absl::ToInt64Milliseconds(agent.ttl);
  j["generation"] = r.presence_generation;
  j["host_id"] = Nullable(r.host_id);
  j["roles"] = roles_held;
  j["pending"] = pending;
  return j;
}

void ConsoleModel::RenderAgent(const std::string& agent_id, int64_t now_ms) {
  absl::StatusOr<AgentView> agent = sources_.presence->Get(agent_id);
  if (!agent.ok()) return;  // never registered (or unreadable now)
  std::vector<std::string> held;
  storage::RoleFilter filter;
  if (agent->record.project_id.has_value()) {
    filter.project_id = agent->record.project_id;
  }
  absl::StatusOr<std::vector<RoleRecord>> roles =
      sources_.store->roles().ListRoles(filter);
  if (roles.ok()) {
    for (const RoleRecord& role : *roles) {
      if (role.holder_agent_id == agent_id) held.push_back(role.role_key_wire);
    }
  }
  json j = AgentJson(*agent, held, PendingFor(agent_id, now_ms));
  feed_.Post("agent", ProjectList(agent->record.project_id),
             j.dump(-1, ' ', false, json::error_handler_t::replace));
  // What the agent acknowledged may have been the backlog of a role it
  // holds: those rows are rendered again next.
  for (const std::string& wire : held) RoleChanged(wire);
}

json ConsoleModel::HistoryJson(const std::string& wire) {
  json out = json::array();
  absl::MutexLock lock(&history_mu_);
  auto it = history_.find(wire);
  if (it == history_.end()) return out;
  for (const HistoryEntry& e : it->second) {
    out.push_back({{"version", e.version},
                   {"kind", e.kind},
                   {"state", e.state},
                   {"holder", Nullable(e.holder)},
                   {"epoch", e.epoch},
                   {"activation_seq", e.activation_seq},
                   {"reason", e.reason},
                   {"blocked_reason", Nullable(e.blocked_reason)},
                   {"at_ms", e.at_ms}});
  }
  return out;
}

json ConsoleModel::RoleJson(
    const RoleRecord& role, const std::vector<CandidateRecord>& cands,
    const absl::flat_hash_map<std::string, json>& candidate_agents,
    int64_t now_ms) {
  json j;
  j["wire"] = role.role_key_wire;
  j["project_id"] = role.project_id;
  j["kind"] = role.role_kind;
  j["scope_id"] = role.scope_id;
  j["state"] = std::string(RoleStateName(role.state));
  j["holder"] = Nullable(role.holder_agent_id);
  j["previous_holder"] = Nullable(role.previous_holder_agent_id);
  j["epoch"] = role.epoch;
  j["activation_seq"] = role.activation_seq;
  j["activation_id"] = Nullable(role.activation_id);
  j["blocked_reason"] = Nullable(role.blocked_reason);
  j["last_reason"] = role.last_reason;
  j["last_transition_ms"] = role.last_transition_ms;
  j["retry_count"] = role.retry_count;
  j["next_probe_ms"] = Nullable(role.next_probe_ms);
  j["holder_lease_expires_ms"] = Nullable(role.holder_lease_expires_ms);
  j["version"] = role.version;
  json candidates = json::array();
  for (const CandidateRecord& c : cands) {
    auto agent = candidate_agents.find(c.agent_id);
    const json& a = agent == candidate_agents.end() ? json() : agent->second;
    candidates.push_back({{"agent_id", c.agent_id},
                          {"priority", c.priority},
                          {"source", c.source},
                          {"failures", c.consecutive_probe_failures},
                          {"excluded_until_ms", Nullable(c.excluded_until_ms)},
                          {"last_probe_ms", Nullable(c.last_probe_ms)},
                          {"last_probe_code", Nullable(c.last_probe_code)},
                          {"reachability", Reachability(c, a, now_ms)}});
  }
  j["candidates"] = std::move(candidates);
  // Role messages not yet acknowledged, and of those the ones no holder
  // received yet (waiting for the next one).
  absl::StatusOr<std::vector<MessageRecord>> backlog =
      sources_.store->messages().ListPendingRoleMessages(role.role_key_wire,
                                                         now_ms);
  int64_t waiting = 0;
  if (backlog.ok()) {
    for (size_t i = 0; i < backlog->size() && i < kMaxInspectedBacklog; ++i) {
      absl::StatusOr<std::vector<InboxRecord>> inbox =
          sources_.store->messages().ListInbox((*backlog)[i].id);
      if (inbox.ok() && inbox->empty()) ++waiting;
    }
  }
  j["backlog"] = backlog.ok() ? static_cast<int64_t>(backlog->size()) : -1;
  j["waiting"] = backlog.ok() ? waiting : -1;
  j["history"] = HistoryJson(role.role_key_wire);
  return j;
}

void ConsoleModel::RenderRole(const std::string& wire, int64_t now_ms) {
  RoleKeyRef ref;
  ref.wire = wire;
  absl::StatusOr<RoleRecord> role = sources_.roles->Get(ref);
  if (!role.ok()) {
    if (ReasonOf(role.status()) != "ROLE_NOT_FOUND") return;
    json gone = {{"wire", wire}, {"removed", true}};
    feed_.Post("role", ProjectList(ProjectOfWire(wire)),
               gone.dump(-1, ' ', false, json::error_handler_t::replace));
    return;
  }
  absl::StatusOr<std::vector<CandidateRecord>> cands =
      sources_.store->roles().ListCandidates(wire);
  std::vector<CandidateRecord> list;
  if (cands.ok()) list = std::move(*cands);
  absl::flat_hash_map<std::string, json> agents;
  for (const CandidateRecord& c : list) {
    absl::StatusOr<AgentView> a = sources_.presence->Get(c.agent_id);
    if (a.ok()) {
      agents[c.agent_id] = {
          {"status", std::string(AgentStatusName(a->record.status))},
          {"attached", a->stream_attached}};
    }
  }
  json j = RoleJson(*role, list, agents, now_ms);
  feed_.Post("role", {role->project_id},
             j.dump(-1, ' ', false, json::error_handler_t::replace));
}

absl::StatusOr<json> ConsoleModel::Fleet(const ProjectScope& scope,
                                         std::optional<size_t> first) {
  const int64_t seq = feed_.head();
  const int64_t now = Now();
  storage::RoleFilter role_filter;
  role_filter.projects = scope.StoreProjects();
  absl::StatusOr<std::vector<RoleRecord>> roles =
      sources_.store->roles().ListRoles(role_filter);
  if (!roles.ok()) return roles.status();
  absl::flat_hash_map<std::string, std::vector<std::string>> held;
  int64_t roles_active = 0;
  for (const RoleRecord& r : *roles) {
    if (r.holder_agent_id.has_value()) {
      held[*r.holder_agent_id].push_back(r.role_key_wire);
    }
    if (r.state == RoleState::kActive) ++roles_active;
  }
  // Every inbox counted in one read, not one per agent.
  absl::StatusOr<std::vector<std::pair<std::string, int64_t>>> counts =
      sources_.store->messages().CountPendingByAgent(now);
  if (!counts.ok()) return counts.status();
  absl::flat_hash_map<std::string, int64_t> pending(counts->begin(),
                                                    counts->end());
  std::vector<AgentView> views;
  AgentFilter filter;
  filter.scope = scope;
  std::string token;
  do {
    absl::StatusOr<AgentPage> page =
        sources_.presence->List(filter, kPageSize, token);
    if (!page.ok()) return page.status();
    for (AgentView& a : page->agents) views.push_back(std::move(a));
    token = page->next_page_token;
  } while (!token.empty());
  absl::flat_hash_map<std::string, int64_t> by_status = {
      {"online", 0}, {"stale", 0}, {"offline", 0}};
  for (const AgentView& a : views) {
    ++by_status[std::string(AgentStatusName(a.record.status))];
  }
  // The page's order: project (none first), then agent id; of a partial
  // fleet only the first rows are put in order.
  const size_t shown = std::min(first.value_or(views.size()), views.size());
  auto order = [](const AgentView& a, const AgentView& b) {
    const std::optional<std::string>& pa = a.record.project_id;
    const std::optional<std::string>& pb = b.record.project_id;
    // No project sorts first, as the page's "" does.
    if (pa.has_value() != pb.has_value()) return !pa.has_value();
    if (pa.has_value() && *pa != *pb) return *pa < *pb;
    return a.record.agent_id < b.record.agent_id;
  };
  std::partial_sort(views.begin(), views.begin() + shown, views.end(), order);
  json agents = json::array();
  for (size_t i = 0; i < shown; ++i) {
    const AgentView& a = views[i];
    auto h = held.find(a.record.agent_id);
    auto p = pending.find(a.record.agent_id);
    agents.push_back(
        AgentJson(a, h == held.end() ? std::vector<std::string>{} : h->second,
                  p == pending.end() ? 0 : p->second));
  }
  return json{{"seq", seq},
              {"server_time_ms", now},
              {"hub_instance_id", sources_.hub_instance_id},
              {"partial", shown < views.size()},
              {"counts",
               {{"agents", static_cast<int64_t>(views.size())},
                {"online", by_status["online"]},
                {"stale", by_status["stale"]},
                {"offline", by_status["offline"]},
                {"roles", static_cast<int64_t>(roles->size())},
                {"roles_active", roles_active}}},
              {"agents", std::move(agents)}};
}

absl::StatusOr<json> ConsoleModel::Roles(const ProjectScope& scope) {
  const int64_t seq = feed_.head();
  const int64_t now = Now();
  // Candidates of every visible role, and what the presence registry says
  // of their agents, each read once.
  storage::CandidatePageQuery query;
  query.projects = scope.StoreProjects();
  absl::StatusOr<std::vector<CandidateRecord>> cands =
      sources_.store->roles().ListCandidatesPage(query);
  if (!cands.ok()) return cands.status();
  absl::flat_hash_map<std::string, std::vector<CandidateRecord>> by_role;
  absl::flat_hash_map<std::string, json> agents;
  for (CandidateRecord& c : *cands) {
    agents.emplace(c.agent_id, json());
    by_role[c.role_key_wire].push_back(std::move(c));
  }
  for (auto& [id, info] : agents) {
    absl::StatusOr<AgentView> a = sources_.presence->Get(id);
    if (a.ok()) {
      info = {{"status", std::string(AgentStatusName(a->record.status))},
              {"attached", a->stream_attached}};
    }
  }
  json roles = json::array();
  RoleListFilter filter;
  filter.scope = scope;
  std::string token;
  do {
    absl::StatusOr<RolePage> page =
        sources_.roles->List(filter, kPageSize, token);
    if (!page.ok()) return page.status();
    for (const RoleRecord& r : page->roles) {
      auto c = by_role.find(r.role_key_wire);
      roles.push_back(RoleJson(
          r, c == by_role.end() ? std::vector<CandidateRecord>{} : c->second,
          agents, now));
    }
    token = page->next_page_token;
  } while (!token.empty());
  return json{{"seq", seq},
              {"server_time_ms", now},
              {"hub_instance_id", sources_.hub_instance_id},
              {"roles", std::move(roles)}};
}

json ConsoleModel::RecentEvents(const ProjectScope& scope) {
  json events = json::array();
  absl::MutexLock lock(&history_mu_);
  const int64_t seq = feed_.head();
  for (const RecentEvent& e : events_) {
    if (Visible(scope, e.projects)) events.push_back(e.json);
  }
  return json{{"seq", seq}, {"events", std::move(events)}};
}

std::optional<std::string> ConsoleModel::AgentProject(
    const std::string& agent_id,
    absl::flat_hash_map<std::string, std::optional<std::string>>* cache) {
  auto it = cache->find(agent_id);
  if (it != cache->end()) return it->second;
  std::optional<std::string> project;
  // Not an agent (an address, a topic) or unknown: no project.
  absl::StatusOr<AgentRecord> agent =
      sources_.store->agents().GetAgent(agent_id);
  if (agent.ok()) project = agent->project_id;
  (*cache)[agent_id] = project;
  return project;
}

std::optional<ConsoleModel::RenderedMessage> ConsoleModel::RenderMessage(
    const MessageRecord& m,
    absl::flat_hash_map<std::string, std::optional<std::string>>* projects) {
  RenderedMessage out;
  if (m.role_key_wire.has_value()) {
    if (std::optional<std::string> p = ProjectOfWire(*m.role_key_wire)) {
      out.projects.push_back(*p);
    }
  }
  for (const std::string* agent : {&m.from_agent, &m.to_agent}) {
    std::optional<std::string> p = AgentProject(*agent, projects);
    if (p.has_value() && !p->empty()) out.projects.push_back(*p);
  }
  json recipients = json::array();
  absl::StatusOr<std::vector<InboxRecord>> inbox =
      sources_.store->messages().ListInbox(m.id);
  if (!inbox.ok()) return std::nullopt;
  for (const InboxRecord& r : *inbox) {
    const char* state = r.acked_at_ms.has_value()                ? "acked"
                        : m.status == MessageStatus::kDeadLetter ? "dead_letter"
                        : r.delivered_at_ms.has_value()          ? "delivered"
                                                                 : "queued";
    recipients.push_back({{"agent_id", r.agent_id},
                          {"state", state},
                          {"delivered_at_ms", Nullable(r.delivered_at_ms)},
                          {"acked_at_ms", Nullable(r.acked_at_ms)},
                          {"attempts", r.attempts}});
  }
  json dead = nullptr;
  if (m.status == MessageStatus::kDeadLetter) {
    absl::StatusOr<DeadLetterRecord> d =
        sources_.store->messages().GetDeadLetter(m.id);
    if (d.ok()) {
      dead = {{"reason", d->reason},
              {"failed_at_ms", d->failed_at_ms},
              {"last_error", Nullable(d->last_error)}};
    }
  }
  // The payload as the page shows it: its JSON text, cut to 2 KB.
  constexpr size_t kShownPayload = 2048;
  std::string payload = m.payload_json.substr(0, kShownPayload);
  out.json = {{"id", m.id},
              {"type", m.type},
              {"from", m.from_agent},
              {"to", m.to_agent},
              {"topic", m.topic},
              {"priority", m.priority},
              {"created_at_ms", m.created_at_ms},
              {"expires_at_ms", m.expires_at_ms},
              {"correlation_id", m.correlation_id},
              {"trace_id", m.trace_id},
              {"status", std::string(MessageStatusName(m.status))},
              {"role_wire", Nullable(m.role_key_wire)},
              {"payload", payload},
              {"payload_truncated", m.payload_json.size() > kShownPayload},
              {"recipients", std::move(recipients)},
              {"dead_letter", std::move(dead)}};
  return out;
}

absl::StatusOr<json> ConsoleModel::Messages(const ProjectScope& scope) {
  const int64_t seq = feed_.head();
  std::vector<std::string> ids;
  {
    absl::MutexLock lock(&history_mu_);
    ids.assign(recent_messages_.rbegin(), recent_messages_.rend());
  }
  absl::flat_hash_map<std::string, std::optional<std::string>> projects;
  json messages = json::array();
  for (const std::string& id : ids) {
    absl::StatusOr<MessageRecord> m = sources_.store->messages().GetMessage(id);
    if (!m.ok()) continue;
    std::optional<RenderedMessage> r = RenderMessage(*m, &projects);
    if (r.has_value() && Visible(scope, r->projects)) {
      messages.push_back(std::move(r->json));
    }
  }
  DeadLetterQuery query;
  query.page_size = 100;
  query.scope = scope;
  absl::StatusOr<DeadLetterPage> dead =
      sources_.messaging->ListDeadLetters(query);
  if (!dead.ok()) return dead.status();
  json dead_letters = json::array();
  for (const DeadLetterView& d : dead->dead_letters) {
    json row = {{"id", d.dead_letter.message_id},
                {"reason", d.dead_letter.reason},
                {"failed_at_ms", d.dead_letter.failed_at_ms},
                {"last_error", Nullable(d.dead_letter.last_error)}};
    if (d.message.has_value()) {
      row["from"] = d.message->from_agent;
      row["to"] = d.message->to_agent;
      row["topic"] = d.message->topic;
      row["trace_id"] = d.message->trace_id;
    }
    dead_letters.push_back(std::move(row));
  }
  return json{{"seq", seq},
              {"server_time_ms", Now()},
              {"messages", std::move(messages)},
              {"dead_letters", std::move(dead_letters)}};
}

absl::StatusOr<json> ConsoleModel::Trace(const std::string& trace_id,
                                         const ProjectScope& scope) {
  absl::StatusOr<TracePage> page =
      sources_.messaging->ListTrace(trace_id, 100, "", scope);
  if (!page.ok()) return page.status();
  absl::flat_hash_map<std::string, std::optional<std::string>> projects;
  json messages = json::array();
  for (const MessageRecord& m : page->messages) {
    std::optional<RenderedMessage> r = RenderMessage(m, &projects);
    if (r.has_value()) messages.push_back(std::move(r->json));
  }
  return json{{"trace_id", trace_id},
              {"messages", std::move(messages)},
              {"more", !page->next_page_token.empty()}};
}

}  // namespace hub::console
