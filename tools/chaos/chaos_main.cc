// chaos_driver: runs hubd under mixed load and injects faults at random
// moments; after each fault it checks the database against what the
// clients saw acknowledged (tools/chaos/ledger.h), then goes on.
//
//   chaos_driver --hubd=PATH --dir=DIR [--kills=20] [--workers=4] [--seed=N]
//       one hubd over DIR/chaos.sqlite, SIGKILLed and restarted (runs.h)
//
// Prints figures as it goes and a summary; exits 0 when every check passed,
// 1 on any violation, 2 when hubd could not be (re)started.
#include <signal.h>

#include <algorithm>
#include <iostream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/time/time.h"
#include "tools/chaos/runs.h"

ABSL_FLAG(std::string, hubd, "", "the hubd binary");
ABSL_FLAG(std::string, dir, "", "work directory (hubd logs, SQLite database)");
ABSL_FLAG(int, kills, 20, "SQLite: how many times to SIGKILL hubd");
ABSL_FLAG(int, workers, 4, "client threads driving load");
ABSL_FLAG(int, roles, 4, "cto roles the workers compete for");
ABSL_FLAG(uint64_t, seed, 0, "random seed; 0: from the clock");
ABSL_FLAG(absl::Duration, min_uptime, absl::Milliseconds(200),
          "shortest load phase between a recovery and the next fault");
ABSL_FLAG(absl::Duration, max_uptime, absl::Milliseconds(1200),
          "longest load phase between a recovery and the next fault");
ABSL_FLAG(absl::Duration, call_deadline, absl::Seconds(2),
          "deadline of every client call (how long a paused hub holds one)");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  signal(SIGPIPE, SIG_IGN);
  hub::chaos::RunOptions options;
  options.hubd = absl::GetFlag(FLAGS_hubd);
  options.dir = absl::GetFlag(FLAGS_dir);
  if (options.hubd.empty() || options.dir.empty()) {
    std::cerr << "chaos_driver: --hubd and --dir are required\n";
    return 2;
  }
  options.seed = absl::GetFlag(FLAGS_seed);
  options.min_uptime = absl::GetFlag(FLAGS_min_uptime);
  options.max_uptime = absl::GetFlag(FLAGS_max_uptime);
  options.load.workers = std::max(1, absl::GetFlag(FLAGS_workers));
  options.load.call_deadline = absl::GetFlag(FLAGS_call_deadline);
  options.roles = absl::GetFlag(FLAGS_roles);
  options.faults = absl::GetFlag(FLAGS_kills);
  return hub::chaos::RunSqliteKills(options);
}
