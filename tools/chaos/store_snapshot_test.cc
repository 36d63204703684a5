#include "tools/chaos/store_snapshot.h"

#include <sqlite3.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/pg/pg_conn.h"
#include "storage/pg/pg_test_server.h"

namespace hub::chaos {
namespace {

using storage::pg::Connection;
using storage::pg::testing::PgTestServer;

// The columns of hub's schemas the readers read, in types both engines take.
constexpr char kTables[] =
    "CREATE TABLE agents (agent_id TEXT PRIMARY KEY, presence_generation "
    "BIGINT);"
    "CREATE TABLE message_inbox (message_id TEXT, agent_id TEXT, acked_at_ms "
    "BIGINT);"
    "CREATE TABLE role_registry (role_key_wire TEXT PRIMARY KEY, project_id "
    "TEXT, role_kind TEXT, scope_id TEXT, state TEXT, holder_agent_id TEXT, "
    "epoch BIGINT, version BIGINT);";
constexpr char kRows[] =
    "INSERT INTO agents VALUES ('a', 3), ('b', 9007199254740993);"
    "INSERT INTO message_inbox VALUES ('m1', 'a', 17), ('m2', 'a', NULL), "
    "('m1', 'b', NULL);"
    "INSERT INTO role_registry VALUES ('rk2.x', 'p', 'cto', '', 'active', "
    "'a', 5, 9), ('rk2.y', 'q', 'lead', 's', 'electable', NULL, 2, 4);";

// Everything a snapshot holds, one line per row, in key order.
std::string Render(const StoreSnapshot& s) {
  std::string out;
  for (const auto& [id, g] : s.generations) {
    absl::StrAppend(&out, "agent ", id, " ", g, "\n");
  }
  for (const auto& [key, acked] : s.inbox) {
    absl::StrAppend(&out, "inbox ", key.first, " ", key.second, " ",
                    acked ? "acked" : "pending", "\n");
  }
  for (const auto& [wire, r] : s.roles) {
    absl::StrAppend(&out, "role ", wire, " ", r.project_id, "/", r.role_kind,
                    "/", r.scope_id, " ", r.state, " holder=", r.holder,
                    " epoch=", r.epoch, " version=", r.version, "\n");
  }
  return out;
}

constexpr char kExpected[] =
    "agent a 3\n"
    "agent b 9007199254740993\n"
    "inbox m1 a acked\n"
    "inbox m1 b pending\n"
    "inbox m2 a pending\n"
    "role rk2.x p/cto/ active holder=a epoch=5 version=9\n"
    "role rk2.y q/lead/s electable holder= epoch=2 version=4\n";

// A new SQLite file under the test's directory, `sql` run in it.
std::string SqliteFile(const std::string& name, const std::string& sql) {
  const std::string path =
      absl::StrCat(::testing::TempDir(), "/", name, "-", getpid(), ".sqlite");
  std::remove(path.c_str());
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  return path;
}

TEST(StoreSnapshotTest, SqliteReadsEveryRow) {
  const std::string path = SqliteFile("snapshot", absl::StrCat(kTables, kRows));
  absl::StatusOr<StoreSnapshot> snapshot = ReadSqliteSnapshot(path);
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  EXPECT_EQ(Render(*snapshot), kExpected);
}

TEST(StoreSnapshotTest, PostgresReadsTheSameRowsTheSameWay) {
  absl::StatusOr<std::unique_ptr<PgTestServer>> server = PgTestServer::Create();
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_TRUE((*server)->CreateDatabase("snapshot").ok());
  absl::StatusOr<std::unique_ptr<Connection>> conn =
      Connection::Open((*server)->ConnInfo("snapshot"));
  ASSERT_TRUE(conn.ok()) << conn.status();
  ASSERT_TRUE((*conn)->Exec(absl::StrCat(kTables, kRows)).ok());
  absl::StatusOr<StoreSnapshot> snapshot = ReadPostgresSnapshot(conn->get());
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  EXPECT_EQ(Render(*snapshot), kExpected);
  // One transaction, ended: the connection can read again.
  EXPECT_EQ((*conn)->TransactionState(), Connection::Transaction::kIdle);
}

TEST(StoreSnapshotTest, AMissingTableIsAnError) {
  EXPECT_FALSE(ReadSqliteSnapshot(SqliteFile("empty", "")).ok());
}

}  // namespace
}  // namespace hub::chaos
