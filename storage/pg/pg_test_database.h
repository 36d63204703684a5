// The gtest fixture the PostgreSQL tests share: one PgTestServer for the
// test suite and a fresh database per test, named after it, to connect to.
// Test only.
#ifndef HUB_STORAGE_PG_PG_TEST_DATABASE_H_
#define HUB_STORAGE_PG_PG_TEST_DATABASE_H_

#include <cctype>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "storage/pg/pg_conn.h"
#include "storage/pg/pg_test_server.h"

namespace hub::storage::pg::testing {

class PgDatabaseTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::unique_ptr<PgTestServer>> created =
        PgTestServer::Create();
    ASSERT_TRUE(created.ok()) << created.status();
    server_ = created->release();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }

  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    database_ = absl::StrCat(
        "t_", ::testing::UnitTest::GetInstance()->current_test_info()->name());
    for (char& c : database_) c = static_cast<char>(std::tolower(c));
    ASSERT_TRUE(server_->CreateDatabase(database_).ok());
  }

  // A new connection to this test's database (null, with a failure, when
  // it cannot connect).
  std::unique_ptr<Connection> Connect() {
    absl::StatusOr<std::unique_ptr<Connection>> c =
        Connection::Open(server_->ConnInfo(database_));
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? std::move(*c) : nullptr;
  }

  static inline PgTestServer* server_ = nullptr;
  std::string database_;
};

}  // namespace hub::storage::pg::testing

#endif  // HUB_STORAGE_PG_PG_TEST_DATABASE_H_
