// One hubd over SQLite, SIGKILLed at random moments; after each kill the
// file is checked against the ledger and by PRAGMA integrity_check (sqlite3
// CLI), then hubd is restarted on the same address and the load goes on.
#include <sys/wait.h>

#include <cstdio>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/hubd_process.h"
#include "tools/chaos/ledger.h"
#include "tools/chaos/runs.h"
#include "tools/chaos/store_snapshot.h"

namespace hub::chaos {
namespace {

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

// The ledger's checks and integrity_check of the file; prints violations.
CheckCounts CheckFile(Ledger& ledger, const std::string& db,
                      const std::string& when, std::string* integrity,
                      std::vector<std::string>* violations) {
  std::vector<std::string> found;
  CheckCounts counts =
      ledger.Check([&db] { return ReadSqliteSnapshot(db); }, &found);
  *integrity = IntegrityCheck(db);
  if (*integrity != "ok") {
    found.push_back("PRAGMA integrity_check: " + *integrity);
  }
  for (const std::string& v : found) {
    std::cout << "chaos: VIOLATION " << when << ": " << v << std::endl;
  }
  violations->insert(violations->end(), found.begin(), found.end());
  return counts;
}

}  // namespace

int RunSqliteKills(const RunOptions& options) {
  const std::string& dir = options.dir;
  uint64_t seed = options.seed;
  if (seed == 0) seed = static_cast<uint64_t>(absl::ToUnixNanos(absl::Now()));
  std::mt19937_64 random(seed);

  Ledger ledger;
  LoadOptions load_options = options.load;
  const std::string db = dir + "/chaos.sqlite";
  const std::string log = dir + "/hubd.stderr";
  testing::HubdProcessOptions process;
  process.binary = options.hubd;
  process.stderr_path = log;
  testing::HubdProcess hubd(db, {"--log_level=warn"}, process);
  std::vector<int64_t> restart_ms;
  std::vector<int64_t> resume_ms;  // serving -> first acknowledged call
  if (absl::Status started = hubd.Start(); !started.ok()) {
    std::cerr << "chaos: " << started << " (see " << log << ")\n";
    return 2;
  }
  load_options.addresses = {hubd.address()};
  load_options.projects = ChaosProjects(options.roles);
  std::cout << "chaos: seed=" << seed << " kills=" << options.faults
            << " workers=" << load_options.workers
            << " roles=" << load_options.projects.size()
            << " hubd=" << hubd.address() << " dir=" << dir << std::endl;
  Load load(&ledger, load_options);
  load.Start(random());

  std::vector<std::string> violations;
  CheckCounts last;
  std::string integrity;
  const absl::Time run_started = absl::Now();
  for (int k = 1; k <= options.faults; ++k) {
    const absl::Duration uptime =
        Between(random(), options.min_uptime, options.max_uptime);
    absl::SleepFor(uptime);
    hubd.Kill();
    load.Hold();
    last = CheckFile(ledger, db, absl::StrCat("after kill ", k), &integrity,
                     &violations);
    const absl::Time restarting = absl::Now();
    if (absl::Status started = hubd.Start(); !started.ok()) {
      std::cerr << "chaos: hubd did not restart after kill " << k << ": "
                << started << " (see " << log << ")\n";
      return 2;
    }
    load.HubRestarted(0);
    load.Release();
    restart_ms.push_back(absl::ToInt64Milliseconds(absl::Now() - restarting));
    // Load resumes: the first acknowledged call after the restart.
    const int64_t restarted_ns = absl::GetCurrentTimeNanos();
    while (load.last_ok_ns() < restarted_ns &&
           absl::GetCurrentTimeNanos() - restarted_ns < 30'000'000'000) {
      absl::SleepFor(absl::Milliseconds(1));
    }
    resume_ms.push_back((load.last_ok_ns() - restarted_ns) / 1'000'000);
    std::cout << "chaos: kill " << k << " after "
              << absl::ToInt64Milliseconds(uptime)
              << " ms: checked agents=" << last.agents
              << " publishes=" << last.messages << " acks=" << last.acks
              << " roles=" << last.roles << " role_writes=" << last.role_writes
              << " integrity=" << integrity
              << " restart_ms=" << restart_ms.back()
              << " resume_ms=" << resume_ms.back() << std::endl;
  }
  absl::SleepFor(options.min_uptime);
  load.Stop();
  const int status = hubd.Terminate();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    violations.push_back(absl::StrCat("hubd ended with wait status ", status,
                                      " on SIGTERM (want exit 0)"));
  }
  last = CheckFile(ledger, db, "after the clean stop", &integrity, &violations);

  std::cout << "chaos: summary: kills=" << options.faults
            << " seconds=" << absl::ToInt64Seconds(absl::Now() - run_started)
            << " violations=" << violations.size() << "\n"
            << load.Summary() << "\n"
            << LedgerLine(ledger) << "\n"
            << "chaos: final check: agents=" << last.agents
            << " publishes=" << last.messages << " acks=" << last.acks
            << " roles=" << last.roles << " role_writes=" << last.role_writes
            << " integrity=" << integrity << "\n"
            << "chaos: restart to serving: " << MedianMax(restart_ms)
            << "\nchaos: restart to first acknowledged call: "
            << MedianMax(resume_ms) << std::endl;
  return violations.empty() ? 0 : 1;
}

}  // namespace hub::chaos
