#include "storage/sqlite/database_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "status/status.h"

namespace hub::storage {
namespace {

std::string HolderText(const DatabaseHolder& holder) {
  return absl::StrCat("program=", holder.program, "\npid=", holder.pid,
                      "\naddress=", holder.address,
                      "\nhub_instance_id=", holder.hub_instance_id, "\n");
}

// "hubd (pid 12, address 127.0.0.1:27889, hub_instance_id 0190...)", the
// unknown parts left out.
std::string DescribeHolder(const DatabaseHolder& holder) {
  std::vector<std::string> parts;
  if (!holder.pid.empty()) parts.push_back(absl::StrCat("pid ", holder.pid));
  if (!holder.address.empty()) {
    parts.push_back(absl::StrCat("address ", holder.address));
  }
  if (!holder.hub_instance_id.empty()) {
    parts.push_back(absl::StrCat("hub_instance_id ", holder.hub_instance_id));
  }
  const std::string who =
      holder.program.empty() ? "another process" : holder.program;
  if (parts.empty()) return absl::StrCat(who, " (details not written yet)");
  return absl::StrCat(who, " (", absl::StrJoin(parts, ", "), ")");
}

std::string ReadAll(int fd) {
  std::string text;
  char chunk[512];
  off_t offset = 0;
  while (text.size() < 64 * 1024) {
    const ssize_t n = pread(fd, chunk, sizeof(chunk), offset);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(chunk, static_cast<size_t>(n));
    offset += n;
  }
  return text;
}

absl::Status WriteAll(int fd, const std::string& text) {
  if (ftruncate(fd, 0) != 0) {
    return absl::ErrnoToStatus(errno, "cannot truncate the lock file");
  }
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = pwrite(fd, text.data() + done, text.size() - done,
                             static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::ErrnoToStatus(errno, "cannot write the lock file");
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace

std::string DatabaseLock::LockPathFor(absl::string_view db_path) {
  return absl::StrCat(db_path, ".lock");
}

DatabaseHolder DatabaseLock::ParseHolder(absl::string_view text) {
  DatabaseHolder holder;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(line, absl::MaxSplits('=', 1));
    const std::string value(absl::StripAsciiWhitespace(kv.second));
    if (kv.first == "program") holder.program = value;
    if (kv.first == "pid") holder.pid = value;
    if (kv.first == "address") holder.address = value;
    if (kv.first == "hub_instance_id") holder.hub_instance_id = value;
  }
  return holder;
}

absl::StatusOr<std::unique_ptr<DatabaseLock>> DatabaseLock::Acquire(
    absl::string_view db_path, DatabaseHolder self) {
  std::string lock_path = LockPathFor(db_path);
  // O_CLOEXEC: a child hubd runs (tmux, the claude-uds command) must not
  // inherit the descriptor, or it would keep holding the lock after hubd
  // died.
  const int fd = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int error = errno;
    return UnavailableError(
        "STORE_UNAVAILABLE",
        absl::StrCat("cannot open the lock file ", lock_path, ": ",
                     std::strerror(error)));
  }
  int rc;
  do {
    rc = flock(fd, LOCK_EX | LOCK_NB);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    const int error = errno;
    if (error != EWOULDBLOCK) {
      close(fd);
      return UnavailableError(
          "STORE_UNAVAILABLE",
          absl::StrCat("cannot lock ", lock_path, ": ", std::strerror(error)));
    }
    const DatabaseHolder holder = ParseHolder(ReadAll(fd));
    close(fd);
    absl::Status held = FailedPreconditionError(
        "DATABASE_LOCKED",
        absl::StrCat("database ", db_path, " is in use by ",
                     DescribeHolder(holder),
                     ": only one process may hold it at a time (lock file ",
                     lock_path, ")"));
    held = WithMetadata(std::move(held), "lock_file", lock_path);
    if (!holder.pid.empty()) {
      held = WithMetadata(std::move(held), "holder_pid", holder.pid);
    }
    if (!holder.hub_instance_id.empty()) {
      held = WithMetadata(std::move(held), "holder_hub_instance_id",
                          holder.hub_instance_id);
    }
    return held;
  }
  std::unique_ptr<DatabaseLock> lock(
      new DatabaseLock(std::move(lock_path), fd));
  if (absl::Status s = lock->UpdateHolder(std::move(self)); !s.ok()) return s;
  return lock;
}

DatabaseLock::~DatabaseLock() { close(fd_); }

absl::Status DatabaseLock::UpdateHolder(DatabaseHolder self) {
  self.pid = absl::StrCat(getpid());
  if (absl::Status s = WriteAll(fd_, HolderText(self)); !s.ok()) {
    return UnavailableError("STORE_UNAVAILABLE",
                            absl::StrCat(lock_path_, ": ", s.message()));
  }
  return absl::OkStatus();
}

}  // namespace hub::storage
