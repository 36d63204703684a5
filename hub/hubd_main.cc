// hubd: the hub server.
//
//   hubd [--listen=127.0.0.1:27889] [--db=var/hub.sqlite|postgresql://...]
//        [--metrics_listen=127.0.0.1:9464] [--log_level=info]
//
// Prints one line when it serves, with the bound address, the database, the
// version and the security settings. SIGINT or SIGTERM shut it down cleanly
// (exit 0); SIGHUP reloads the token file and the TLS files; a taken port, an
// unusable database, a database another hubd holds, a --db that is a URL or
// an insecure non-loopback address is a clear message and exit 1.
#include <malloc.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "hub/edge/limit_flags.h"
#include "hub/observability/log.h"
#include "hub/server.h"
#include "hub/version.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:27889",
          "host:port to serve gRPC on; port 0 picks a free port");
ABSL_FLAG(std::string, db, "var/hub.sqlite",
          "SQLite database file path (created with its directory if missing; "
          "a triflux database is opened in place); one hubd per file: a "
          "second one on a file that a running hubd holds (<db>.lock) exits "
          "1 naming it. Or a PostgreSQL database, postgresql://... (a libpq "
          "URI; several hosts and target_session_attrs=read-write work), "
          "migrated on start. Any other URL is refused");
ABSL_FLAG(std::string, synchronous, "full",
          "durability of every write: full (an acknowledged write survives "
          "power loss: SQLite synchronous=FULL, PostgreSQL "
          "synchronous_commit=on) or normal (survives a hubd crash only: "
          "SQLite synchronous=NORMAL, PostgreSQL synchronous_commit=off)");
ABSL_FLAG(absl::Duration, detach_grace, absl::Seconds(2),
          "after an agent's presence stream ends, how long before it counts "
          "as gone for role purposes unless it re-attaches");
ABSL_FLAG(absl::Duration, hub_lease, absl::Seconds(5),
          "hubs sharing a PostgreSQL database: how long after this hub stops "
          "renewing its seat (killed, paused, cut off) the others take its "
          "agents over; it stops acting a fifth of this earlier on its own");
ABSL_FLAG(absl::Duration, hub_renew_interval, absl::Seconds(1),
          "hubs sharing a PostgreSQL database: how often this hub renews its "
          "seat and looks for hubs whose lease ran out");
ABSL_FLAG(absl::Duration, keepalive_interval, absl::Seconds(5),
          "HTTP/2 keepalive ping interval on every connection; a dead peer is "
          "found within keepalive_interval + keepalive_timeout");
ABSL_FLAG(absl::Duration, keepalive_timeout, absl::Seconds(5),
          "how long an unanswered keepalive ping may take before the "
          "connection (and its presence streams) is dropped");
ABSL_FLAG(absl::Duration, sweep_interval, absl::Seconds(1),
          "how often leases are checked (online -> stale when the lease is "
          "past, stale -> offline 5 minutes later) and checkpointed");
ABSL_FLAG(std::string, claude_uds_command, "",
          "the program that reaches Claude sessions of claude-uds transport "
          "locators (triflux's tfx-live interface: `<program> probe ...`, "
          "`<program> ask ...`), run with an argv, never a shell; empty: "
          "claude-uds locators report adapter_unavailable");
ABSL_FLAG(std::string, claude_uds_bridge, "",
          "the --bridge value passed to the claude-uds command; empty: each "
          "locator's bridge_id");
ABSL_FLAG(absl::Duration, shutdown_grace, absl::Seconds(5),
          "on SIGINT/SIGTERM, how long in-flight calls may take to finish "
          "before they are cancelled");
ABSL_FLAG(std::string, metrics_listen, "",
          "host:port to serve Prometheus metrics on (GET /metrics) and the "
          "web console (at /); empty: neither. HTTPS with --tls_cert; off "
          "loopback it needs TLS and --token_file, unless --insecure");
ABSL_FLAG(bool, console, true,
          "serve the web console at / of --metrics_listen "
          "(docs/design/console.md)");
ABSL_FLAG(std::string, log_level, "info",
          "least severe structured log line written to stderr: debug, info, "
          "warn, error or off");

// ---- identity and authority (docs/design/auth.md) ----
ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate chain to serve TLS with (empty: plaintext); "
          "--tls_cert, --tls_key and --tls_client_ca are re-read on SIGHUP");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM CA certificate(s): when set, every client must present a "
          "certificate signed by one of them (mutual TLS)");
ABSL_FLAG(std::string, token_file, "",
          "JSON file of bearer tokens (principal, kind, projects); reloaded "
          "on SIGHUP and when it changes. Empty: every caller is an "
          "anonymous admin");
ABSL_FLAG(bool, insecure, false,
          "allow a non-loopback --listen without TLS and tokens");

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
  // glibc returns freed memory at the top of each thread arena to the kernel
  // once it passes 128 KiB (madvise), and the writer's and the commit
  // threads' allocations cross that line many times a second: each return is
  // a TLB shootdown on every core. Keep up to 64 MiB per arena instead, and
  // serve blocks up to 4 MiB from the arenas rather than from mmap. Measured
  // 2026-11-30 for commit 1c3ed22 (the run is in git history of
  // docs/BENCHMARKS.md): CompareAndSetRole 173 -> 134 us of hubd CPU per call.
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
  mallopt(M_MMAP_THRESHOLD, 4 << 20);

  // Block the shutdown signals in every thread (gRPC's threads inherit this
  // mask) and take them synchronously below with sigwait.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  absl::StatusOr<hub::log::Level> level =
      hub::log::ParseLevel(absl::GetFlag(FLAGS_log_level));
  if (!level.ok()) {
    std::fprintf(stderr, "hubd: --log_level: %s\n",
                 std::string(level.status().message()).c_str());
    return 1;
  }
  hub::log::SetLevel(*level);

  hub::HubServerOptions options;
  options.metrics_listen = absl::GetFlag(FLAGS_metrics_listen);
  options.console = absl::GetFlag(FLAGS_console);
  options.listen = absl::GetFlag(FLAGS_listen);
  options.db_path = absl::GetFlag(FLAGS_db);
  const std::string synchronous = absl::GetFlag(FLAGS_synchronous);
  if (synchronous == "full") {
    options.durability = hub::storage::Durability::kPowerLoss;
  } else if (synchronous == "normal") {
    options.durability = hub::storage::Durability::kProcessCrash;
  } else {
    std::fprintf(stderr, "hubd: --synchronous must be full or normal\n");
    return 1;
  }
  options.presence.detach_grace = absl::GetFlag(FLAGS_detach_grace);
  options.presence.sweep_interval = absl::GetFlag(FLAGS_sweep_interval);
  options.presence.checkpoint_interval = absl::GetFlag(FLAGS_sweep_interval);
  options.keepalive_interval = absl::GetFlag(FLAGS_keepalive_interval);
  options.keepalive_timeout = absl::GetFlag(FLAGS_keepalive_timeout);
  options.membership.lease = absl::GetFlag(FLAGS_hub_lease);
  options.membership.renew_interval = absl::GetFlag(FLAGS_hub_renew_interval);
  options.membership.margin = options.membership.lease / 5;
  if (options.membership.renew_interval <= absl::ZeroDuration() ||
      2 * options.membership.renew_interval >
          options.membership.lease - options.membership.margin) {
    std::fprintf(stderr,
                 "hubd: --hub_renew_interval must be positive and at most "
                 "two fifths of --hub_lease\n");
    return 1;
  }
  if (const std::string command = absl::GetFlag(FLAGS_claude_uds_command);
      !command.empty()) {
    // A path that is not executable is a configuration mistake: say so now
    // rather than at the first activation. A bare name is looked up in PATH
    // when it runs.
    if (command.find('/') != std::string::npos &&
        access(command.c_str(), X_OK) != 0) {
      std::fprintf(stderr,
                   "hubd: --claude_uds_command %s is not an executable file\n",
                   command.c_str());
      return 1;
    }
    options.claude_uds.command = {command};
  }
  if (const std::string bridge = absl::GetFlag(FLAGS_claude_uds_bridge);
      !bridge.empty()) {
    options.claude_uds.bridge = bridge;
  }
  for (absl::Duration d :
       {options.presence.detach_grace, options.presence.sweep_interval,
        options.keepalive_interval, options.keepalive_timeout}) {
    if (d <= absl::ZeroDuration() || d > absl::Hours(1)) {
      std::fprintf(stderr, "hubd: durations must be positive and at most 1h\n");
      return 1;
    }
  }
  options.tls.cert_file = absl::GetFlag(FLAGS_tls_cert);
  options.tls.key_file = absl::GetFlag(FLAGS_tls_key);
  options.tls.client_ca_file = absl::GetFlag(FLAGS_tls_client_ca);
  options.auth.token_file = absl::GetFlag(FLAGS_token_file);
  options.insecure = absl::GetFlag(FLAGS_insecure);
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
  std::printf("hubd %s serving on %s db=%s hub_instance_id=%s %s\n",
              hub::kHubVersion, (*server)->address().c_str(),
              (*server)->identity().store_path.c_str(),
              (*server)->identity().hub_instance_id.c_str(),
              (*server)->security().c_str());
  std::fflush(stdout);
  hub::log::Info("hub_started",
                 {{"version", hub::kHubVersion},
                  {"address", (*server)->address()},
                  {"metrics_address", (*server)->metrics_address()},
                  {"db", (*server)->identity().store_path},
                  {"hub_instance_id", (*server)->identity().hub_instance_id}});

  int signal_number = 0;
  while (sigwait(&signals, &signal_number) == 0 && signal_number == SIGHUP) {
    // Failures are reported by the reloads themselves; the old tokens and
    // certificates stay.
    (*server)->ReloadTokens().IgnoreError();
    (*server)->ReloadTls().IgnoreError();
  }
  const char* signal_name = signal_number == SIGINT ? "SIGINT" : "SIGTERM";
  hub::log::Info(
      "hub_stopping",
      {{"signal", signal_name},
       {"message", absl::StrCat(signal_name, " received, shutting down")}});
  (*server)->Shutdown(absl::GetFlag(FLAGS_shutdown_grace));
  hub::log::Info("hub_stopped", {});
  return 0;
}
