// A reply means committed: a child process performs acknowledged writes and
// is SIGKILLed at a random moment, many times over the same database. After
// every kill the database reopens, passes PRAGMA integrity_check, and holds
// every write the child acknowledged (messages, and the role epoch).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "storage/sqlite/sqlite_store.h"
#include "storage/test_util.h"

namespace hub::storage {
namespace {

std::string ChildPath() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  return absl::StrCat(srcdir != nullptr ? srcdir : ".", "/",
                      workspace != nullptr ? workspace : "hub",
                      "/tests/storage_crash_child");
}

struct ChildOutput {
  std::vector<std::string> message_ids;
  int64_t max_epoch = -1;
  bool ready = false;
};

// Parses complete lines from `buffer` into `out`, keeping a partial tail.
void ParseLines(std::string* buffer, ChildOutput* out) {
  size_t end;
  while ((end = buffer->find('\n')) != std::string::npos) {
    std::string line = buffer->substr(0, end);
    buffer->erase(0, end + 1);
    if (line == "ready") {
      out->ready = true;
    } else if (line.rfind("m ", 0) == 0) {
      out->message_ids.push_back(line.substr(2));
    } else if (line.rfind("r ", 0) == 0) {
      int64_t epoch = 0;
      ASSERT_TRUE(absl::SimpleAtoi(line.substr(2), &epoch)) << line;
      out->max_epoch = std::max(out->max_epoch, epoch);
    }
  }
}

// Runs the child, kills it `kill_after` after it reported ready (or after
// it started, when `during_open`: the kill may land inside open/migration),
// and returns every acknowledgement it printed before dying.
ChildOutput RunAndKill(const std::string& db, int run,
                       absl::Duration kill_after, bool during_open) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    close(fds[0]);
    close(fds[1]);
    std::string child = ChildPath();
    std::string run_id = absl::StrCat("run", run);
    execl(child.c_str(), child.c_str(), db.c_str(), run_id.c_str(), "4",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  ChildOutput out;
  std::string buffer;
  absl::Time deadline =
      during_open ? absl::Now() + kill_after : absl::InfiniteFuture();
  absl::Time give_up = absl::Now() + absl::Seconds(20);
  bool killed = false;
  while (true) {
    absl::Time now = absl::Now();
    if (!killed && (now >= deadline || now >= give_up)) {
      kill(pid, SIGKILL);
      killed = true;
    }
    pollfd p{fds[0], POLLIN, 0};
    int timeout_ms = killed ? 1000 : 5;
    if (poll(&p, 1, timeout_ms) > 0) {
      char chunk[65536];
      ssize_t n = read(fds[0], chunk, sizeof(chunk));
      if (n <= 0) break;  // EOF: the child is gone and the pipe drained
      buffer.append(chunk, static_cast<size_t>(n));
      bool was_ready = out.ready;
      ParseLines(&buffer, &out);
      if (!during_open && !was_ready && out.ready) {
        deadline = absl::Now() + kill_after;
      }
    }
  }
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(out.ready || during_open)
      << "child never became ready; status " << status;
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
      << "child was not killed by us; status " << status;
  return out;
}

TEST(StorageCrash, EveryAcknowledgedWriteSurvivesSigkillAtARandomMoment) {
  std::string db = testing::FreshDbPath();
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int> delay_ms(5, 250);
  std::set<std::string> acknowledged;
  int64_t acknowledged_epoch = -1;
  constexpr int kRuns = 50;
  for (int run = 0; run < kRuns; ++run) {
    // Every fifth run the kill may land while the child opens the store.
    bool during_open = run % 5 == 0;
    absl::Duration delay = during_open ? absl::Milliseconds(delay_ms(rng) / 8)
                                       : absl::Milliseconds(delay_ms(rng));
    ChildOutput out = RunAndKill(db, run, delay, during_open);
    acknowledged.insert(out.message_ids.begin(), out.message_ids.end());
    acknowledged_epoch = std::max(acknowledged_epoch, out.max_epoch);

    {
      testing::RawDb raw(db);
      ASSERT_EQ(raw.Query("PRAGMA integrity_check"), "ok") << "run " << run;
    }
    SqliteStoreOptions options;
    options.path = db;
    absl::StatusOr<std::unique_ptr<SqliteStore>> store =
        SqliteStore::Open(options);
    ASSERT_TRUE(store.ok()) << "run " << run << ": " << store.status();
    for (const std::string& id : acknowledged) {
      ASSERT_TRUE((*store)->messages().GetMessage(id).ok())
          << "run " << run << ": acknowledged message " << id << " lost";
    }
    if (acknowledged_epoch >= 0) {
      absl::StatusOr<RoleRecord> role = (*store)->roles().GetRole("rk2.crash");
      ASSERT_TRUE(role.ok()) << role.status();
      ASSERT_GE(role->epoch, acknowledged_epoch) << "run " << run;
    }
  }
  // The test is meaningless if the child never got a write acknowledged.
  EXPECT_GT(acknowledged.size(), 100u);
  EXPECT_GE(acknowledged_epoch, 1);
  std::cerr << kRuns << " kills, " << acknowledged.size()
            << " acknowledged messages, max acknowledged epoch "
            << acknowledged_epoch << "\n";
}

}  // namespace
}  // namespace hub::storage
