// reconnect: how long a fleet of long-lived PresenceSessions stays away from
// a hub that crashed and came back (issue 16 §5).
//
//   reconnect --hubd=PATH [--sessions=1000] [--channels=64] [--rounds=3]
//             [--downtime=1s] [--db=PATH]
//
// Starts hubd on a free loopback port, attaches `sessions` PresenceSessions
// spread round-robin over `channels` HubClients with the default options,
// then per round: SIGKILL hubd, wait until every session noticed, keep hubd
// down for `downtime` (a supervisor's restart delay), restart it on the same
// address and database, and take the clock from the moment hubd prints its
// "serving on" line to each session's next attach. The sessions and
// channels live for the whole run, like real agents'. tools/hubbench/
// reconnect.sh runs it, also against a build of an older client library.
//
// Prints one JSON line (hubbench's format, workload "reconnect") with
// p50/p99/max in ms over every session of every round; each round's figures
// go to stderr.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "clients/cpp/hub_client.h"
#include "clients/cpp/presence_session.h"

ABSL_FLAG(std::string, hubd, "", "the hubd binary");
ABSL_FLAG(std::string, db, "",
          "hubd's database (default: a fresh file under $TMPDIR)");
ABSL_FLAG(int, sessions, 1000, "PresenceSessions (one agent each)");
ABSL_FLAG(int, channels, 64, "HubClients the sessions are spread over");
ABSL_FLAG(int, rounds, 3, "kill + restart cycles to measure");
ABSL_FLAG(absl::Duration, downtime, absl::Seconds(1),
          "how long hubd stays dead before the restart (a supervisor's "
          "restart delay plus hubd's start-up)");
ABSL_FLAG(absl::Duration, give_up, absl::Seconds(60),
          "a round fails when a session is still away after this long");

namespace {

using hub::client::HubClient;
using hub::client::HubClientOptions;
using hub::client::PresenceCallbacks;
using hub::client::PresenceSession;
using hub::client::PresenceSessionOptions;
using hub::client::SessionState;

bool Fail(const std::string& what) {
  std::fprintf(stderr, "reconnect: %s\n", what.c_str());
  return false;
}

// hubd as a child process, restarted on the same address (a trimmed copy of
// tests/hubd_process, which is test-only).
class Hubd {
 public:
  Hubd(std::string binary, std::string db)
      : binary_(std::move(binary)), db_(std::move(db)) {}
  ~Hubd() { Kill(); }

  // Starts hubd and returns once it printed "serving on"; `serving_at` is
  // when the line was read.
  bool Start(absl::Time* serving_at) {
    std::vector<std::string> args = {
        binary_,
        absl::StrCat("--listen=", address_.empty() ? "127.0.0.1:0" : address_),
        absl::StrCat("--db=", db_), "--log_level=warn"};
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return Fail("pipe failed");
    pid_ = fork();
    if (pid_ < 0) return Fail("fork failed");
    if (pid_ == 0) {
      dup2(fds[1], STDOUT_FILENO);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(fds[1]);
    std::string out;
    const absl::Time give_up = absl::Now() + absl::Seconds(60);
    while (out.find('\n') == std::string::npos && absl::Now() < give_up) {
      pollfd p{fds[0], POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      char chunk[512];
      const ssize_t n = read(fds[0], chunk, sizeof(chunk));
      if (n <= 0) break;
      out.append(chunk, static_cast<size_t>(n));
    }
    *serving_at = absl::Now();
    close(fds[0]);
    const size_t at = out.find("serving on ");
    if (at == std::string::npos) {
      Kill();
      return Fail(absl::StrCat("hubd did not start: ", out));
    }
    const size_t start = at + 11;
    address_ = out.substr(start, out.find(' ', start) - start);
    return true;
  }

  void Kill() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }

  const std::string& address() const { return address_; }

 private:
  const std::string binary_;
  const std::string db_;
  std::string address_;
  pid_t pid_ = -1;
};

// When each session last became attached, and how many are attached now.
struct Fleet {
  explicit Fleet(int n) : attached_at(n) {}
  absl::Mutex mu;
  std::vector<absl::Time> attached_at ABSL_GUARDED_BY(mu);
  int attached ABSL_GUARDED_BY(mu) = 0;
  std::vector<bool> is_attached ABSL_GUARDED_BY(mu);
};

double At(const std::vector<double>& sorted, double q) {
  return sorted[std::min(sorted.size() - 1,
                         static_cast<size_t>(q * sorted.size()))];
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string hubd_path = absl::GetFlag(FLAGS_hubd);
  const int sessions = absl::GetFlag(FLAGS_sessions);
  const int channels = absl::GetFlag(FLAGS_channels);
  const int rounds = absl::GetFlag(FLAGS_rounds);
  if (hubd_path.empty()) return Fail("--hubd is required"), 2;
  if (sessions < 1 || channels < 1 || rounds < 1) {
    return Fail("--sessions, --channels and --rounds must be at least 1"), 2;
  }
  std::string db = absl::GetFlag(FLAGS_db);
  if (db.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    db = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/reconnect-", getpid(),
                      ".sqlite");
  }
  Hubd hubd(hubd_path, db);
  absl::Time serving_at;
  if (!hubd.Start(&serving_at)) return 1;

  std::vector<std::unique_ptr<HubClient>> clients;
  for (int i = 0; i < channels; ++i) {
    HubClientOptions options;
    options.address = hubd.address();
    clients.push_back(std::make_unique<HubClient>(options));
  }
  Fleet fleet(sessions);
  {
    absl::MutexLock lock(&fleet.mu);
    fleet.is_attached.assign(sessions, false);
  }
  std::vector<std::unique_ptr<PresenceSession>> fleet_sessions;
  for (int i = 0; i < sessions; ++i) {
    PresenceSessionOptions options;
    options.registration.set_agent_id(absl::StrCat("reconnect-", i));
    options.registration.set_cli(hub::v1::AGENT_CLI_CLAUDE);
    options.deregister_on_stop = false;  // the run ends with a kill anyway
    PresenceCallbacks callbacks;
    callbacks.on_state_change = [&fleet, i](SessionState state,
                                            const absl::Status&) {
      const absl::Time now = absl::Now();
      absl::MutexLock lock(&fleet.mu);
      const bool attached = state == SessionState::kAttached;
      if (attached) fleet.attached_at[i] = now;
      if (attached != fleet.is_attached[i]) {
        fleet.attached += attached ? 1 : -1;
        fleet.is_attached[i] = attached;
      }
    };
    fleet_sessions.push_back(std::make_unique<PresenceSession>(
        clients[i % channels].get(), options, std::move(callbacks)));
    if (!fleet_sessions.back()->Start().ok()) return Fail("Start failed"), 1;
  }
  auto await_attached = [&](int n, absl::Duration timeout) {
    absl::MutexLock lock(&fleet.mu);
    auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(fleet.mu) {
      return fleet.attached == n;
    };
    return fleet.mu.AwaitWithTimeout(absl::Condition(&done), timeout);
  };
  if (!await_attached(sessions, absl::GetFlag(FLAGS_give_up))) {
    return Fail("the fleet did not attach at first"), 1;
  }
  // Let the first attach's registrations and heartbeats settle.
  absl::SleepFor(absl::Seconds(1));

  std::vector<double> ms;
  bool ok = true;
  for (int round = 0; round < rounds && ok; ++round) {
    hubd.Kill();
    if (!await_attached(0, absl::Seconds(30))) {
      ok = Fail("the sessions did not notice the kill");
      break;
    }
    absl::SleepFor(absl::GetFlag(FLAGS_downtime));
    if (!hubd.Start(&serving_at)) return 1;
    if (!await_attached(sessions, absl::GetFlag(FLAGS_give_up))) {
      absl::MutexLock lock(&fleet.mu);
      ok = Fail(absl::StrCat("round ", round, ": ", sessions - fleet.attached,
                             " sessions still away"));
      break;
    }
    std::vector<double> round_ms;
    {
      absl::MutexLock lock(&fleet.mu);
      for (absl::Time t : fleet.attached_at) {
        round_ms.push_back(absl::ToDoubleMilliseconds(t - serving_at));
      }
    }
    std::sort(round_ms.begin(), round_ms.end());
    std::fprintf(
        stderr,
        "reconnect: round %d: first %.0f ms, p50 %.0f ms, p99 %.0f ms, "
        "max %.0f ms\n",
        round, round_ms.front(), At(round_ms, 0.5), At(round_ms, 0.99),
        round_ms.back());
    ms.insert(ms.end(), round_ms.begin(), round_ms.end());
    absl::SleepFor(absl::Seconds(1));
  }
  for (auto& s : fleet_sessions) s->Stop();
  fleet_sessions.clear();
  hubd.Kill();
  for (const char* suffix : {"", "-wal", "-shm"}) {
    std::remove(absl::StrCat(db, suffix).c_str());
  }
  const std::string layout =
      absl::StrCat("s", sessions, "c", channels, "r", rounds);
  if (!ok || ms.empty()) {
    std::printf(
        "{\"target\":\"hub\",\"workload\":\"reconnect\",\"layout\":\"%s\","
        "\"status\":\"error\",\"error\":\"see stderr\"}\n",
        layout.c_str());
    return 1;
  }
  // CPU of this process (the clients) and of the hubd processes, whole run.
  auto cpu_s = [](int who) {
    rusage usage{};
    getrusage(who, &usage);
    return usage.ru_utime.tv_sec + usage.ru_stime.tv_sec +
           1e-6 * (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
  };
  std::fprintf(stderr, "reconnect: CPU: clients %.2f s, hubd %.2f s\n",
               cpu_s(RUSAGE_SELF), cpu_s(RUSAGE_CHILDREN));
  std::sort(ms.begin(), ms.end());
  std::printf(
      "{\"target\":\"hub\",\"workload\":\"reconnect\",\"layout\":\"%s\","
      "\"status\":\"ok\",\"samples\":%zu,\"p50_ms\":%.2f,\"p99_ms\":%.2f,"
      "\"max_ms\":%.2f}\n",
      layout.c_str(), ms.size(), At(ms, 0.50), At(ms, 0.99), ms.back());
  return 0;
}
