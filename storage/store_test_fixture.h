// The store test suite's fixture: every test of a suite derived from
// StoreTest runs once per engine (SQLite, PostgreSQL) through the Store
// interface, so both stores are held to one contract. PostgreSQL runs on a
// throw-away server the test binary starts itself (storage/pg/
// pg_test_server.h), with a fresh database per test; SQLite on a fresh file.
// Test only; binaries that use it need tags = ["no-sandbox"] (the server
// runs as `nobody` under root).
#ifndef HUB_STORAGE_STORE_TEST_FIXTURE_H_
#define HUB_STORAGE_STORE_TEST_FIXTURE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "storage/store.h"

namespace hub::storage::testing {

enum class Engine { kSqlite, kPostgres };

struct StoreTestOptions {
  int max_group_size = 512;
  // Default: a fixed 1'700'000'000'000.
  std::function<int64_t()> now_ms;
  // Default: UUIDv7.
  std::function<std::string()> new_id;
};

class StoreTest : public ::testing::TestWithParam<Engine> {
 protected:
  static void TearDownTestSuite();
  void SetUp() override;
  void TearDown() override;

  bool postgres() const { return GetParam() == Engine::kPostgres; }
  // This test's store, opened on first use with `options_`.
  Store& store();
  // Closes store() (every write committed) and opens it again on the same
  // database.
  void Reopen();
  // Closes store() for good (before raw changes to its database, say).
  void Close();
  // A new, separate store over this test's database (null, with a failure,
  // when it cannot open): another hub, for PostgreSQL.
  std::unique_ptr<Store> Open(const StoreTestOptions& options);
  std::unique_ptr<Store> Open() { return Open(options_); }

  // Raw SQL on this test's database, for fixtures and checks, bypassing the
  // store. Query: the first column of the first row as text ("<none>" when
  // there is no row, "<null>", "<error: ...>"). Exec: "" or the error.
  std::string Query(const std::string& sql);
  std::string Exec(const std::string& sql);
  // PostgreSQL: this test's database as a libpq connection string.
  const std::string& pg_conninfo() const { return pg_conninfo_; }

  StoreTestOptions options_;

 private:
  std::string sqlite_path_;  // SQLite: this test's file
  std::string pg_conninfo_;  // PostgreSQL: this test's database
  std::unique_ptr<Store> store_;
};

// Role fixtures the role suites share: the first reservation of a cto and
// of a lead role of project prj_1 (wires "rk2.cto-key", "rk2.lead-key") at
// 1'700'000'000'000, and a compare-and-set guarded by all four fences of
// `row`, a millisecond later.
RoleReservation CtoReservation();
RoleReservation LeadReservation();
RoleCas CasFrom(const RoleRecord& row);
// The close of lead scope `scope` of prj_1 (wire `wire`) by "ops", 50 ms
// after those reservations.
ScopeClose ScopeClosing(const std::string& wire = "rk2.lead-key",
                        const std::string& scope = "scp_1");

// Runs a StoreTest suite on both engines: HUB_STORE_TEST_SUITE(RoleStore).
std::string EngineName(const ::testing::TestParamInfo<Engine>& info);
#define HUB_STORE_TEST_SUITE(suite)                                  \
  INSTANTIATE_TEST_SUITE_P(                                          \
      Engines, suite,                                                \
      ::testing::Values(::hub::storage::testing::Engine::kSqlite,    \
                        ::hub::storage::testing::Engine::kPostgres), \
      ::hub::storage::testing::EngineName)

}  // namespace hub::storage::testing

#endif  // HUB_STORAGE_STORE_TEST_FIXTURE_H_
