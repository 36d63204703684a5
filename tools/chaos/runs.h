// The chaos driver's runs, over the same load and ledger:
//   - RunSqliteKills: one hubd over SQLite, SIGKILLed at random moments and
//     restarted; the file is checked while the hub is down.
//   - RunPostgresFaults: several hubds over one PostgreSQL database, with
//     faults drawn at random among a hub SIGKILLed (and restarted as a new
//     hub), a hub SIGSTOPped past its lease and resumed, every backend of
//     the hubs terminated, and PostgreSQL stopped immediately and started;
//     the database is checked while the surviving hubs serve.
// Each prints figures as it goes and a summary, and returns the driver's
// exit status: 0 when every check passed, 1 on any violation, 2 when a hub
// or the database could not be (re)started.
#ifndef TOOLS_CHAOS_RUNS_H_
#define TOOLS_CHAOS_RUNS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "tools/chaos/load.h"

namespace hub::chaos {

struct RunOptions {
  std::string hubd;  // the hubd binary
  std::string dir;   // work directory: hubd's logs (and SQLite's database)
  int faults = 20;   // kills (SQLite) or faults (PostgreSQL)
  uint64_t seed = 0;
  absl::Duration min_uptime;  // load between a recovery and the next fault
  absl::Duration max_uptime;
  LoadOptions load;  // addresses are filled in by the run
  int roles = 4;

  // PostgreSQL only.
  std::string db;  // libpq URL of the database every hub serves
  int hubs = 2;
  std::string pg_ctl;  // "PG_CTL stop" stops the server immediately,
                       // "PG_CTL start" starts it and waits until it serves
  std::vector<std::string> fault_kinds;  // kill, stop, terminate, restart
  absl::Duration hub_lease;              // hubd's flags; zero: hubd's default
  absl::Duration hub_renew_interval;
  absl::Duration detach_grace;
  // A pause whose other hubs' writes wait longer is a violation; zero: only
  // measured.
  absl::Duration max_write_stall;
};

int RunSqliteKills(const RunOptions& options);
int RunPostgresFaults(const RunOptions& options);

// What the runs share.
// The first `roles` (1..8) chaos projects, prj_AAA... to prj_HHH....
std::vector<std::string> ChaosProjects(int roles);
// "median=N ms max=N ms" of `ms` (0 when empty).
std::string MedianMax(std::vector<int64_t> ms);
// The ledger's counters, one line.
std::string LedgerLine(const Ledger& ledger);
// A random duration in [min, max).
absl::Duration Between(uint64_t random, absl::Duration min, absl::Duration max);

}  // namespace hub::chaos

#endif  // TOOLS_CHAOS_RUNS_H_
