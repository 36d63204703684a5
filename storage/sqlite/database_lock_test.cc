// DatabaseLock: one holder per database file, the holder named when a second
// one is refused, and the lock gone with its holder (even after SIGKILL).
#include "storage/sqlite/database_lock.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "status/status.h"
#include "storage/test_util.h"

namespace hub::storage {
namespace {

DatabaseHolder Hubd(const std::string& address, const std::string& id) {
  DatabaseHolder holder;
  holder.program = "hubd";
  holder.address = address;
  holder.hub_instance_id = id;
  return holder;
}

TEST(DatabaseLockTest, ASecondHolderIsRefusedWithAMessageNamingTheFirst) {
  const std::string db = testing::FreshDbPath();
  auto first = DatabaseLock::Acquire(db, Hubd("127.0.0.1:4000", "hub-one"));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ((*first)->lock_path(), db + ".lock");

  auto second = DatabaseLock::Acquire(db, Hubd("127.0.0.1:4001", "hub-two"));
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ReasonOf(second.status()), "DATABASE_LOCKED");
  const std::string message(second.status().message());
  EXPECT_NE(message.find(db), std::string::npos) << message;
  EXPECT_NE(message.find(absl::StrCat("pid ", getpid())), std::string::npos)
      << message;
  EXPECT_NE(message.find("address 127.0.0.1:4000"), std::string::npos)
      << message;
  EXPECT_NE(message.find("hub_instance_id hub-one"), std::string::npos)
      << message;
  EXPECT_EQ(MetadataOf(second.status())["holder_hub_instance_id"], "hub-one");
}

TEST(DatabaseLockTest, UpdatedHolderDetailsAreWhatTheNextRefusalNames) {
  const std::string db = testing::FreshDbPath();
  auto lock = DatabaseLock::Acquire(db, Hubd("127.0.0.1:0", "hub-one"));
  ASSERT_TRUE(lock.ok()) << lock.status();
  ASSERT_TRUE((*lock)->UpdateHolder(Hubd("127.0.0.1:4242", "hub-one")).ok());
  auto refused = DatabaseLock::Acquire(db, Hubd("", ""));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("address 127.0.0.1:4242"),
            std::string::npos)
      << refused.status();
  EXPECT_EQ(refused.status().message().find("127.0.0.1:0,"), std::string::npos)
      << refused.status();
}

TEST(DatabaseLockTest, TheLockIsFreeOnceItsHolderIsDestroyed) {
  const std::string db = testing::FreshDbPath();
  {
    auto lock = DatabaseLock::Acquire(db, Hubd("a", "one"));
    ASSERT_TRUE(lock.ok()) << lock.status();
  }
  auto again = DatabaseLock::Acquire(db, Hubd("b", "two"));
  EXPECT_TRUE(again.ok()) << again.status();
}

TEST(DatabaseLockTest, DifferentDatabasesInOneDirectoryDoNotShareALock) {
  const std::string a = testing::FreshDbPath("-a");
  const std::string b = testing::FreshDbPath("-b");
  auto lock_a = DatabaseLock::Acquire(a, Hubd("", "a"));
  auto lock_b = DatabaseLock::Acquire(b, Hubd("", "b"));
  EXPECT_TRUE(lock_a.ok()) << lock_a.status();
  EXPECT_TRUE(lock_b.ok()) << lock_b.status();
}

TEST(DatabaseLockTest, AHolderKilledWithSigkillLeavesNoStaleLock) {
  const std::string db = testing::FreshDbPath();
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto lock = DatabaseLock::Acquire(db, Hubd("child", "hub-child"));
    const char byte = lock.ok() ? 'y' : 'n';
    (void)!write(ready[1], &byte, 1);
    pause();  // until SIGKILL
    _exit(0);
  }
  close(ready[1]);
  char byte = 0;
  ASSERT_EQ(read(ready[0], &byte, 1), 1);
  close(ready[0]);
  ASSERT_EQ(byte, 'y');

  auto refused = DatabaseLock::Acquire(db, Hubd("parent", "hub-parent"));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find(absl::StrCat("pid ", child)),
            std::string::npos)
      << refused.status();

  kill(child, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  auto taken = DatabaseLock::Acquire(db, Hubd("parent", "hub-parent"));
  EXPECT_TRUE(taken.ok()) << taken.status();
}

TEST(DatabaseLockTest, ParseHolderReadsTheRecordedFieldsAndIgnoresOthers) {
  const DatabaseHolder holder = DatabaseLock::ParseHolder(
      "program=hubd\npid=7\naddress=[::1]:1\nfuture=x\nhub_instance_id=id\n");
  EXPECT_EQ(holder.program, "hubd");
  EXPECT_EQ(holder.pid, "7");
  EXPECT_EQ(holder.address, "[::1]:1");
  EXPECT_EQ(holder.hub_instance_id, "id");
  EXPECT_EQ(DatabaseLock::ParseHolder("").pid, "");
}

}  // namespace
}  // namespace hub::storage
