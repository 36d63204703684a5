#include "storage/store_test_fixture.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "storage/pg/pg_conn.h"
#include "storage/pg/pg_store.h"
#include "storage/pg/pg_test_server.h"
#include "storage/sqlite/sqlite_store.h"
#include "storage/test_util.h"

namespace hub::storage::testing {
namespace {

// One PostgreSQL server per test binary, started by the first PostgreSQL
// test and stopped after the last suite.
pg::testing::PgTestServer* pg_server = nullptr;

int64_t FixedNow() { return int64_t{1'700'000'000'000}; }

}  // namespace

RoleReservation CtoReservation() {
  RoleReservation r;
  r.role_key_wire = "rk2.cto-key";
  r.project_id = "prj_1";
  r.role_kind = "cto";
  r.scope_id = "";
  r.now_ms = FixedNow();
  return r;
}

RoleReservation LeadReservation() {
  RoleReservation r = CtoReservation();
  r.role_key_wire = "rk2.lead-key";
  r.role_kind = "lead";
  r.scope_id = "scp_1";
  return r;
}

RoleCas CasFrom(const RoleRecord& row) {
  RoleCas cas;
  cas.role_key_wire = row.role_key_wire;
  cas.expected_version = row.version;
  cas.expected_epoch = row.epoch;
  cas.expected_activation_seq = std::optional<int64_t>(row.activation_seq);
  cas.expected_activation_id = row.activation_id;
  cas.now_ms = FixedNow() + 1;
  return cas;
}

ScopeClose ScopeClosing(const std::string& wire, const std::string& scope) {
  ScopeClose c;
  c.project_id = "prj_1";
  c.scope_id = scope;
  c.role_key_wire = wire;
  c.closed_by = "ops";
  c.reason = "scope finished";
  c.now_ms = FixedNow() + 50;
  return c;
}

std::string EngineName(const ::testing::TestParamInfo<Engine>& info) {
  return info.param == Engine::kSqlite ? "Sqlite" : "Postgres";
}

void StoreTest::TearDownTestSuite() {
  delete pg_server;
  pg_server = nullptr;
}

void StoreTest::SetUp() {
  if (!postgres()) {
    sqlite_path_ = FreshDbPath();
    return;
  }
  if (pg_server == nullptr) {
    absl::StatusOr<std::unique_ptr<pg::testing::PgTestServer>> created =
        pg::testing::PgTestServer::Create();
    ASSERT_TRUE(created.ok()) << created.status();
    pg_server = created->release();
  }
  static std::atomic<int> databases{0};
  const std::string name = absl::StrCat("store_test_", ++databases);
  ASSERT_TRUE(pg_server->CreateDatabase(name).ok());
  pg_conninfo_ = pg_server->ConnInfo(name);
}

void StoreTest::TearDown() { store_.reset(); }

Store& StoreTest::store() {
  if (store_ == nullptr) store_ = Open(options_);
  if (store_ == nullptr) {
    ADD_FAILURE() << "the store did not open";
    std::abort();  // nothing sensible to return
  }
  return *store_;
}

void StoreTest::Reopen() {
  store_.reset();
  store_ = Open(options_);
}

void StoreTest::Close() { store_.reset(); }

std::unique_ptr<Store> StoreTest::Open(const StoreTestOptions& options) {
  if (!postgres()) {
    SqliteStoreOptions o;
    o.path = sqlite_path_;
    o.max_group_size = options.max_group_size;
    o.now_ms = options.now_ms ? options.now_ms : FixedNow;
    if (options.new_id) o.new_id = options.new_id;
    absl::StatusOr<std::unique_ptr<SqliteStore>> s = SqliteStore::Open(o);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::move(*s) : nullptr;
  }
  pg::PostgresStoreOptions o;
  o.conninfo = pg_conninfo_;
  o.max_group_size = options.max_group_size;
  o.now_ms = options.now_ms ? options.now_ms : FixedNow;
  if (options.new_id) o.new_id = options.new_id;
  absl::StatusOr<std::unique_ptr<pg::PostgresStore>> s =
      pg::PostgresStore::Open(o);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(*s) : nullptr;
}

std::string StoreTest::Query(const std::string& sql) {
  if (!postgres()) return RawDb(sqlite_path_).Query(sql);
  absl::StatusOr<std::unique_ptr<pg::Connection>> conn =
      pg::Connection::Open(pg_conninfo_);
  if (!conn.ok()) return absl::StrCat("<error: ", conn.status().message(), ">");
  absl::StatusOr<pg::Result> r = (*conn)->Exec(sql);
  if (!r.ok()) return absl::StrCat("<error: ", r.status().message(), ">");
  if (r->rows() == 0 || r->columns() == 0) return "<none>";
  if (r->IsNull(0, 0)) return "<null>";
  return std::string(r->Text(0, 0));
}

std::string StoreTest::Exec(const std::string& sql) {
  if (!postgres()) return RawDb(sqlite_path_).Exec(sql);
  absl::StatusOr<std::unique_ptr<pg::Connection>> conn =
      pg::Connection::Open(pg_conninfo_);
  if (!conn.ok()) return std::string(conn.status().message());
  absl::StatusOr<pg::Result> r = (*conn)->Exec(sql);
  return r.ok() ? "" : std::string(r.status().message());
}

}  // namespace hub::storage::testing
