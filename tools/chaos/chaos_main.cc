// chaos_driver: runs hubd under mixed load and kills it with SIGKILL at
// random moments; after each kill it checks the database against what the
// clients saw acknowledged (tools/chaos/ledger.h) and PRAGMA integrity_check
// (sqlite3 CLI), then restarts hubd on the same address and goes on.
//
//   chaos_driver --hubd=PATH --dir=DIR [--kills=20] [--workers=4] [--seed=N]
//
// Prints figures as it goes and a summary; exits 0 when every check passed,
// 1 on any violation, 2 when the hub could not be (re)started.
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "clients/cpp/hub_client.h"
#include "tools/chaos/ledger.h"

ABSL_FLAG(std::string, hubd, "", "the hubd binary");
ABSL_FLAG(std::string, dir, "", "work directory (database and hubd logs)");
ABSL_FLAG(int, kills, 20, "how many times to SIGKILL hubd");
ABSL_FLAG(int, workers, 4, "client threads driving load");
ABSL_FLAG(int, roles, 4, "cto roles the workers compete for");
ABSL_FLAG(uint64_t, seed, 0, "random seed; 0: from the clock");
ABSL_FLAG(absl::Duration, min_uptime, absl::Milliseconds(200),
          "shortest load phase between a start and the next kill");
ABSL_FLAG(absl::Duration, max_uptime, absl::Milliseconds(1200),
          "longest load phase between a start and the next kill");

namespace hub::chaos {
namespace {

namespace v1 = ::hub::v1;

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

// One hubd process on a fixed address and database.
class Hubd {
 public:
  Hubd(std::string binary, std::string dir, std::string address)
      : binary_(std::move(binary)),
        dir_(std::move(dir)),
        address_(std::move(address)) {}

  std::string db() const { return dir_ + "/chaos.sqlite"; }

  // Starts hubd and waits for its "serving on" line; false on failure.
  bool Start(absl::Duration* took) {
    const std::string out = dir_ + "/hubd.stdout";
    const absl::Time started = absl::Now();
    std::remove(out.c_str());
    pid_ = fork();
    if (pid_ == 0) {
      int o = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      int e = open((dir_ + "/hubd.stderr").c_str(),
                   O_WRONLY | O_CREAT | O_APPEND, 0644);
      dup2(o, 1);
      dup2(e, 2);
      const std::string listen = "--listen=" + address_;
      const std::string db_flag = "--db=" + db();
      execl(binary_.c_str(), binary_.c_str(), listen.c_str(), db_flag.c_str(),
            "--log_level=warn", static_cast<char*>(nullptr));
      _exit(127);
    }
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    while (absl::Now() < deadline) {
      std::ifstream f(out);
      std::stringstream text;
      text << f.rdbuf();
      if (text.str().find("serving on") != std::string::npos) {
        *took = absl::Now() - started;
        return true;
      }
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return false;
      }
      absl::SleepFor(absl::Milliseconds(5));
    }
    Kill();
    return false;
  }

  void Kill() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

  // SIGTERM; returns hubd's exit status (or -1).
  int Stop() {
    if (pid_ <= 0) return -1;
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

 private:
  const std::string binary_;
  const std::string dir_;
  const std::string address_;
  pid_t pid_ = -1;
};

struct OpCounts {
  std::atomic<int64_t> ok{0};
  std::atomic<int64_t> failed{0};
};

struct Load {
  // Why calls failed, "CODE REASON" -> count (UNAVAILABLE while the hub is
  // down; STALE_EPOCH and friends from lost races).
  absl::Mutex failures_mu;
  std::map<std::string, int64_t> failures ABSL_GUARDED_BY(failures_mu);
  void Failed(const absl::Status& status) {
    absl::MutexLock lock(&failures_mu);
    ++failures[absl::StrCat(absl::StatusCodeToString(status.code()), " ",
                            client::ReasonOf(status))];
  }
  Ledger* ledger;
  std::string address;
  std::vector<std::string> projects;
  int workers = 0;
  std::atomic<bool> stop{false};
  std::atomic<int64_t> last_ok_ns{0};  // when a call last succeeded
  std::atomic<bool> hub_down{false};   // killed, not yet serving again
  std::atomic<int64_t> hub_runs{0};    // hubd processes started so far
  OpCounts registers, heartbeats, reserves, publishes, acks;
};

std::string AgentName(int worker) { return absl::StrCat("chaos-w", worker); }

// One client: a random mix of registrations, heartbeats, reservations,
// publishes and acks, recording in the ledger what the hub acknowledged.
void Worker(Load* load, int index, uint64_t seed) {
  client::HubClientOptions options;
  options.address = load->address;
  options.default_deadline = absl::Seconds(2);
  // One long-lived channel, like an agent's. After a restart the worker
  // waits for it to reconnect (which also drives the reconnection, see
  // HubClient::WaitForConnected) instead of failing fast against it.
  client::HubClient hub_client(options);
  int64_t connected_to = load->hub_runs;
  std::mt19937_64 random(seed);
  const std::string me = AgentName(index);
  int64_t generation = 0;
  int64_t newcomers = 0;
  std::map<std::string, int64_t> epochs;  // last epoch seen, per project

  auto count = [load](OpCounts& c, bool ok) {
    ++(ok ? c.ok : c.failed);
    if (ok) load->last_ok_ns = absl::GetCurrentTimeNanos();
  };
  while (!load->stop) {
    if (load->hub_down) {
      absl::SleepFor(absl::Milliseconds(5));
      continue;
    }
    if (connected_to != load->hub_runs) {
      connected_to = load->hub_runs;
      hub_client.WaitForConnected(absl::Seconds(10));
    }
    client::HubClient& hub = hub_client;
    const int dice = static_cast<int>(random() % 100);
    bool ok = false;
    if (generation != 0 && dice < 4) {
      // A new agent: the set of agents that must survive grows.
      v1::RegisterAgentRequest r;
      r.set_agent_id(absl::StrCat(me, "-", ++newcomers));
      r.set_cli(v1::AGENT_CLI_CLAUDE);
      auto reply = hub.RegisterAgent(r);
      ok = reply.ok();
      if (!ok) load->Failed(reply.status());
      if (ok)
        load->ledger->Registered(r.agent_id(), reply->presence_generation());
      count(load->registers, ok);
    } else if (generation == 0 || dice < 10) {
      v1::RegisterAgentRequest r;
      r.set_agent_id(me);
      r.set_cli(v1::AGENT_CLI_CODEX);
      auto reply = hub.RegisterAgent(r);
      ok = reply.ok();
      if (!ok) load->Failed(reply.status());
      if (ok) {
        generation = reply->presence_generation();
        load->ledger->Registered(me, generation);
      }
      count(load->registers, ok);
    } else if (dice < 40) {
      v1::HeartbeatRequest r;
      r.set_agent_id(me);
      r.set_presence_generation(generation);
      auto reply = hub.Heartbeat(r);
      ok = reply.ok();
      if (!ok) load->Failed(reply.status());
      count(load->heartbeats, ok);
    } else if (dice < 60) {
      const std::string& project =
          load->projects[random() % load->projects.size()];
      v1::ReserveRoleRequest r;
      r.mutable_role_key()->set_project_id(project);
      r.mutable_role_key()->set_kind(v1::ROLE_KIND_CTO);
      auto seen = epochs.find(project);
      if (seen != epochs.end()) r.set_expected_epoch(seen->second);
      r.mutable_patch()->set_state(v1::ROLE_STATE_ACTIVE);
      r.mutable_patch()->set_holder_agent_id(me);
      r.mutable_patch()->set_last_reason("chaos");
      auto reply = hub.ReserveRole(r);
      ok = reply.ok();
      if (!ok) load->Failed(reply.status());
      if (ok) {
        const v1::Role& role = reply->role();
        epochs[project] = role.epoch();
        load->ledger->Reserved(role.role_key_wire(), role.epoch(), me);
      } else {
        // Lost a race or a restart moved the role: read the epoch again.
        v1::GetRoleRequest get;
        *get.mutable_role_key() = r.role_key();
        auto row = hub.GetRole(get);
        if (row.ok()) epochs[project] = row->role().epoch();
      }
      count(load->reserves, ok);
    } else if (dice < 85) {
      v1::PublishRequest r;
      r.set_from_agent_id(me);
      r.set_to(AgentName(static_cast<int>(random() % load->workers)));
      r.mutable_ttl()->set_seconds(3600);
      (*r.mutable_payload()->mutable_fields())["n"].set_number_value(
          static_cast<double>(random() % 1000));
      auto reply = hub.Publish(r);
      ok = reply.ok();
      if (!ok) load->Failed(reply.status());
      if (ok) load->ledger->Published(reply->message_id(), r.to());
      count(load->publishes, ok);
    } else {
      v1::ListPendingRequest list;
      list.set_agent_id(me);
      list.set_page_size(20);
      auto pending = hub.ListPending(list);
      ok = pending.ok();
      if (!ok) load->Failed(pending.status());
      if (ok && pending->deliveries_size() > 0) {
        v1::AckRequest r;
        r.set_agent_id(me);
        for (const auto& d : pending->deliveries()) {
          r.add_message_ids(d.message().message_id());
        }
        auto reply = hub.Ack(r);
        ok = reply.ok();
        if (!ok) load->Failed(reply.status());
        if (ok) {
          for (const std::string& id : reply->result().acked_message_ids()) {
            load->ledger->Acked(id, me);
          }
        }
      }
      count(load->acks, ok);
    }
    // While the hub is down, do not spin.
    if (!ok) absl::SleepFor(absl::Milliseconds(10));
  }
}

std::string IntegrityCheck(const std::string& db) {
  const std::string command =
      absl::StrCat("sqlite3 '", db, "' 'PRAGMA integrity_check' 2>&1");
  FILE* p = popen(command.c_str(), "r");
  if (p == nullptr) return "cannot run sqlite3";
  std::string out;
  char buf[256];
  while (fgets(buf, sizeof(buf), p) != nullptr) out += buf;
  pclose(p);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) {
    out.pop_back();
  }
  return out;
}

int Run() {
  const std::string binary = absl::GetFlag(FLAGS_hubd);
  const std::string dir = absl::GetFlag(FLAGS_dir);
  if (binary.empty() || dir.empty()) {
    std::cerr << "chaos_driver: --hubd and --dir are required\n";
    return 2;
  }
  uint64_t seed = absl::GetFlag(FLAGS_seed);
  if (seed == 0) seed = static_cast<uint64_t>(absl::ToUnixNanos(absl::Now()));
  std::mt19937_64 random(seed);
  const int kills = absl::GetFlag(FLAGS_kills);
  const int64_t min_ms =
      absl::ToInt64Milliseconds(absl::GetFlag(FLAGS_min_uptime));
  const int64_t max_ms = std::max<int64_t>(
      min_ms + 1, absl::ToInt64Milliseconds(absl::GetFlag(FLAGS_max_uptime)));

  Ledger ledger;
  Load load;
  load.ledger = &ledger;
  load.address = absl::StrCat("127.0.0.1:", FreePort());
  load.workers = std::max(1, absl::GetFlag(FLAGS_workers));
  const char* kProjects = "ABCDEFGH";
  for (int i = 0; i < std::clamp(absl::GetFlag(FLAGS_roles), 1, 8); ++i) {
    load.projects.push_back(
        absl::StrCat("prj_", std::string(22, kProjects[i])));
  }
  std::cout << "chaos: seed=" << seed << " kills=" << kills
            << " workers=" << load.workers << " roles=" << load.projects.size()
            << " hubd=" << load.address << " dir=" << dir << std::endl;

  Hubd hubd(binary, dir, load.address);
  std::vector<int64_t> restart_ms;
  std::vector<int64_t> resume_ms;  // serving -> first acknowledged call
  absl::Duration took;
  if (!hubd.Start(&took)) {
    std::cerr << "chaos: hubd did not start (see " << dir << "/hubd.stderr)\n";
    return 2;
  }
  std::vector<std::thread> workers;
  for (int i = 0; i < load.workers; ++i) {
    workers.emplace_back(Worker, &load, i, random());
  }

  std::vector<std::string> violations;
  CheckCounts last;
  const absl::Time run_started = absl::Now();
  for (int k = 1; k <= kills; ++k) {
    const int64_t uptime =
        min_ms + static_cast<int64_t>(random() % (max_ms - min_ms));
    absl::SleepFor(absl::Milliseconds(uptime));
    hubd.Kill();
    load.hub_down = true;
    std::vector<std::string> found;
    last = ledger.Check(hubd.db(), &found);
    const std::string integrity = IntegrityCheck(hubd.db());
    if (integrity != "ok") {
      found.push_back("PRAGMA integrity_check: " + integrity);
    }
    for (const std::string& v : found) {
      std::cout << "chaos: VIOLATION after kill " << k << ": " << v
                << std::endl;
    }
    violations.insert(violations.end(), found.begin(), found.end());
    if (!hubd.Start(&took)) {
      std::cerr << "chaos: hubd did not restart after kill " << k << " (see "
                << dir << "/hubd.stderr)\n";
      load.stop = true;
      for (std::thread& t : workers) t.join();
      return 2;
    }
    ++load.hub_runs;
    load.hub_down = false;
    restart_ms.push_back(absl::ToInt64Milliseconds(took));
    // Load resumes: the first acknowledged call after the restart.
    const int64_t restarted_ns = absl::GetCurrentTimeNanos();
    while (load.last_ok_ns < restarted_ns &&
           absl::GetCurrentTimeNanos() - restarted_ns < 30'000'000'000) {
      absl::SleepFor(absl::Milliseconds(1));
    }
    resume_ms.push_back((load.last_ok_ns - restarted_ns) / 1'000'000);
    std::cout << "chaos: kill " << k << " after " << uptime
              << " ms: checked agents=" << last.agents
              << " publishes=" << last.messages << " acks=" << last.acks
              << " roles=" << last.roles << " integrity=" << integrity
              << " restart_ms=" << restart_ms.back()
              << " resume_ms=" << resume_ms.back() << std::endl;
  }
  absl::SleepFor(absl::Milliseconds(min_ms));
  load.stop = true;
  for (std::thread& t : workers) t.join();
  const int exit_status = hubd.Stop();
  if (exit_status != 0) {
    violations.push_back(
        absl::StrCat("hubd exited ", exit_status, " on SIGTERM (want 0)"));
  }
  std::vector<std::string> found;
  last = ledger.Check(hubd.db(), &found);
  const std::string integrity = IntegrityCheck(hubd.db());
  if (integrity != "ok")
    found.push_back("PRAGMA integrity_check: " + integrity);
  for (const std::string& v : found) {
    std::cout << "chaos: VIOLATION after the clean stop: " << v << std::endl;
  }
  violations.insert(violations.end(), found.begin(), found.end());

  std::sort(restart_ms.begin(), restart_ms.end());
  const int64_t median =
      restart_ms.empty() ? 0 : restart_ms[restart_ms.size() / 2];
  const int64_t worst = restart_ms.empty() ? 0 : restart_ms.back();
  auto line = [](const char* name, const OpCounts& c) {
    return absl::StrCat(name, " ", c.ok.load(), "/",
                        c.ok.load() + c.failed.load());
  };
  std::cout << "chaos: summary: kills=" << kills
            << " seconds=" << absl::ToInt64Seconds(absl::Now() - run_started)
            << " violations=" << violations.size() << "\n"
            << "chaos: acknowledged/attempted: "
            << absl::StrJoin({line("register", load.registers),
                              line("heartbeat", load.heartbeats),
                              line("reserve", load.reserves),
                              line("publish", load.publishes),
                              line("list+ack", load.acks)},
                             ", ")
            << "\n"
            << "chaos: ledger: registrations=" << ledger.acked_registrations()
            << " reservations=" << ledger.acked_reservations()
            << " publishes=" << ledger.acked_publishes()
            << " acks=" << ledger.acked_acks() << "\n"
            << "chaos: final check: agents=" << last.agents
            << " publishes=" << last.messages << " acks=" << last.acks
            << " roles=" << last.roles << " integrity=" << integrity << "\n"
            << "chaos: failures: " <<
      [&load] {
        absl::MutexLock lock(&load.failures_mu);
        return absl::StrJoin(load.failures, ", ", absl::PairFormatter("="));
      }() << "\n"
            << "chaos: restart to serving: median=" << median
            << " ms max=" << worst << " ms" << std::endl;
  return violations.empty() ? 0 : 1;
}

}  // namespace
}  // namespace hub::chaos

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  signal(SIGPIPE, SIG_IGN);
  return hub::chaos::Run();
}
