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
#include "absl/time/time.h"
#include "hub/server.h"
#include "hub/version.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:27889",
          "host:port to serve gRPC on; port 0 picks a free port");
ABSL_FLAG(std::string, db, "var/hub.sqlite",
          "SQLite database file (created with its directory if missing; a "
          "triflux database is opened in place)");
ABSL_FLAG(absl::Duration, shutdown_grace, absl::Seconds(5),
          "on SIGINT/SIGTERM, how long in-flight calls may take to finish "
          "before they are cancelled");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(absl::StrCat(
      "hub ", hub::kHubVersion,
      ": coordination service for fleets of coding-agent CLIs.\n\nUsage: ",
      argv[0], " [--listen=host:port] [--db=path]"));
  absl::ParseCommandLine(argc, argv);

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
