// chaos_driver: runs hubd under mixed load and injects faults at random
// moments; after each fault it checks the database against what the
// clients saw acknowledged (tools/chaos/ledger.h), then goes on.
//
//   chaos_driver --hubd=PATH --dir=DIR [--kills=20] [--workers=4] [--seed=N]
//       one hubd over DIR/chaos.sqlite, SIGKILLed and restarted (runs.h)
//   chaos_driver --hubd=PATH --dir=DIR --db=postgresql://... --pg_ctl=CMD
//                [--hubs=2] [--faults=20] [--fault_kinds=kill,stop,...]
//       several hubds over one PostgreSQL database, faults drawn among a
//       hub killed, a hub paused past its lease, the hubs' backends
//       terminated, the server restarted, an attached agent's stream cut
//       (docs/design/multi-hub.md)
//
// Prints figures as it goes and a summary; exits 0 when every check passed,
// 1 on any violation, 2 when a hub or the database could not be (re)started.
#include <signal.h>

#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/time/time.h"
#include "tools/chaos/runs.h"

ABSL_FLAG(std::string, hubd, "", "the hubd binary");
ABSL_FLAG(std::string, dir, "", "work directory (hubd logs, SQLite database)");
ABSL_FLAG(int, kills, 20, "SQLite: how many times to SIGKILL hubd");
ABSL_FLAG(int, faults, 20, "PostgreSQL: how many faults to inject");
ABSL_FLAG(int, workers, 4, "client threads driving load");
ABSL_FLAG(int, roles, 4, "cto roles the workers compete for");
ABSL_FLAG(uint64_t, seed, 0,
          "random seed of the fault schedule and the load (printed at the "
          "start: a failed run replays with it); 0: from the clock");
ABSL_FLAG(absl::Duration, min_uptime, absl::Milliseconds(200),
          "shortest load phase between a recovery and the next fault");
ABSL_FLAG(absl::Duration, max_uptime, absl::Milliseconds(1200),
          "longest load phase between a recovery and the next fault");
ABSL_FLAG(absl::Duration, call_deadline, absl::Seconds(2),
          "deadline of every client call (how long a paused hub holds one)");
ABSL_FLAG(
    std::string, db, "",
    "a PostgreSQL URL: run several hubs over it (empty: one over SQLite)");
ABSL_FLAG(int, hubs, 2, "PostgreSQL: how many hubds");
ABSL_FLAG(int, attached, 2,
          "PostgreSQL: agents attached through presence streams, which take "
          "pushed messages, are candidates of a lead role per project that "
          "the workers elect through any hub, and move to another hub when "
          "theirs goes away");
ABSL_FLAG(std::string, pg_ctl, "",
          "PostgreSQL: a command run as `CMD stop` (stop the server "
          "immediately) and `CMD start` (start it, wait until it serves)");
ABSL_FLAG(std::vector<std::string>, fault_kinds, {},
          "PostgreSQL: faults to draw from (kill, stop, terminate, restart, "
          "cut); empty: all");
ABSL_FLAG(absl::Duration, hub_lease, absl::ZeroDuration(),
          "PostgreSQL: hubd's --hub_lease (also times the pauses); 0: "
          "hubd's default");
ABSL_FLAG(absl::Duration, hub_renew_interval, absl::ZeroDuration(),
          "PostgreSQL: hubd's --hub_renew_interval; 0: hubd's default");
ABSL_FLAG(absl::Duration, detach_grace, absl::ZeroDuration(),
          "PostgreSQL: hubd's --detach_grace; 0: hubd's default");

ABSL_FLAG(absl::Duration, max_write_stall, absl::ZeroDuration(),
          "PostgreSQL: while a hub is paused, a write through another hub "
          "that waits longer is a violation; 0: only measured");

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
  options.db = absl::GetFlag(FLAGS_db);
  if (options.db.empty()) {
    options.faults = absl::GetFlag(FLAGS_kills);
    return hub::chaos::RunSqliteKills(options);
  }
  options.faults = absl::GetFlag(FLAGS_faults);

  options.hubs = std::max(1, absl::GetFlag(FLAGS_hubs));
  options.load.attached = std::max(0, absl::GetFlag(FLAGS_attached));
  options.pg_ctl = absl::GetFlag(FLAGS_pg_ctl);
  options.fault_kinds = absl::GetFlag(FLAGS_fault_kinds);
  options.hub_lease = absl::GetFlag(FLAGS_hub_lease);
  options.hub_renew_interval = absl::GetFlag(FLAGS_hub_renew_interval);
  options.detach_grace = absl::GetFlag(FLAGS_detach_grace);
  options.max_write_stall = absl::GetFlag(FLAGS_max_write_stall);
  for (const std::string& kind : options.fault_kinds) {
    if (kind != "kill" && kind != "stop" && kind != "terminate" &&
        kind != "restart" && kind != "cut") {
      std::cerr << "chaos_driver: unknown fault kind " << kind << "\n";
      return 2;
    }
  }
  const bool restarts =
      options.fault_kinds.empty() ||
      std::find(options.fault_kinds.begin(), options.fault_kinds.end(),
                "restart") != options.fault_kinds.end();
  if (restarts && options.pg_ctl.empty()) {
    std::cerr << "chaos_driver: restart faults need --pg_ctl\n";
    return 2;
  }
  return hub::chaos::RunPostgresFaults(options);
}
