#include "storage/pg/pg_test_server.h"

#include <fcntl.h>
#include <pwd.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

extern char** environ;

namespace hub::storage::pg::testing {
namespace {

constexpr char kBin[] = "/usr/lib/postgresql/15/bin/";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

absl::StatusOr<std::unique_ptr<PgTestServer>> PgTestServer::Create(
    const PgTestOptions& options) {
  char pattern[] = "/tmp/hub-pg.XXXXXX";
  if (mkdtemp(pattern) == nullptr) {
    return absl::InternalError(
        absl::StrCat("mkdtemp failed: ", std::strerror(errno)));
  }
  std::unique_ptr<PgTestServer> server(new PgTestServer(pattern, options));
  if (geteuid() == 0) {
    const passwd* nobody = getpwnam("nobody");
    if (nobody == nullptr ||
        chown(pattern, nobody->pw_uid, nobody->pw_gid) != 0) {
      return absl::InternalError(absl::StrCat(
          "cannot hand ", pattern, " to nobody (run outside the sandbox: ",
          "tags = [\"no-sandbox\"]): ", std::strerror(errno)));
    }
  }
  if (absl::Status s = server->Run(
          {absl::StrCat(kBin, "initdb"), "-D", server->dir_ + "/data", "-A",
           "trust", "-U", "hub", "-E", "UTF8", "--locale=C.UTF-8",
           // A linguistic default collation ('a' < 'B'), as most
           // installations have, so that a query relying on byte order
           // without saying so fails here.
           "--locale-provider=icu", "--icu-locale=en-US", "--no-sync"});
      !s.ok()) {
    return s;
  }
  if (absl::Status s = server->Start(); !s.ok()) return s;
  return server;
}

PgTestServer::~PgTestServer() {
  if (running_) (void)Stop("immediate");
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

std::string PgTestServer::ConnInfo(const std::string& database) const {
  return absl::StrCat("host=", dir_, " port=5432 user=hub dbname=", database,
                      " connect_timeout=10");
}

absl::Status PgTestServer::Start() {
  std::vector<std::string> settings = {
      "listen_addresses=", absl::StrCat("unix_socket_directories=", dir_),
      "max_connections=200"};
  if (!options_.durable) {
    settings.insert(settings.end(), {"fsync=off", "full_page_writes=off",
                                     "synchronous_commit=off"});
  }
  settings.insert(settings.end(), options_.settings.begin(),
                  options_.settings.end());
  std::string server_options;
  for (const std::string& s : settings) {
    absl::StrAppend(&server_options, " -c ", s);
  }
  if (absl::Status s = Run({absl::StrCat(kBin, "pg_ctl"), "-D", dir_ + "/data",
                            "-l", dir_ + "/server.log", "-o", server_options,
                            "-w", "-t", "60", "start"});
      !s.ok()) {
    return absl::UnavailableError(
        absl::StrCat(s.message(), "\n", ReadAll(dir_ + "/server.log")));
  }
  running_ = true;
  return absl::OkStatus();
}

absl::Status PgTestServer::Stop(const std::string& mode) {
  absl::Status s = Run({absl::StrCat(kBin, "pg_ctl"), "-D", dir_ + "/data",
                        "-m", mode, "-w", "-t", "60", "stop"});
  if (s.ok()) running_ = false;
  return s;
}

absl::Status PgTestServer::CreateDatabase(const std::string& name) {
  return Run({absl::StrCat(kBin, "createdb"), "-h", dir_, "-U", "hub", name});
}

absl::Status PgTestServer::Run(const std::vector<std::string>& argv) {
  std::vector<std::string> full;
  if (geteuid() == 0) {
    full = {"/usr/bin/setpriv", "--reuid=nobody", "--regid=nogroup",
            "--clear-groups"};
  }
  full.insert(full.end(), argv.begin(), argv.end());
  std::vector<char*> args;
  for (std::string& a : full) args.push_back(a.data());
  args.push_back(nullptr);
  const std::string log = dir_ + "/command.log";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null",
                                   O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  // The child's working directory must be one `nobody` may enter.
  posix_spawn_file_actions_addchdir_np(&actions, dir_.c_str());
  pid_t pid = 0;
  const int spawned =
      posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) {
    return absl::InternalError(
        absl::StrCat("cannot run ", full[0], ": ", std::strerror(spawned)));
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat(absl::StrJoin(argv, " "), " failed:\n", ReadAll(log)));
}

}  // namespace hub::storage::pg::testing
