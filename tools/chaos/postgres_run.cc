// Several hubds over one PostgreSQL database under the chaos load, with a
// fault at random moments (docs/design/multi-hub.md, "Fault runs"):
//   kill       SIGKILL a hub; after a random pause (0 to 1.5 leases) start a
//              new process on its address, which joins as a new hub;
//   stop       SIGSTOP a hub for 1.25 to 2 leases, then SIGCONT: a zombie
//              that must come back holding nothing and rejoin;
//   terminate  pg_terminate_backend of every backend of the database but
//              the checker's: every hub's writer, readers and listeners;
//   restart    `pg_ctl stop -m immediate`, a random pause (0 to 1.5 leases),
//              start;
//   cut        an attached agent's presence stream ends (the client cancels
//              it) and the agent attaches again, to the same hub or another,
//              after 0 to 2 detach graces.
// After each fault the driver waits until every hub serves again and every
// client had a call succeed, then checks the database against the ledger
// while the hubs go on serving. Besides, all along: a WatchRoles stream on
// every hub (RoleWatch), what the hubs push to the attached agents
// (PushLog), and the calls answered while the database is down (Load). At
// the end: every attached agent that held a role was told when it lost it.
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "clients/cpp/hub_client.h"
#include "storage/pg/pg_conn.h"
#include "tests/hubd_process.h"
#include "tools/chaos/ledger.h"
#include "tools/chaos/push_log.h"
#include "tools/chaos/role_watch.h"
#include "tools/chaos/runs.h"
#include "tools/chaos/store_snapshot.h"

namespace hub::chaos {
namespace {

namespace v1 = ::hub::v1;
using storage::pg::Connection;

// How long a hub or the clients may take to serve again after a fault
// before that is a violation.
constexpr absl::Duration kRecoveryBound = absl::Seconds(30);

const std::vector<std::string>& AllKinds() {
  static const auto* kinds = new std::vector<std::string>{
      "kill", "stop", "terminate", "restart", "cut"};
  return *kinds;
}

// Figures of one kind of fault.
struct KindFigures {
  int count = 0;
  std::vector<int64_t> clients_ms;      // until every client was served again
  std::vector<int64_t> hubs_ms;         // until the hubs served again
  std::vector<int64_t> write_stall_ms;  // stop: the other hubs' writes
};

// One fault as injected.
struct Fault {
  std::string detail;
  // The hubs that must serve again before the check.
  std::vector<int> wait_for;
  // stop: the longest a write through another hub waited during the pause.
  std::optional<absl::Duration> write_stall;
};

// While a hub is paused, registers a probe agent through each other hub,
// again and again, on a thread of its own: how long their writes wait. A
// paused hub must not hold the others up (their writes may queue behind the
// paused hub's row locks until PostgreSQL ends its transaction).
class WriteProbe {
 public:
  explicit WriteProbe(std::vector<const client::HubClient*> hubs)
      : thread_([this, hubs = std::move(hubs)] { Loop(hubs); }) {}
  // Stops after the calls in flight are answered; the longest wait.
  absl::Duration Stop() {
    stop_ = true;
    thread_.join();
    return longest_;
  }

 private:
  void Loop(const std::vector<const client::HubClient*>& hubs) {
    client::CallOptions call;
    call.deadline = kRecoveryBound;
    while (!stop_) {
      for (size_t i = 0; i < hubs.size(); ++i) {
        v1::RegisterAgentRequest r;
        r.set_agent_id(absl::StrCat("chaos-probe-", i));
        r.set_cli(v1::AGENT_CLI_OTHER);
        const absl::Time started = absl::Now();
        (void)hubs[i]->RegisterAgent(r, call);
        longest_ = std::max(longest_, absl::Now() - started);
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
  }

  std::atomic<bool> stop_{false};
  absl::Duration longest_;  // written by the thread until Stop joins it
  std::thread thread_;
};

class PostgresRun {
 public:
  explicit PostgresRun(const RunOptions& options)
      : options_(options),
        seed_(options.seed != 0
                  ? options.seed
                  : static_cast<uint64_t>(absl::ToUnixNanos(absl::Now()))),
        random_(seed_) {}

  int Run();

 private:
  bool StartHubs();
  std::string Log(int slot) const;
  bool StartHub(int slot);
  // A call through the hub's gate answers (NOT_FOUND for the probe agent):
  // it has a seat and reaches the database.
  bool Serving(int slot) const;
  // Waits until each of `slots` serves; how long that took, or nullopt.
  std::optional<absl::Duration> WaitServing(const std::vector<int>& slots);
  std::vector<int> AllSlots() const;
  std::vector<std::string> Schedule();
  absl::Duration Lease() const;
  // The moment clients count from (Load::MarkFault): the fault, or for a
  // restart the server's start.
  void Mark();
  // The faults: each fills in `fault`; false when the run cannot go on (a
  // hub or the server did not start).
  bool KillHub(int slot, Fault* fault);
  void PauseHub(int slot, Fault* fault);
  void TerminateBackends(Fault* fault);
  std::string LockWaits();
  bool RestartServer(Fault* fault);
  void CutStream(Fault* fault);
  // Injects one fault of `kind`, then Recover.
  bool Inject(const std::string& kind, int n);
  // Waits for the hubs and the clients, checks the database, prints.
  void Recover(const std::string& kind, int n, const Fault& fault,
               const std::map<std::string, int64_t>& failed_before);
  bool PgCtl(const std::string& verb);
  // The checker's connection may be one the server closed (a restart):
  // Snapshot reads once more on a new one.
  absl::StatusOr<StoreSnapshot> Snapshot();
  absl::Status Reconnect();
  // The ledger's checks and, while hubs run (`running`), the agents' seats.
  CheckCounts CheckNow(const std::string& when, bool running);
  void CheckHeldPresence(std::vector<std::string>* found);
  // Every attached agent whose session holds a role at an epoch holds it
  // in the store, once the hubs have had time to tell it otherwise; every
  // watcher caught up with the stored roles.
  void CheckToldAndWatched(std::vector<std::string>* found);
  // Appends the violations of the push log, the role watchers and the
  // load's answers while the database was down.
  void CheckObserved(std::vector<std::string>* found);
  std::string SeatLine();
  void Summary(const CheckCounts& last, absl::Duration took);

  const RunOptions& options_;
  const uint64_t seed_;
  std::mt19937_64 random_;
  Ledger ledger_;
  PushLog push_log_;
  std::unique_ptr<RoleWatch> role_watch_;
  std::unique_ptr<Load> load_;
  std::vector<std::string> addresses_;
  std::vector<std::unique_ptr<testing::HubdProcess>> hubs_;
  std::vector<std::unique_ptr<client::HubClient>> probes_;
  std::unique_ptr<Connection> checker_;
  std::set<std::string> hub_ids_;  // every hub_instance_id seen
  std::vector<std::string> violations_;
  std::map<std::string, KindFigures> figures_;
  int64_t injected_ns_ = 0;
};

std::vector<int> PostgresRun::AllSlots() const {
  std::vector<int> slots;
  for (int i = 0; i < static_cast<int>(hubs_.size()); ++i) slots.push_back(i);
  return slots;
}

std::string PostgresRun::Log(int slot) const {
  return absl::StrCat(options_.dir, "/hubd-", slot, ".stderr");
}

bool PostgresRun::StartHub(int slot) {
  if (absl::Status started = hubs_[slot]->Start(); !started.ok()) {
    std::cerr << "chaos: hub " << slot << ": " << started << " (see "
              << Log(slot) << ")\n";
    return false;
  }
  // A new process is a new hub.
  if (!hub_ids_.insert(hubs_[slot]->instance_id()).second) {
    violations_.push_back(absl::StrCat("hub ", slot, " restarted with hub id ",
                                       hubs_[slot]->instance_id(),
                                       " seen before"));
  }
  if (static_cast<int>(probes_.size()) <= slot) {
    client::HubClientOptions probe;
    probe.address = hubs_[slot]->address();
    probe.default_deadline = absl::Milliseconds(500);
    probes_.push_back(std::make_unique<client::HubClient>(probe));
    addresses_.push_back(hubs_[slot]->address());
  }
  probes_[slot]->WaitForConnected(absl::Seconds(10));
  return true;
}

bool PostgresRun::StartHubs() {
  std::vector<std::string> args = {"--log_level=warn"};
  auto flag = [&args](const char* name, absl::Duration d) {
    if (d > absl::ZeroDuration()) {
      args.push_back(absl::StrCat("--", name, "=", absl::FormatDuration(d)));
    }
  };
  flag("hub_lease", options_.hub_lease);
  flag("hub_renew_interval", options_.hub_renew_interval);
  flag("detach_grace", options_.detach_grace);
  for (int slot = 0; slot < options_.hubs; ++slot) {
    testing::HubdProcessOptions process;
    process.binary = options_.hubd;
    process.stderr_path = Log(slot);
    hubs_.push_back(
        std::make_unique<testing::HubdProcess>(options_.db, args, process));
    if (!StartHub(slot)) return false;
  }
  return true;
}

bool PostgresRun::Serving(int slot) const {
  v1::GetAgentRequest r;
  r.set_agent_id("chaos-probe");
  auto reply = probes_[slot]->GetAgent(r);
  if (reply.status().code() == absl::StatusCode::kUnavailable) {
    probes_[slot]->WaitForConnected(absl::Milliseconds(100));
  }
  return reply.ok() || reply.status().code() == absl::StatusCode::kNotFound;
}

std::optional<absl::Duration> PostgresRun::WaitServing(
    const std::vector<int>& slots) {
  const absl::Time started = absl::Now();
  std::set<int> waiting(slots.begin(), slots.end());
  while (!waiting.empty()) {
    for (auto it = waiting.begin(); it != waiting.end();) {
      it = Serving(*it) ? waiting.erase(it) : std::next(it);
    }
    if (waiting.empty()) break;
    if (absl::Now() - started > kRecoveryBound) return std::nullopt;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return absl::Now() - started;
}

// Every kind once, in a random order (a short run covers them all), then
// kinds at random.
std::vector<std::string> PostgresRun::Schedule() {
  std::vector<std::string> kinds = options_.fault_kinds;
  if (kinds.empty()) kinds = AllKinds();
  std::vector<std::string> schedule = kinds;
  std::shuffle(schedule.begin(), schedule.end(), random_);
  while (static_cast<int>(schedule.size()) < options_.faults) {
    schedule.push_back(kinds[random_() % kinds.size()]);
  }
  schedule.resize(options_.faults);
  return schedule;
}

bool PostgresRun::PgCtl(const std::string& verb) {
  const std::string command = absl::StrCat(options_.pg_ctl, " ", verb, " >> '",
                                           options_.dir, "/pg_ctl.log' 2>&1");
  if (std::system(command.c_str()) == 0) return true;
  std::cerr << "chaos: `" << options_.pg_ctl << " " << verb << "` failed (see "
            << options_.dir << "/pg_ctl.log)\n";
  return false;
}

// The checker's connection may be one the server closed (a restart): read
// once more on a new one.
absl::StatusOr<StoreSnapshot> PostgresRun::Snapshot() {
  absl::StatusOr<StoreSnapshot> snapshot = ReadPostgresSnapshot(checker_.get());
  if (snapshot.ok()) return snapshot;
  if (absl::Status s = Reconnect(); !s.ok()) return s;
  return ReadPostgresSnapshot(checker_.get());
}

absl::Status PostgresRun::Reconnect() {
  auto reopened = Connection::Open(options_.db);
  if (!reopened.ok()) return reopened.status();
  checker_ = *std::move(reopened);
  return absl::OkStatus();
}

// Prints the first few violations found `when` and how many there were.
void Print(const std::string& when, const std::vector<std::string>& found) {
  constexpr size_t kShown = 20;
  for (size_t i = 0; i < found.size() && i < kShown; ++i) {
    std::cout << "chaos: VIOLATION " << when << ": " << found[i] << "\n";
  }
  if (found.size() > kShown) {
    std::cout << "chaos: ... and " << found.size() - kShown
              << " more violations " << when << "\n";
  }
  std::cout << std::flush;
}

// A seat is declared dead in the statement that moves its agents to the
// taker, and a hub that joins again moves its previous seat's agents in the
// statement that gives it the new one: at any moment, an agent that is not
// offline names a live seat or none. One that names a dead or replaced seat
// is held by no hub (no grace runs for it, nothing routes to it).
void PostgresRun::CheckHeldPresence(std::vector<std::string>* found) {
  auto orphans = checker_->Exec(
      "SELECT a.agent_id, a.stream_hub_id, a.stream_hub_incarnation, "
      "COALESCE(h.state, 'no seat'), COALESCE(h.incarnation, 0) FROM agents a "
      "LEFT JOIN hub_hubs h ON h.hub_id = a.stream_hub_id "
      "WHERE a.stream_hub_id IS NOT NULL AND a.status <> 'offline' AND "
      "(h.hub_id IS NULL OR h.state <> 'live' OR "
      "h.incarnation <> a.stream_hub_incarnation) ORDER BY 1");
  if (!orphans.ok()) {
    found->push_back(absl::StrCat("cannot read the agents' seats: ",
                                  orphans.status().ToString()));
    return;
  }
  for (int i = 0; i < orphans->rows(); ++i) {
    found->push_back(absl::StrCat(
        "agent ", orphans->Text(i, 0), " is held by seat ", orphans->Text(i, 1),
        "/", orphans->Text(i, 2), ", which is ", orphans->Text(i, 3),
        " (its row's incarnation ", orphans->Text(i, 4), ")"));
  }
}

CheckCounts PostgresRun::CheckNow(const std::string& when, bool running) {
  std::vector<std::string> found;
  CheckCounts counts = ledger_.Check([this] { return Snapshot(); }, &found);
  // After the clean stop the last hub to leave has no one to hand over to.
  if (running) CheckHeldPresence(&found);
  Print(when, found);
  violations_.insert(violations_.end(), found.begin(), found.end());
  return counts;
}

absl::Duration PostgresRun::Lease() const {
  return options_.hub_lease > absl::ZeroDuration() ? options_.hub_lease
                                                   : absl::Seconds(5);
}

void PostgresRun::Mark() {
  injected_ns_ = absl::GetCurrentTimeNanos();
  load_->MarkFault(injected_ns_);
}

bool PostgresRun::KillHub(int slot, Fault* fault) {
  hubs_[slot]->Kill();
  Mark();
  const absl::Duration down =
      Between(random_(), absl::ZeroDuration(), Lease() * 1.5);
  absl::SleepFor(down);
  const absl::Time restarting = absl::Now();
  if (!StartHub(slot)) return false;
  load_->HubRestarted(slot);
  fault->detail = absl::StrCat(
      "hub ", slot, " down ", absl::ToInt64Milliseconds(down),
      " ms, restart_ms=", absl::ToInt64Milliseconds(absl::Now() - restarting));
  fault->wait_for = {slot};
  return true;
}

void PostgresRun::PauseHub(int slot, Fault* fault) {
  const absl::Duration paused = Between(random_(), Lease() * 1.25, Lease() * 2);
  std::vector<const client::HubClient*> others;
  for (int i = 0; i < static_cast<int>(probes_.size()); ++i) {
    if (i != slot) others.push_back(probes_[i].get());
  }
  hubs_[slot]->Pause();
  const int64_t paused_ns = absl::GetCurrentTimeNanos();
  Mark();
  WriteProbe probe(others);
  absl::SleepFor(paused);
  const std::string locks = LockWaits();
  hubs_[slot]->Resume();
  push_log_.Paused(slot, paused_ns, absl::GetCurrentTimeNanos());
  fault->write_stall = probe.Stop();
  fault->detail = absl::StrCat(
      "hub ", slot, " paused ", absl::ToInt64Milliseconds(paused),
      " ms, the other hubs' writes waited up to ",
      absl::ToInt64Milliseconds(*fault->write_stall), " ms (", locks, ")");
  fault->wait_for = {slot};
}

// What the database's sessions wait for as a pause ends: why the other hubs'
// writes wait, if they do.
std::string PostgresRun::LockWaits() {
  auto waits = checker_->Exec(
      "SELECT count(*) FILTER (WHERE wait_event_type = 'Lock'), "
      "COALESCE(max(extract(epoch FROM now() - state_change) * 1000) "
      "FILTER (WHERE state = 'idle in transaction'), 0)::bigint "
      "FROM pg_stat_activity WHERE datname = current_database() AND "
      "pid <> pg_backend_pid()");
  if (!waits.ok()) return waits.status().ToString();
  return absl::StrCat(waits->Text(0, 0),
                      " sessions waiting for a lock, a transaction idle for ",
                      waits->Text(0, 1), " ms");
}

void PostgresRun::TerminateBackends(Fault* fault) {
  absl::StatusOr<storage::pg::Result> killed;
  for (int attempt = 0; attempt < 2; ++attempt) {
    killed = checker_->Exec(
        "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM "
        "pg_stat_activity WHERE datname = current_database() AND pid <> "
        "pg_backend_pid()");
    if (killed.ok() || !Reconnect().ok()) break;
  }
  Mark();
  if (!killed.ok()) {
    violations_.push_back(
        absl::StrCat("terminate failed: ", killed.status().ToString()));
  }
  fault->detail =
      absl::StrCat(killed.ok() ? killed->Int(0, 0).value_or(-1) : -1,
                   " backends terminated");
}

bool PostgresRun::RestartServer(Fault* fault) {
  if (!PgCtl("stop")) return false;
  load_->DatabaseDown();
  const absl::Duration down =
      Between(random_(), absl::ZeroDuration(), Lease() * 1.5);
  absl::SleepFor(down);
  load_->DatabaseUp();
  if (!PgCtl("start")) return false;
  // Clients cannot be served before the server is back.
  Mark();
  fault->detail =
      absl::StrCat("server down ", absl::ToInt64Milliseconds(down), " ms");
  return true;
}

// Away for up to two graces: within it the agent keeps its presence and
// roles (the grace runs on the hub it left), past it they fail over.
void PostgresRun::CutStream(Fault* fault) {
  const absl::Duration grace = options_.detach_grace > absl::ZeroDuration()
                                   ? options_.detach_grace
                                   : absl::Seconds(2);
  Mark();
  fault->detail = load_->CutStream(random_(), grace * 2);
  if (fault->detail.empty()) fault->detail = "no attached agent to cut";
}

bool PostgresRun::Inject(const std::string& kind, int n) {
  const int slot = static_cast<int>(random_() % hubs_.size());
  const std::map<std::string, int64_t> failed_before = load_->failures();
  Fault fault;
  fault.wait_for = AllSlots();
  if (kind == "kill") {
    if (!KillHub(slot, &fault)) return false;
  } else if (kind == "stop") {
    PauseHub(slot, &fault);
  } else if (kind == "terminate") {
    TerminateBackends(&fault);
  } else if (kind == "restart") {
    if (!RestartServer(&fault)) return false;
  } else if (kind == "cut") {
    CutStream(&fault);
  }
  Recover(kind, n, fault, failed_before);
  return true;
}

void PostgresRun::Recover(const std::string& kind, int n, const Fault& fault,
                          const std::map<std::string, int64_t>& failed_before) {
  const std::string what =
      absl::StrCat("fault ", n, " (", kind, ", ", fault.detail, ")");
  KindFigures& figures = figures_[kind];
  ++figures.count;
  std::optional<absl::Duration> hubs_back = WaitServing(fault.wait_for);
  std::optional<absl::Duration> clients_back =
      load_->WaitAllServed(kRecoveryBound);
  if (!hubs_back) {
    violations_.push_back(absl::StrCat(what,
                                       ": a hub did not serve again within ",
                                       absl::FormatDuration(kRecoveryBound)));
  } else {
    figures.hubs_ms.push_back(absl::ToInt64Milliseconds(*hubs_back));
  }
  if (!clients_back) {
    violations_.push_back(
        absl::StrCat(what, ": a client was not served again within ",
                     absl::FormatDuration(kRecoveryBound)));
  } else {
    figures.clients_ms.push_back(absl::ToInt64Milliseconds(*clients_back));
  }
  if (fault.write_stall) {
    figures.write_stall_ms.push_back(
        absl::ToInt64Milliseconds(*fault.write_stall));
    if (options_.max_write_stall > absl::ZeroDuration() &&
        *fault.write_stall > options_.max_write_stall) {
      violations_.push_back(
          absl::StrCat(what, ": the other hubs' writes waited longer than ",
                       absl::FormatDuration(options_.max_write_stall)));
    }
  }
  std::vector<std::string> failed;
  for (const auto& [why, count] : load_->failures()) {
    auto before = failed_before.find(why);
    const int64_t more =
        count - (before == failed_before.end() ? 0 : before->second);
    if (more > 0) failed.push_back(absl::StrCat(why, "=", more));
  }
  const CheckCounts c =
      CheckNow(absl::StrCat("after fault ", n, " (", kind, ")"), true);
  std::cout << "chaos: fault " << n << " " << kind << ": " << fault.detail
            << "; hubs serving after "
            << (hubs_back ? absl::ToInt64Milliseconds(*hubs_back) : -1)
            << " ms, every client served after "
            << (clients_back ? absl::ToInt64Milliseconds(*clients_back) : -1)
            << " ms (since " << (kind == "restart" ? "the start" : "the fault")
            << "); checked agents=" << c.agents << " publishes=" << c.messages
            << " acks=" << c.acks << " roles=" << c.roles
            << " role_writes=" << c.role_writes
            << "; failed calls: " << absl::StrJoin(failed, ", ") << std::endl;
}

std::string PostgresRun::SeatLine() {
  auto seats = checker_->Exec(
      "SELECT state, count(*) FROM hub_hubs GROUP BY state ORDER BY state");
  if (!seats.ok()) return seats.status().ToString();
  std::vector<std::string> parts;
  for (int i = 0; i < seats->rows(); ++i) {
    parts.push_back(absl::StrCat(seats->Text(i, 0), "=", seats->Text(i, 1)));
  }
  return absl::StrJoin(parts, " ");
}

void PostgresRun::CheckToldAndWatched(std::vector<std::string>* found) {
  const absl::Time started = absl::Now();
  const absl::Time deadline = started + kRecoveryBound;
  std::vector<std::string> untold;
  std::map<std::string, int64_t> versions;
  int held_roles = 0;
  while (true) {
    untold.clear();
    held_roles = 0;
    absl::StatusOr<StoreSnapshot> snapshot = Snapshot();
    if (!snapshot.ok()) {
      found->push_back(absl::StrCat("cannot read the roles: ",
                                    snapshot.status().ToString()));
      return;
    }
    versions.clear();
    for (const auto& [wire, role] : snapshot->roles) {
      versions[wire] = role.version;
      for (const auto& agent : load_->attached()) {
        const std::optional<int64_t> held = agent->HeldEpoch(wire);
        held_roles += held.has_value();
        if (held && (*held != role.epoch || role.holder != agent->agent_id())) {
          untold.push_back(absl::StrCat(
              agent->agent_id(), " still holds ", wire, " at epoch ", *held,
              ", stored at epoch ", role.epoch, " held by '", role.holder,
              "' (", role.state, ")"));
        }
      }
    }
    if (untold.empty() || absl::Now() >= deadline) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  found->insert(found->end(), untold.begin(), untold.end());
  std::cout << "chaos: at the end the attached agents' sessions held "
            << held_roles << " roles"
            << (untold.empty() ? ", each as stored" : "") << " (after "
            << absl::ToInt64Milliseconds(absl::Now() - started) << " ms)"
            << std::endl;
  std::string lagging;
  if (!role_watch_->WaitCaughtUp(versions, deadline - absl::Now(), &lagging)) {
    found->push_back(absl::StrCat(
        "the role watchers did not catch up with the stored roles within ",
        absl::FormatDuration(kRecoveryBound), ": ", lagging));
  }
}

void PostgresRun::CheckObserved(std::vector<std::string>* found) {
  push_log_.Check(found);
  role_watch_->Check(found);
  const std::vector<std::string> false_oks = load_->false_oks();
  found->insert(found->end(), false_oks.begin(), false_oks.end());
}

void PostgresRun::Summary(const CheckCounts& last, absl::Duration took) {
  std::cout << "chaos: summary: hubs=" << options_.hubs
            << " faults=" << options_.faults
            << " seconds=" << absl::ToInt64Seconds(took)
            << " violations=" << violations_.size() << " seed=" << seed_
            << "\n";
  for (const auto& [kind, f] : figures_) {
    std::cout << "chaos: " << kind << ": " << f.count
              << " faults; hubs serving again " << MedianMax(f.hubs_ms)
              << "; every client served again " << MedianMax(f.clients_ms);
    if (!f.write_stall_ms.empty()) {
      std::cout << "; the other hubs' writes waited "
                << MedianMax(f.write_stall_ms);
    }
    std::cout << "\n";
  }
  std::cout << load_->Summary() << "\n"
            << "chaos: while the database was down, calls failed with: "
            << absl::StrJoin(load_->down_failures(), ", ",
                             absl::PairFormatter("="))
            << "\n"
            << push_log_.Summary() << "\n"
            << role_watch_->Summary() << "\n"
            << LedgerLine(ledger_) << "\n"
            << "chaos: final check: agents=" << last.agents
            << " publishes=" << last.messages << " acks=" << last.acks
            << " roles=" << last.roles << " role_writes=" << last.role_writes
            << "\nchaos: hub ids seen=" << hub_ids_.size()
            << ", seats in hub_hubs: " << SeatLine() << std::endl;
}

int PostgresRun::Run() {
  auto checker = Connection::Open(options_.db);
  if (!checker.ok()) {
    std::cerr << "chaos: cannot reach the database: " << checker.status()
              << "\n";
    return 2;
  }
  checker_ = *std::move(checker);
  std::cout << "chaos: seed=" << seed_ << " hubs=" << options_.hubs
            << " faults=" << options_.faults
            << " workers=" << options_.load.workers
            << " roles=" << options_.roles << " db=" << checker_->Describe()
            << " dir=" << options_.dir << std::endl;
  if (!StartHubs()) return 2;
  role_watch_ = std::make_unique<RoleWatch>(addresses_);
  role_watch_->Start();
  LoadOptions load_options = options_.load;
  load_options.addresses = addresses_;
  load_options.projects = ChaosProjects(options_.roles);
  load_options.push_log = &push_log_;
  load_ = std::make_unique<Load>(&ledger_, load_options);
  load_->Start(random_());

  const absl::Time run_started = absl::Now();
  const std::vector<std::string> schedule = Schedule();
  for (int n = 1; n <= static_cast<int>(schedule.size()); ++n) {
    absl::SleepFor(
        Between(random_(), options_.min_uptime, options_.max_uptime));
    if (!Inject(schedule[n - 1], n)) return 2;
  }
  absl::SleepFor(options_.min_uptime);
  if (!load_->Drain(kRecoveryBound)) {
    std::cout << "chaos: the inboxes did not drain within "
              << absl::FormatDuration(kRecoveryBound) << std::endl;
  }
  // The workers only list and ack now: no more role writes of theirs.
  std::vector<std::string> observed;
  CheckToldAndWatched(&observed);
  load_->Stop();
  role_watch_->Stop();
  CheckObserved(&observed);
  Print("along the run", observed);
  violations_.insert(violations_.end(), observed.begin(), observed.end());
  for (int slot = 0; slot < static_cast<int>(hubs_.size()); ++slot) {
    const int status = hubs_[slot]->Terminate();
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      violations_.push_back(absl::StrCat("hub ", slot,
                                         " ended with wait status ", status,
                                         " on SIGTERM (want exit 0)"));
    }
  }
  const CheckCounts last = CheckNow("after the clean stop", /*running=*/false);
  std::vector<std::string> undelivered;
  ledger_.CheckDelivered(&undelivered);
  Print("at the end", undelivered);
  violations_.insert(violations_.end(), undelivered.begin(), undelivered.end());
  // The elections must have run for their checks to mean anything.
  if (options_.load.attached > 0 && ledger_.acked_activations() == 0) {
    violations_.push_back(
        "no activation was confirmed: the attached agents were never elected");
  }
  Summary(last, absl::Now() - run_started);
  return violations_.empty() ? 0 : 1;
}

}  // namespace

int RunPostgresFaults(const RunOptions& options) {
  return PostgresRun(options).Run();
}

}  // namespace hub::chaos
