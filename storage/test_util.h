// Helpers for storage tests: a fresh database path per test and a store
// opened on it.
#ifndef HUB_STORAGE_TEST_UTIL_H_
#define HUB_STORAGE_TEST_UTIL_H_

#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "storage/sqlite/sqlite_store.h"

namespace hub::storage::testing {

// A message as the message tests write it: event from "sender" to
// "agent-a", topic.x, expiring `ttl` ms after `created`.
inline MessageRecord TestMessage(const std::string& id, int64_t priority = 5,
                                 int64_t created = 1'700'000'000'000,
                                 int64_t ttl = 300'000) {
  MessageRecord m;
  m.id = id;
  m.type = "event";
  m.from_agent = "sender";
  m.to_agent = "agent-a";
  m.topic = "topic.x";
  m.priority = priority;
  m.ttl_ms = ttl;
  m.created_at_ms = created;
  m.expires_at_ms = created + ttl;
  m.correlation_id = "corr-" + id;
  m.trace_id = "trace-" + id;
  m.payload_json = R"({"n":1})";
  return m;
}

// A path under $TEST_TMPDIR unique to the running test; any earlier file
// (and its -wal/-shm) is removed.
inline std::string FreshDbPath(const std::string& suffix = "") {
  const char* dir = std::getenv("TEST_TMPDIR");
  const ::testing::TestInfo* info =
      ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name =
      absl::StrCat(info->test_suite_name(), ".", info->name(), suffix);
  std::replace(name.begin(), name.end(), '/', '_');
  std::string path =
      absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name, ".db");
  for (const char* ext : {"", "-wal", "-shm", "-journal"}) {
    unlink(absl::StrCat(path, ext).c_str());
  }
  return path;
}

inline std::unique_ptr<SqliteStore> OpenOrDie(const std::string& path,
                                              int max_group_size = 512) {
  SqliteStoreOptions options;
  options.path = path;
  options.max_group_size = max_group_size;
  options.now_ms = [] { return int64_t{1'700'000'000'000}; };
  absl::StatusOr<std::unique_ptr<SqliteStore>> store =
      SqliteStore::Open(options);
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? std::move(*store) : nullptr;
}

// A raw SQLite connection for building fixtures and inspecting files.
class RawDb {
 public:
  explicit RawDb(const std::string& path) {
    EXPECT_EQ(sqlite3_open(path.c_str(), &db_), SQLITE_OK);
  }
  ~RawDb() { sqlite3_close(db_); }
  RawDb(const RawDb&) = delete;
  RawDb& operator=(const RawDb&) = delete;
  // Runs SQL; returns "" or the error message.
  std::string Exec(const std::string& sql) {
    char* err = nullptr;
    int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
    std::string msg = err != nullptr ? err : "";
    sqlite3_free(err);
    return rc == SQLITE_OK ? "" : (msg.empty() ? "error" : msg);
  }
  // The first column of the first row as text ("<null>", "<none>").
  std::string Query(const std::string& sql) {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr) != SQLITE_OK) {
      return absl::StrCat("<error: ", sqlite3_errmsg(db_), ">");
    }
    std::string out = "<none>";
    if (sqlite3_step(stmt) == SQLITE_ROW) {
      const unsigned char* t = sqlite3_column_text(stmt, 0);
      out = t != nullptr ? reinterpret_cast<const char*>(t) : "<null>";
    }
    sqlite3_finalize(stmt);
    return out;
  }
  // EXPLAIN QUERY PLAN's detail lines for `sql`, one per step.
  std::vector<std::string> QueryPlan(const std::string& sql) {
    std::vector<std::string> plan;
    sqlite3_stmt* stmt = nullptr;
    const std::string explain = absl::StrCat("EXPLAIN QUERY PLAN ", sql);
    if (sqlite3_prepare_v2(db_, explain.c_str(), -1, &stmt, nullptr) !=
        SQLITE_OK) {
      ADD_FAILURE() << sqlite3_errmsg(db_) << "\n" << sql;
      return {absl::StrCat("<error: ", sqlite3_errmsg(db_), ">")};
    }
    while (sqlite3_step(stmt) == SQLITE_ROW) {
      plan.emplace_back(
          reinterpret_cast<const char*>(sqlite3_column_text(stmt, 3)));
    }
    sqlite3_finalize(stmt);
    return plan;
  }
  sqlite3* raw() { return db_; }

 private:
  sqlite3* db_ = nullptr;
};

}  // namespace hub::storage::testing

#endif  // HUB_STORAGE_TEST_UTIL_H_
