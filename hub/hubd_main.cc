// hubd: the hub server.
//
//   hubd [--listen=127.0.0.1:27889] [--db=var/hub.sqlite]
//
// Prints one line when it serves, with the bound address, the database and
// the version. SIGINT or SIGTERM shut it down cleanly (exit 0); a taken port
// or an unusable database is a clear message and exit 1.
#include <signal.h>

#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "hub/limit_flags.h"
#include "hub/server.h"
#include "hub/version.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:27889",
          "host:port to serve gRPC on; port 0 picks a free port");
ABSL_FLAG(std::string, db, "var/hub.sqlite",
          "SQLite database file (created with its directory if missing; a "
          "triflux database is opened in place)");
ABSL_FLAG(std::string, synchronous, "full",
          "SQLite synchronous mode for every durable write: full (an "
          "acknowledged write survives power loss) or normal (survives a "
          "process crash only)");
ABSL_FLAG(absl::Duration, detach_grace, absl::Seconds(2),
          "after an agent's presence stream ends, how long before it counts "
          "as gone for role purposes unless it re-attaches");
ABSL_FLAG(absl::Duration, keepalive_interval, absl::Seconds(5),
          "HTTP/2 keepalive ping interval on every connection; a dead peer is "
          "found within keepalive_interval + keepalive_timeout");
ABSL_FLAG(absl::Duration, keepalive_timeout, absl::Seconds(5),
          "how long an unanswered keepalive ping may take before the "
          "connection (and its presence streams) is dropped");
ABSL_FLAG(absl::Duration, sweep_interval, absl::Seconds(1),
          "how often leases are checked (online -> stale when the lease is "
          "past, stale -> offline 5 minutes later) and checkpointed");
ABSL_FLAG(absl::Duration, shutdown_grace, absl::Seconds(5),
          "on SIGINT/SIGTERM, how long in-flight calls may take to finish "
          "before they are cancelled");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(absl::StrCat(
      "hub ", hub::kHubVersion,
      ": coordination service for fleets of coding-agent CLIs.\n\nUsage: ",
      argv[0], " [--listen=host:port] [--db=path]"));
  absl::ParseCommandLine(argc, argv);
  // Debian's Abseil checks every Mutex acquisition against a global lock
  // graph (deadlock detection), which serializes hot paths across threads.
  // The tests keep it on; the server turns it off.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);

  // Block the shutdown signals in every thread (gRPC's threads inherit this
  // mask) and take them synchronously below with sigwait.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  hub::HubServerOptions options;
  options.listen = absl::GetFlag(FLAGS_listen);
  options.db_path = absl::GetFlag(FLAGS_db);
  const std::string synchronous = absl::GetFlag(FLAGS_synchronous);
  if (synchronous == "full") {
    options.synchronous = hub::storage::SqliteStoreOptions::Synchronous::kFull;
  } else if (synchronous == "normal") {
    options.synchronous =
        hub::storage::SqliteStoreOptions::Synchronous::kNormal;
  } else {
    std::fprintf(stderr, "hubd: --synchronous must be full or normal\n");
    return 1;
  }
  options.presence.detach_grace = absl::GetFlag(FLAGS_detach_grace);
  options.presence.sweep_interval = absl::GetFlag(FLAGS_sweep_interval);
  options.presence.checkpoint_interval = absl::GetFlag(FLAGS_sweep_interval);
  options.keepalive_interval = absl::GetFlag(FLAGS_keepalive_interval);
  options.keepalive_timeout = absl::GetFlag(FLAGS_keepalive_timeout);
  for (absl::Duration d :
       {options.presence.detach_grace, options.presence.sweep_interval,
        options.keepalive_interval, options.keepalive_timeout}) {
    if (d <= absl::ZeroDuration() || d > absl::Hours(1)) {
      std::fprintf(stderr, "hubd: durations must be positive and at most 1h\n");
      return 1;
    }
  }
  if (absl::Status limits = hub::ApplyLimitFlags(&options); !limits.ok()) {
    std::fprintf(stderr, "hubd: %s\n", std::string(limits.message()).c_str());
    return 1;
  }
  auto server = hub::HubServer::Start(options);
  if (!server.ok()) {
    std::fprintf(stderr, "hubd: %s\n",
                 std::string(server.status().message()).c_str());
    return 1;
  }
  std::printf("hubd %s serving on %s db=%s hub_instance_id=%s\n",
              hub::kHubVersion, (*server)->address().c_str(),
              (*server)->identity().store_path.c_str(),
              (*server)->identity().hub_instance_id.c_str());
  std::fflush(stdout);

  int signal_number = 0;
  sigwait(&signals, &signal_number);
  std::fprintf(stderr, "hubd: %s received, shutting down\n",
               signal_number == SIGINT ? "SIGINT" : "SIGTERM");
  (*server)->Shutdown(absl::GetFlag(FLAGS_shutdown_grace));
  std::fprintf(stderr, "hubd: stopped\n");
  return 0;
}
