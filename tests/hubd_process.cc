#include "tests/hubd_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace hub::testing {

std::string HubdRunfilesPath() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  return absl::StrCat(srcdir != nullptr ? srcdir : ".", "/",
                      workspace != nullptr ? workspace : "hub", "/hub/hubd");
}

std::string TempDbPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path =
      absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name, ".sqlite");
  for (const char* suffix : {"", "-wal", "-shm"}) {
    std::remove(absl::StrCat(path, suffix).c_str());
  }
  return path;
}

HubdProcess::HubdProcess(std::string db_path,
                         std::vector<std::string> extra_args,
                         HubdProcessOptions options)
    : db_path_(std::move(db_path)),
      extra_args_(std::move(extra_args)),
      options_(std::move(options)) {}

HubdProcess::~HubdProcess() { Kill(); }

absl::Status HubdProcess::Start() {
  if (pid_ > 0) return absl::FailedPreconditionError("hubd is running");
  // Everything the child needs is built before fork(): after it only
  // async-signal-safe calls are allowed.
  const std::string hubd =
      options_.binary.empty() ? HubdRunfilesPath() : options_.binary;
  std::vector<std::string> args = {
      hubd,
      absl::StrCat("--listen=", address_.empty() ? "127.0.0.1:0" : address_),
      absl::StrCat("--db=", db_path_)};
  args.insert(args.end(), extra_args_.begin(), extra_args_.end());
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  int err = -1;
  if (!options_.stderr_path.empty()) {
    err = open(options_.stderr_path.c_str(),
               O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (err < 0) return absl::InternalError("cannot open hubd's stderr file");
  }
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return absl::InternalError("pipe failed");
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    if (err >= 0) dup2(err, STDERR_FILENO);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(fds[1]);
  if (err >= 0) close(err);
  pid_ = pid;
  // The first line: "hubd <version> serving on <address> db=<path>
  // hub_instance_id=<id>".
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
  close(fds[0]);
  const size_t at = out.find("serving on ");
  const size_t id_at = out.find("hub_instance_id=");
  if (at == std::string::npos || id_at == std::string::npos) {
    Kill();
    return absl::UnavailableError(absl::StrCat("hubd did not start: ", out));
  }
  const size_t start = at + 11;
  address_ = out.substr(start, out.find(' ', start) - start);
  const size_t id_start = id_at + 16;
  instance_id_ =
      out.substr(id_start, out.find_first_of(" \n", id_start) - id_start);
  return absl::OkStatus();
}

void HubdProcess::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);  // also ends a paused process
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
}

int HubdProcess::Terminate() {
  if (pid_ <= 0) return -1;
  kill(pid_, SIGTERM);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
  return status;
}

void HubdProcess::Pause() {
  if (pid_ > 0) kill(pid_, SIGSTOP);
}

void HubdProcess::Resume() {
  if (pid_ > 0) kill(pid_, SIGCONT);
}

}  // namespace hub::testing
