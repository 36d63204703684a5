#include "tools/chaos/load.h"

#include <algorithm>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "clients/cpp/hub_client.h"

namespace hub::chaos {

namespace v1 = ::hub::v1;

namespace {

std::string AgentName(int worker) { return absl::StrCat("chaos-w", worker); }
std::string AttachedName(int i) { return absl::StrCat("chaos-a", i); }

// The lead role of `project` that the attached agents are candidates of and
// the workers elect; the workers' cto roles are reserved directly instead.
v1::RoleKey EnsuredRole(const std::string& project) {
  v1::RoleKey key;
  key.set_project_id(project);
  key.set_kind(v1::ROLE_KIND_LEAD);
  key.set_scope_id(absl::StrCat("scp_", std::string(22, 'e')));
  return key;
}

// Recipient `i` of a publish: the workers' agents, then the attached ones.
std::string Recipient(int i, int workers) {
  return i < workers ? AgentName(i) : AttachedName(i - workers);
}

// A failure that says "try another hub": this one is gone, paused, cut off
// from the database or without a seat.
bool MoveOn(const absl::Status& status) {
  return status.code() == absl::StatusCode::kUnavailable ||
         status.code() == absl::StatusCode::kDeadlineExceeded;
}

}  // namespace

// One client thread: a random mix of calls, recording in the ledger what
// the hubs acknowledged.
class Worker {
 public:
  Worker(Load* load, int index, uint64_t seed)
      : load_(load),
        index_(index),
        me_(AgentName(index)),
        random_(seed),
        home_(index % static_cast<int>(load->options_.addresses.size())),
        hub_(home_) {
    for (const std::string& address : load->options_.addresses) {
      client::HubClientOptions options;
      options.address = address;
      options.default_deadline = load->options_.call_deadline;
      // One long-lived channel per hub, like an agent's.
      clients_.push_back(std::make_unique<client::HubClient>(options));
      seen_runs_.push_back(0);
      failed_at_.push_back(absl::InfinitePast());
    }
  }

  void Run() {
    while (!load_->stop_) {
      if (load_->hold_) {
        absl::SleepFor(absl::Milliseconds(5));
        continue;
      }
      GoHome();
      Reconnect();
      bool ok;
      if (load_->drain_) {
        const bool done = load_->ledger_->Undelivered(me_) == 0;
        load_->slots_[index_].drained = done;
        ok = done || ListAndAck();
        if (done) absl::SleepFor(absl::Milliseconds(10));
      } else {
        ok = Step();
      }
      // While hubs are down, do not spin.
      if (!ok) absl::SleepFor(absl::Milliseconds(10));
    }
  }

 private:
  // After a restart of the current hub, wait for the channel: a channel in
  // backoff fails calls fast, and this drives its reconnection.
  void Reconnect() {
    const int64_t runs = load_->hub_runs_[hub_].load();
    if (seen_runs_[hub_] == runs) return;
    seen_runs_[hub_] = runs;
    clients_[hub_]->WaitForConnected(absl::Seconds(10));
  }

  // A worker that moved to another hub goes back to its own now and then,
  // once its own has not failed it for a while, so that the load spreads
  // over the hubs again after a fault; not while it cannot be connected to.
  void GoHome() {
    if (hub_ == home_ || random_() % 50 != 0 ||
        absl::Now() - failed_at_[home_] < absl::Seconds(5)) {
      return;
    }
    if (!clients_[home_]->WaitForConnected(absl::Milliseconds(200))) {
      failed_at_[home_] = absl::Now();
      return;
    }
    hub_ = home_;
  }

  // Moves to the next hub that has not failed this worker in the last few
  // seconds (or the next one, when all have); waits a little for its
  // channel if it is not connected (a hub that was down), which also drives
  // the reconnection.
  void NextHub() {
    const int n = static_cast<int>(clients_.size());
    if (n < 2) return;
    const absl::Time now = absl::Now();
    failed_at_[hub_] = now;
    int next = (hub_ + 1) % n;
    for (int i = 1; i < n; ++i) {
      const int candidate = (hub_ + i) % n;
      if (now - failed_at_[candidate] > absl::Seconds(5)) {
        next = candidate;
        break;
      }
    }
    hub_ = next;
    clients_[hub_]->WaitForConnected(absl::Milliseconds(200));
  }

  // Runs `call` (named `what`) on the current hub; counts it in `c`; on a
  // hub that is unavailable, moves on for the next call.
  template <typename Call>
  auto Do(const char* what, OpCounts& c, Call call) {
    const int64_t phase = load_->db_phase_.load();
    const int64_t started = absl::GetCurrentTimeNanos();
    auto reply = call(*clients_[hub_]);
    if (&c != &load_->heartbeats_) load_->Answered(what, phase, reply.status());
    if (reply.ok()) {
      ++c.ok;
      const int64_t answered = absl::GetCurrentTimeNanos();
      load_->last_ok_ns_ = answered;
      int64_t none = 0;
      if (started >= load_->fault_mark_ns_) {
        load_->slots_[index_].served_ns.compare_exchange_strong(none, answered);
      }
    } else {
      ++c.failed;
      load_->Failed(reply.status());
      if (MoveOn(reply.status())) NextHub();
    }
    return reply;
  }

  bool Step() {
    const int dice = static_cast<int>(random_() % 100);
    if (generation_ != 0 && dice < 4) return Register(true);
    if (generation_ == 0 || dice < 10) return Register(false);
    if (dice < 40) return Heartbeat();
    if (dice < 50 && !held_.empty()) return Act();
    if (dice < 60) return Reserve();
    if (dice < 85) return Publish();
    if (dice >= 97 && load_->options_.attached > 0) return Ensure();
    return ListAndAck();
  }

  // An election of a role the attached agents are candidates of, through
  // whichever hub this worker is on: the candidate it picks is mostly
  // attached to another hub, which flies the activation.
  bool Ensure() {
    const std::string& project =
        load_->options_.projects[random_() % load_->options_.projects.size()];
    v1::EnsureRoleRequest r;
    *r.mutable_role_key() = EnsuredRole(project);
    r.set_trigger(v1::ENSURE_ROLE_TRIGGER_MANUAL);
    r.set_cause_id(absl::StrCat("chaos-", me_));
    auto reply =
        Do("ensure", load_->ensures_,
           [&](const client::HubClient& hub) { return hub.EnsureRole(r); });
    if (!reply.ok()) return false;
    absl::MutexLock lock(&load_->failures_mu_);
    const v1::EnsureRoleReceipt& receipt = reply->receipt();
    ++load_->dispositions_[absl::StrCat(
        v1::EnsureRoleDisposition_Name(receipt.disposition()),
        receipt.has_blocked_reason()
            ? absl::StrCat("(", receipt.blocked_reason(), ")")
            : "")];
    return true;
  }

  // A registration of this worker's agent, or of a new agent (the set of
  // agents that must survive grows).
  bool Register(bool newcomer) {
    v1::RegisterAgentRequest r;
    r.set_agent_id(newcomer ? absl::StrCat(me_, "-", ++newcomers_) : me_);
    r.set_cli(newcomer ? v1::AGENT_CLI_CLAUDE : v1::AGENT_CLI_CODEX);
    auto reply =
        Do("register", load_->registers_,
           [&](const client::HubClient& hub) { return hub.RegisterAgent(r); });
    if (!reply.ok()) return false;
    if (!newcomer) generation_ = reply->presence_generation();
    load_->ledger_->Registered(r.agent_id(), reply->presence_generation());
    return true;
  }

  bool Heartbeat() {
    v1::HeartbeatRequest r;
    r.set_agent_id(me_);
    r.set_presence_generation(generation_);
    auto reply =
        Do("heartbeat", load_->heartbeats_,
           [&](const client::HubClient& hub) { return hub.Heartbeat(r); });
    // Offline (a hub that held it died and its grace ran out), unknown, or
    // superseded by a registration whose answer was lost: register again.
    if (reply.status().code() == absl::StatusCode::kFailedPrecondition) {
      generation_ = 0;
    }
    return reply.ok();
  }

  // ReserveRole of a random role, expected_epoch = the last epoch seen, patch
  // state active, holder itself: most lose with STALE_EPOCH.
  bool Reserve() {
    const std::string& project =
        load_->options_.projects[random_() % load_->options_.projects.size()];
    v1::ReserveRoleRequest r;
    r.mutable_role_key()->set_project_id(project);
    r.mutable_role_key()->set_kind(v1::ROLE_KIND_CTO);
    auto seen = epochs_.find(project);
    if (seen != epochs_.end()) r.set_expected_epoch(seen->second);
    r.mutable_patch()->set_state(v1::ROLE_STATE_ACTIVE);
    r.mutable_patch()->set_holder_agent_id(me_);
    r.mutable_patch()->set_last_reason("chaos");
    auto reply =
        Do("reserve", load_->reserves_,
           [&](const client::HubClient& hub) { return hub.ReserveRole(r); });
    if (reply.ok()) {
      const v1::Role& role = reply->role();
      epochs_[project] = role.epoch();
      held_[project] = role;
      load_->ledger_->Reserved(role.role_key_wire(), role.epoch(), me_,
                               role.version());
      return true;
    }
    // Lost a race, or a fault moved the role: read the epoch again.
    held_.erase(project);
    v1::GetRoleRequest get;
    *get.mutable_role_key() = r.role_key();
    auto row = clients_[hub_]->GetRole(get);
    if (row.ok()) epochs_[project] = row->role().epoch();
    return false;
  }

  // The holder acting on a role it holds: a compare-and-set guarded by the
  // epoch, activation and version it was granted or last wrote. Any refusal
  // means it no longer holds the role.
  bool Act() {
    auto it = held_.begin();
    std::advance(it, random_() % held_.size());
    const v1::Role& role = it->second;
    v1::CompareAndSetRoleRequest r = client::CasGuardedBy(role);
    r.mutable_patch()->set_last_reason("chaos_act");
    auto reply = Do("act", load_->acts_, [&](const client::HubClient& hub) {
      return hub.CompareAndSetRole(r);
    });
    if (!reply.ok()) {
      held_.erase(it);
      return false;
    }
    const v1::Role& now = reply->role();
    load_->ledger_->Acted(now.role_key_wire(), now.epoch(), me_, now.version());
    it->second = now;
    return true;
  }

  bool Publish() {
    v1::PublishRequest r;
    r.set_from_agent_id(me_);
    r.set_to(Recipient(static_cast<int>(random_() % (load_->options_.workers +
                                                     load_->options_.attached)),
                       load_->options_.workers));
    r.mutable_ttl()->set_seconds(3600);
    (*r.mutable_payload()->mutable_fields())["n"].set_number_value(
        static_cast<double>(random_() % 1000));
    const int64_t started = absl::GetCurrentTimeNanos();
    auto reply =
        Do("publish", load_->publishes_,
           [&](const client::HubClient& hub) { return hub.Publish(r); });
    if (reply.ok()) {
      load_->ledger_->Published(reply->message_id(), r.to());
      if (load_->options_.push_log != nullptr) {
        load_->options_.push_log->Published(reply->message_id(), started);
      }
    }
    return reply.ok();
  }

  // ListPending of its agent, then Ack of what it got.
  bool ListAndAck() {
    v1::ListPendingRequest list;
    list.set_agent_id(me_);
    list.set_page_size(20);
    auto pending = Do("list", load_->acks_, [&](const client::HubClient& hub) {
      return hub.ListPending(list);
    });
    if (!pending.ok()) return false;
    if (pending->deliveries_size() == 0) return true;
    v1::AckRequest r;
    r.set_agent_id(me_);
    for (const auto& d : pending->deliveries()) {
      load_->ledger_->Delivered(d.message().message_id(), me_);
      r.add_message_ids(d.message().message_id());
    }
    auto reply = Do("ack", load_->acks_,
                    [&](const client::HubClient& hub) { return hub.Ack(r); });
    if (!reply.ok()) return false;
    for (const std::string& id : reply->result().acked_message_ids()) {
      load_->ledger_->Acked(id, me_);
    }
    return true;
  }

  Load* const load_;
  const int index_;
  const std::string me_;
  std::mt19937_64 random_;
  std::vector<std::unique_ptr<client::HubClient>> clients_;
  std::vector<int64_t> seen_runs_;     // per hub: hub_runs_ when last connected
  std::vector<absl::Time> failed_at_;  // per hub: when it last failed a call
  const int home_;                     // the hub it starts on
  int hub_;                            // the hub calls go to
  int64_t generation_ = 0;
  int64_t newcomers_ = 0;
  std::map<std::string, int64_t> epochs_;  // last epoch seen, per project
  std::map<std::string, v1::Role> held_;   // roles it holds, per project
};

Load::Load(Ledger* ledger, LoadOptions options)
    : ledger_(ledger),
      options_(std::move(options)),
      slots_(new WorkerSlot[std::max(1, options_.workers)]),
      hub_runs_(new std::atomic<int64_t>[options_.addresses.size()]) {
  for (size_t i = 0; i < options_.addresses.size(); ++i) hub_runs_[i] = 0;
}

Load::~Load() { Stop(); }

void Load::Start(uint64_t seed) {
  std::mt19937_64 random(seed);
  std::vector<v1::RoleKey> ensured;
  for (const std::string& project : options_.projects) {
    ensured.push_back(EnsuredRole(project));
  }
  const int hubs = static_cast<int>(options_.addresses.size());
  for (int i = 0; i < options_.attached; ++i) {
    // Sticky: the first one per hub, when some are left to move.
    const bool sticky = options_.attached > hubs && i < hubs;
    attached_.push_back(std::make_unique<AttachedAgent>(
        ledger_, options_.push_log, options_.addresses, AttachedName(i),
        i % hubs, sticky, ensured));
    attached_.back()->Start();
  }
  for (int i = 0; i < options_.workers; ++i) {
    threads_.emplace_back(
        [this, i, s = random()] { Worker(this, i, s).Run(); });
  }
}

void Load::Hold() { hold_ = true; }
void Load::Release() { hold_ = false; }
void Load::HubRestarted(int slot) { ++hub_runs_[slot]; }

bool Load::Drain(absl::Duration timeout) {
  drain_ = true;
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    bool all = true;
    for (int i = 0; i < options_.workers; ++i) all = all && slots_[i].drained;
    for (const auto& agent : attached_) {
      all = all && ledger_->Undelivered(agent->agent_id()) == 0;
    }
    if (all) return true;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return false;
}

void Load::Stop() {
  stop_ = true;
  for (std::thread& t : threads_) t.join();
  threads_.clear();
  for (const auto& agent : attached_) agent->Stop();
}

std::string Load::CutStream(uint64_t random, absl::Duration away) {
  if (attached_.empty()) return "";
  AttachedAgent& agent = *attached_[random % attached_.size()];
  const int hub = static_cast<int>((random >> 8) % options_.addresses.size());
  const int64_t away_ms = static_cast<int64_t>(
      (random >> 16) % std::max<int64_t>(1, absl::ToInt64Milliseconds(away)));
  const int to = agent.Cut(hub, absl::Milliseconds(away_ms));
  return absl::StrCat(agent.agent_id(), "'s stream cut, back on hub ", to,
                      " after ", away_ms, " ms");
}

void Load::DatabaseDown() { ++db_phase_; }
void Load::DatabaseUp() { ++db_phase_; }

void Load::Answered(const char* what, int64_t phase_at_start,
                    const absl::Status& status) {
  if (phase_at_start % 2 == 0 || db_phase_.load() != phase_at_start) return;
  absl::MutexLock lock(&failures_mu_);
  if (status.ok()) {
    false_oks_.push_back(absl::StrCat(
        "a ", what, " was answered OK while the database was down"));
  } else {
    ++down_failures_[absl::StrCat(absl::StatusCodeToString(status.code()), " ",
                                  client::ReasonOf(status))];
  }
}

std::vector<std::string> Load::false_oks() const {
  absl::MutexLock lock(&failures_mu_);
  return false_oks_;
}

std::map<std::string, int64_t> Load::down_failures() const {
  absl::MutexLock lock(&failures_mu_);
  return down_failures_;
}

void Load::MarkFault(int64_t since_ns) {
  fault_mark_ns_ = since_ns;
  for (int i = 0; i < options_.workers; ++i) slots_[i].served_ns = 0;
}

std::optional<absl::Duration> Load::WaitAllServed(
    absl::Duration timeout) const {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    int64_t last = fault_mark_ns_;
    bool all = true;
    for (int i = 0; i < options_.workers && all; ++i) {
      const int64_t t = slots_[i].served_ns.load();
      all = t != 0;
      last = std::max(last, t);
    }
    if (all) return absl::Nanoseconds(last - fault_mark_ns_);
    if (absl::Now() >= deadline) return std::nullopt;
    absl::SleepFor(absl::Milliseconds(1));
  }
}

void Load::Failed(const absl::Status& status) {
  absl::MutexLock lock(&failures_mu_);
  ++failures_[absl::StrCat(absl::StatusCodeToString(status.code()), " ",
                           client::ReasonOf(status))];
}

std::map<std::string, int64_t> Load::failures() const {
  absl::MutexLock lock(&failures_mu_);
  return failures_;
}

std::string Load::Summary() const {
  auto line = [](const char* name, const OpCounts& c) {
    return absl::StrCat(name, " ", c.ok.load(), "/",
                        c.ok.load() + c.failed.load());
  };
  int64_t moves = 0;
  int64_t activations = 0;
  for (const auto& agent : attached_) {
    moves += agent->moves();
    activations += agent->activations();
  }
  const std::string attached =
      attached_.empty()
          ? ""
          : absl::StrCat("chaos: attached agents: ", attached_.size(),
                         ", moved to another hub ", moves, " times, activated ",
                         activations, " times\n");
  absl::MutexLock lock(&failures_mu_);
  return absl::StrCat(
      attached, "chaos: acknowledged/attempted: ",
      absl::StrJoin({line("register", registers_),
                     line("heartbeat", heartbeats_), line("reserve", reserves_),
                     line("act", acts_), line("publish", publishes_),
                     line("list+ack", acks_), line("ensure", ensures_)},
                    ", "),
      "\nchaos: ensure dispositions: ",
      absl::StrJoin(dispositions_, ", ", absl::PairFormatter("=")),
      "\nchaos: failures: ",
      absl::StrJoin(failures_, ", ", absl::PairFormatter("=")));
}

}  // namespace hub::chaos
