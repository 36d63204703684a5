// Bad conditions: a read-only file or directory, a full disk, a database
// held by another process. Each is a clear status (UNAVAILABLE with
// STORE_READ_ONLY / STORE_BUSY, RESOURCE_EXHAUSTED with STORE_FULL), never a
// crash, never a corrupt file.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "status/status.h"
#include "storage/sqlite/sqlite_store.h"
#include "storage/test_util.h"

namespace hub::storage {
namespace {

using testing::FreshDbPath;
using testing::OpenOrDie;
using testing::RawDb;

constexpr uid_t kNobody = 65534;

MessageRecord Msg(const std::string& id, size_t payload_bytes = 10) {
  MessageRecord m;
  m.id = id;
  m.type = "event";
  m.from_agent = "a";
  m.to_agent = "b";
  m.topic = "t";
  m.expires_at_ms = 1'000'000;
  m.correlation_id = "c";
  m.trace_id = "t";
  m.payload_json = absl::StrCat("\"", std::string(payload_bytes, 'x'), "\"");
  return m;
}

// Opens `path` as an unprivileged user in a child process (root ignores file
// modes) and returns the reason of the failure, "OK", or "SKIP: ...".
std::string OpenAsNobody(const std::string& path) {
  int fds[2];
  if (pipe(fds) != 0) return "SKIP: pipe";
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    std::string result;
    if (setgid(kNobody) != 0 || setuid(kNobody) != 0) {
      result = "SKIP: cannot drop privileges";
    } else {
      SqliteStoreOptions options;
      options.path = path;
      absl::StatusOr<std::unique_ptr<SqliteStore>> store =
          SqliteStore::Open(options);
      result =
          store.ok()
              ? "OK"
              : absl::StrCat(ReasonOf(store.status()), " ",
                             absl::StatusCodeToString(store.status().code()));
    }
    (void)!write(fds[1], result.data(), result.size());
    _exit(0);
  }
  close(fds[1]);
  std::string out;
  char buf[256];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof(buf))) > 0) out.append(buf, n);
  close(fds[0]);
  waitpid(pid, nullptr, 0);
  return out;
}

// A directory under /tmp that the unprivileged user can traverse
// ($TEST_TMPDIR lives under /root, which it cannot); removed afterwards.
class PublicDir {
 public:
  PublicDir() {
    char tmpl[] = "/tmp/hub_storage_XXXXXX";
    char* dir = mkdtemp(tmpl);
    EXPECT_NE(dir, nullptr);
    path_ = dir != nullptr ? dir : "/tmp";
    chmod(path_.c_str(), 0755);
  }
  ~PublicDir() {
    chmod(path_.c_str(), 0755);
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(BadConditions, ReadOnlyDatabaseFileIsUnavailableReadOnly) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to switch users";
  PublicDir public_dir;
  const std::string& dir = public_dir.path();
  std::string path = dir + "/hub.db";
  { auto store = OpenOrDie(path); }
  chmod(path.c_str(), 0644);  // owned by root: read-only for nobody
  std::string before = RawDb(path).Query("PRAGMA integrity_check");
  std::string result = OpenAsNobody(path);
  if (result.rfind("SKIP", 0) == 0) GTEST_SKIP() << result;
  EXPECT_EQ(result, "STORE_READ_ONLY UNAVAILABLE");
  EXPECT_EQ(RawDb(path).Query("PRAGMA integrity_check"), "ok");
}

TEST(BadConditions, ReadOnlyDirectoryIsUnavailableReadOnly) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to switch users";
  PublicDir public_dir;
  const std::string& dir = public_dir.path();
  chmod(dir.c_str(), 0555);
  std::string result = OpenAsNobody(dir + "/hub.db");
  if (result.rfind("SKIP", 0) == 0) GTEST_SKIP() << result;
  EXPECT_EQ(result, "STORE_READ_ONLY UNAVAILABLE");
}

TEST(BadConditions, WritableFileInReadOnlyDirectoryIsRefusedCleanly) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to switch users";
  PublicDir public_dir;
  const std::string& dir = public_dir.path();
  std::string path = dir + "/hub.db";
  { auto store = OpenOrDie(path); }
  chmod(path.c_str(), 0666);
  chmod(dir.c_str(), 0555);  // the -wal and -shm files cannot be created
  std::string result = OpenAsNobody(path);
  if (result.rfind("SKIP", 0) == 0) GTEST_SKIP() << result;
  EXPECT_EQ(result, "STORE_READ_ONLY UNAVAILABLE");
  EXPECT_EQ(RawDb(path).Query("PRAGMA integrity_check"), "ok");
}

TEST(BadConditions, MissingDirectoryIsUnavailableAndNamed) {
  std::string path = FreshDbPath() + ".d/no/such/dir/hub.db";
  SqliteStoreOptions options;
  options.path = path;
  absl::StatusOr<std::unique_ptr<SqliteStore>> store =
      SqliteStore::Open(options);
  EXPECT_EQ(ReasonOf(store.status()), "STORE_UNAVAILABLE");
  EXPECT_NE(store.status().message().find("does not exist"), std::string::npos)
      << store.status();
}

TEST(BadConditions, FullDiskIsResourceExhaustedAndKeepsEarlierWrites) {
  std::string path = FreshDbPath();
  { auto store = OpenOrDie(path); }
  int64_t pages = std::stoll(RawDb(path).Query("PRAGMA page_count"));
  SqliteStoreOptions options;
  options.path = path;
  options.max_page_count = pages + 8;
  auto store = SqliteStore::Open(options);
  ASSERT_TRUE(store.ok()) << store.status();
  int written = 0;
  absl::Status full;
  for (int i = 0; i < 1000 && full.ok(); ++i) {
    full = (*store)->messages().InsertMessage(
        Msg("m" + std::to_string(i), 2000), {"b"});
    if (full.ok()) ++written;
  }
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(ReasonOf(full), "STORE_FULL");
  EXPECT_GT(written, 0);
  // Earlier writes are intact, the failed one left nothing, reads work.
  for (int i = 0; i < written; ++i) {
    EXPECT_TRUE((*store)->messages().GetMessage("m" + std::to_string(i)).ok());
  }
  EXPECT_FALSE(
      (*store)->messages().GetMessage("m" + std::to_string(written)).ok());
  // Small writes that fit still succeed after the failure.
  AgentRegistration r;
  r.agent_id = "small";
  r.cli = "other";
  absl::StatusOr<AgentRecord> agent = (*store)->agents().RegisterAgent(r);
  EXPECT_TRUE(agent.ok() || ReasonOf(agent.status()) == "STORE_FULL");
  store->reset();
  EXPECT_EQ(RawDb(path).Query("PRAGMA integrity_check"), "ok");
}

// A child process that takes the write lock when told and holds it until
// killed. Forked before the parent opens any store (no threads yet).
class LockHolder {
 public:
  explicit LockHolder(const std::string& path) {
    EXPECT_EQ(pipe(to_child_), 0);
    EXPECT_EQ(pipe(from_child_), 0);
    pid_ = fork();
    if (pid_ == 0) {
      char c;
      if (read(to_child_[0], &c, 1) != 1) _exit(1);
      sqlite3* db = nullptr;
      sqlite3_open(path.c_str(), &db);
      int rc = sqlite3_exec(db,
                            "BEGIN EXCLUSIVE; "
                            "INSERT INTO _meta VALUES ('lock', 'held');",
                            nullptr, nullptr, nullptr);
      c = rc == SQLITE_OK ? 'L' : 'E';
      (void)!write(from_child_[1], &c, 1);
      while (true) pause();
    }
  }
  // Returns true once the child holds the lock.
  bool Lock() {
    char c = 'g';
    if (write(to_child_[1], &c, 1) != 1) return false;
    return read(from_child_[0], &c, 1) == 1 && c == 'L';
  }
  ~LockHolder() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    for (int fd :
         {to_child_[0], to_child_[1], from_child_[0], from_child_[1]}) {
      close(fd);
    }
  }

 private:
  pid_t pid_ = -1;
  int to_child_[2];
  int from_child_[2];
};

TEST(BadConditions, DatabaseHeldByAnotherProcessIsUnavailableBusy) {
  std::string path = FreshDbPath();
  { auto store = OpenOrDie(path); }
  auto holder = std::make_unique<LockHolder>(path);
  SqliteStoreOptions options;
  options.path = path;
  options.busy_timeout_ms = 100;
  auto store = SqliteStore::Open(options);
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE((*store)->messages().InsertMessage(Msg("before"), {"b"}).ok());
  ASSERT_TRUE(holder->Lock());

  absl::Status busy = (*store)->messages().InsertMessage(Msg("during"), {"b"});
  EXPECT_EQ(busy.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(ReasonOf(busy), "STORE_BUSY");
  // Readers are not blocked by a writer in WAL mode.
  EXPECT_TRUE((*store)->messages().GetMessage("before").ok());
  // Opening a second store (which must migrate) is refused the same way.
  absl::StatusOr<std::unique_ptr<SqliteStore>> second =
      SqliteStore::Open(options);
  EXPECT_EQ(ReasonOf(second.status()), "STORE_BUSY");

  holder.reset();  // the process dies; its lock goes with it
  EXPECT_TRUE((*store)->messages().InsertMessage(Msg("after"), {"b"}).ok());
  EXPECT_FALSE((*store)->messages().GetMessage("during").ok());
  store->reset();
  EXPECT_EQ(RawDb(path).Query("PRAGMA integrity_check"), "ok");
  EXPECT_EQ(RawDb(path).Query("SELECT count(*) FROM _meta WHERE key='lock'"),
            "0");
}

}  // namespace
}  // namespace hub::storage
