// The WAL is checkpointed by its own thread: it stays bounded under a
// stream of commits, nothing committed is lost, and closing the store still
// folds the WAL into the database.
#include "storage/wal_checkpointer.h"

#include <sys/stat.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "storage/sqlite_store.h"
#include "storage/test_util.h"

namespace hub::storage {
namespace {

using testing::FreshDbPath;
using testing::RawDb;

constexpr int64_t kNow = 1'700'000'000'000;

int64_t FileSize(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? st.st_size : -1;
}

std::unique_ptr<SqliteStore> OpenWithThreshold(const std::string& path,
                                               bool background, int pages) {
  SqliteStoreOptions options;
  options.path = path;
  options.background_checkpoint = background;
  options.wal_checkpoint_pages = pages;
  options.now_ms = [] { return kNow; };
  absl::StatusOr<std::unique_ptr<SqliteStore>> store =
      SqliteStore::Open(options);
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? std::move(*store) : nullptr;
}

AgentRegistration Reg(int i) {
  AgentRegistration r;
  r.agent_id = absl::StrCat("agent-", i);
  r.cli = "claude";
  r.metadata_json = absl::StrCat(R"({"pad":")", std::string(300, 'x'), "\"}");
  r.now_ms = kNow;
  return r;
}

TEST(WalCheckpointer, TheWalStaysBoundedAndEveryCommitIsKept) {
  const std::string path = FreshDbPath();
  constexpr int kWrites = 3000;  // about 1,000 pages of WAL unchecked
  {
    auto store = OpenWithThreshold(path, /*background=*/true, /*pages=*/20);
    ASSERT_NE(store, nullptr);
    for (int i = 0; i < kWrites; ++i) {
      ASSERT_TRUE(store->RegisterAgent(Reg(i)).ok());
    }
    const WalCheckpointer::Stats stats = store->checkpoint_stats();
    EXPECT_GT(stats.requested, 0);
    EXPECT_GT(stats.checkpoints, 0) << "by_writer " << stats.by_writer;
    EXPECT_EQ(stats.failures, 0);
    // The WAL is reused once checkpointed: it holds at most the hard limit
    // (4 x 20 pages) and a commit, not every write.
    EXPECT_LT(FileSize(path + "-wal"), 200 * 4096);
    EXPECT_EQ(store->ListAgents().value().size(), size_t{kWrites});
  }
  // The last connection to close folds the rest in and removes the WAL.
  EXPECT_EQ(FileSize(path + "-wal"), -1);
  RawDb raw(path);
  EXPECT_EQ(raw.Query("SELECT COUNT(*) FROM agents"), std::to_string(kWrites));
  EXPECT_EQ(raw.Query("PRAGMA integrity_check"), "ok");
}

TEST(WalCheckpointer, WithoutItTheCommitThatFillsTheWalCheckpoints) {
  const std::string path = FreshDbPath();
  auto store = OpenWithThreshold(path, /*background=*/false, /*pages=*/20);
  ASSERT_NE(store, nullptr);
  for (int i = 0; i < 500; ++i) ASSERT_TRUE(store->RegisterAgent(Reg(i)).ok());
  EXPECT_EQ(store->checkpoint_stats().requested, 0);
  EXPECT_LT(FileSize(path + "-wal"), 200 * 4096);
}

}  // namespace
}  // namespace hub::storage
