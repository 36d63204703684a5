// The libpq wrapper against a real PostgreSQL 15 that the test starts
// itself (PgTestServer): statements, parameters and NULLs, pipelines of
// prepared statements in one round trip and how a failure inside one
// aborts the rest, transactions sent as a pipeline or begun with their
// first statement, a COMMIT refused or lost, and the reasons of a server
// that is missing, terminated or restarted.
#include "storage/pg/pg_conn.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "status/status.h"
#include "storage/pg/pg_test_database.h"

namespace hub::storage::pg {
namespace {

class PgConnTest : public testing::PgDatabaseTest {
 protected:
  void SetUp() override {
    PgDatabaseTest::SetUp();
    if (HasFatalFailure()) return;
    conn_ = Connect();
    ASSERT_NE(conn_, nullptr);
    ASSERT_TRUE(conn_
                    ->Exec("CREATE TABLE items (id BIGSERIAL PRIMARY KEY, "
                           "name TEXT NOT NULL UNIQUE, note TEXT)")
                    .ok());
    ASSERT_TRUE(conn_
                    ->Prepare("insert_item",
                              "INSERT INTO items (name, note) VALUES ($1, $2) "
                              "RETURNING id")
                    .ok());
  }

  int64_t Count() {
    absl::StatusOr<Result> r = Connect()->Exec("SELECT count(*) FROM items");
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->Int(0, 0).value_or(-1) : -1;
  }

  std::unique_ptr<Connection> conn_;
};

TEST_F(PgConnTest, AMissingServerIsUnavailable) {
  absl::StatusOr<std::unique_ptr<Connection>> c =
      Connection::Open("host=/nonexistent-hub-socket-dir port=5432 user=hub");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(ReasonOf(c.status()), "STORE_UNAVAILABLE");
}

// pg_stat_activity tells a hub's connections apart by the name each gives;
// a name the operator's conninfo gives wins, and a URI reads as before.
TEST_F(PgConnTest, AConnectionNamesItselfToTheServerUnlessTheConnInfoDoes) {
  auto named = [](const std::string& conninfo, const std::string& name) {
    absl::StatusOr<std::unique_ptr<Connection>> c =
        Connection::Open(conninfo, name);
    if (!c.ok()) return c.status().ToString();
    absl::StatusOr<Result> r = (*c)->Exec(
        "SELECT current_database() || ' ' || application_name "
        "FROM pg_stat_activity WHERE pid = pg_backend_pid()");
    return r.ok() ? std::string(r->Text(0, 0)) : r.status().ToString();
  };
  const std::string conninfo = server_->ConnInfo(database_);
  EXPECT_EQ(named(conninfo, "hubd writer"), database_ + " hubd writer");
  EXPECT_EQ(named(conninfo + " application_name=ops", "hubd writer"),
            database_ + " ops");
  EXPECT_EQ(named(absl::StrCat("postgresql://hub@/", database_,
                               "?host=", server_->directory()),
                  "hubd reader"),
            database_ + " hubd reader");
  EXPECT_EQ(named(conninfo, ""), database_ + " ");
}

TEST_F(PgConnTest, ParametersNullsAndChangedRowsReadBack) {
  absl::StatusOr<Result> inserted =
      conn_->ExecPrepared("insert_item", {std::string("a"), std::nullopt});
  ASSERT_TRUE(inserted.ok()) << inserted.status();
  ASSERT_EQ(inserted->rows(), 1);
  const std::optional<int64_t> id = inserted->Int(0, 0);
  ASSERT_TRUE(id.has_value());
  absl::StatusOr<Result> row = conn_->Query(
      "SELECT name, note FROM items WHERE id = $1", {absl::StrCat(*id)});
  ASSERT_TRUE(row.ok()) << row.status();
  EXPECT_EQ(row->Text(0, 0), "a");
  EXPECT_TRUE(row->IsNull(0, 1));
  EXPECT_FALSE(row->Int(0, 1).has_value());
  absl::StatusOr<Result> updated =
      conn_->Query("UPDATE items SET note = $1 WHERE name = $2",
                   {std::string("é, ünïcode"), std::string("a")});
  ASSERT_TRUE(updated.ok()) << updated.status();
  EXPECT_EQ(updated->changed(), 1);
  absl::StatusOr<Result> none = conn_->Query(
      "UPDATE items SET note = 'x' WHERE name = $1", {std::string("zz")});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->changed(), 0);
}

TEST_F(PgConnTest, APipelineIsAnsweredInOrderInOneRoundTrip) {
  std::vector<Pipelined> batch;
  for (int i = 0; i < 100; ++i) {
    batch.push_back({"insert_item", {absl::StrCat("item-", i), std::nullopt}});
  }
  std::vector<absl::StatusOr<Result>> answers = conn_->Pipeline(batch);
  ASSERT_EQ(answers.size(), 100u);
  int64_t previous = 0;
  for (const absl::StatusOr<Result>& a : answers) {
    ASSERT_TRUE(a.ok()) << a.status();
    const int64_t id = a->Int(0, 0).value_or(0);
    EXPECT_GT(id, previous);  // in the order sent
    previous = id;
  }
  EXPECT_EQ(Count(), 100);
  // The connection is usable as before once the pipeline is done.
  EXPECT_TRUE(conn_->Exec("SELECT 1").ok());
}

TEST_F(PgConnTest, AFailureAbortsTheRestOfItsPipeline) {
  std::vector<absl::StatusOr<Result>> answers = conn_->Pipeline({
      {"insert_item", {std::string("x"), std::nullopt}},
      {"insert_item", {std::string("x"), std::nullopt}},  // duplicate name
      {"insert_item", {std::string("y"), std::nullopt}},
  });
  ASSERT_EQ(answers.size(), 3u);
  EXPECT_TRUE(answers[0].ok());
  EXPECT_EQ(answers[1].status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ReasonOf(answers[1].status()), "STORE_CONSTRAINT");
  EXPECT_EQ(MetadataOf(answers[1].status()).at("sqlstate"), "23505");
  EXPECT_EQ(ReasonOf(answers[2].status()), "STORE_PIPELINE_ABORTED");
  // The statements up to the Sync were one implicit transaction: the first
  // insert is rolled back with the failure, the last never ran.
  EXPECT_EQ(Count(), 0);
  EXPECT_TRUE(conn_->ExecPrepared("insert_item", {std::string("y"), {}}).ok());
}

TEST_F(PgConnTest, ATransactionSentAsOnePipelineCommitsAllOrNothing) {
  ASSERT_TRUE(conn_->Prepare("begin", "BEGIN").ok());
  ASSERT_TRUE(conn_->Prepare("commit", "COMMIT").ok());
  std::vector<absl::StatusOr<Result>> good = conn_->Pipeline({
      {"begin", {}},
      {"insert_item", {std::string("p"), std::nullopt}},
      {"insert_item", {std::string("q"), std::nullopt}},
      {"commit", {}},
  });
  for (const absl::StatusOr<Result>& a : good)
    EXPECT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(Count(), 2);

  std::vector<absl::StatusOr<Result>> bad = conn_->Pipeline({
      {"begin", {}},
      {"insert_item", {std::string("r"), std::nullopt}},
      {"insert_item", {std::string("p"), std::nullopt}},  // duplicate
      {"commit", {}},
  });
  EXPECT_FALSE(bad[2].ok());
  EXPECT_EQ(ReasonOf(bad[3].status()), "STORE_PIPELINE_ABORTED");
  EXPECT_EQ(Count(), 2);  // "r" rolled back with the failed transaction
  // which Pipeline() ended: the connection is idle, not in a failed block.
  EXPECT_TRUE(conn_->Exec("SELECT 1").ok());
}

TEST_F(PgConnTest, ATerminatedBackendIsUnavailableAndANewConnectionWorks) {
  std::unique_ptr<Connection> admin = Connect();
  ASSERT_TRUE(admin
                  ->Query("SELECT pg_terminate_backend($1)",
                          {absl::StrCat(conn_->BackendPid())})
                  .ok());
  absl::StatusOr<Result> after = conn_->Exec("SELECT 1");
  ASSERT_FALSE(after.ok());
  EXPECT_EQ(after.status().code(), absl::StatusCode::kUnavailable)
      << after.status();
  EXPECT_EQ(ReasonOf(after.status()), "STORE_UNAVAILABLE");
  EXPECT_FALSE(conn_->Healthy());
  std::vector<absl::StatusOr<Result>> piped =
      conn_->Pipeline({{"insert_item", {std::string("z"), std::nullopt}}});
  ASSERT_EQ(piped.size(), 1u);
  EXPECT_EQ(piped[0].status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(Connect()->Exec("SELECT 1").ok());
}

// The writer's synchronous_commit must not lapse to the server's default
// when it reconnects (after a restart, or to a promoted standby).
TEST_F(PgConnTest, SessionParametersAreSetAgainOnReconnect) {
  ASSERT_TRUE(conn_->SetSessionParameter("synchronous_commit", "on").ok());
  ASSERT_TRUE(conn_->SetSessionParameter("synchronous_commit", "local").ok());
  ASSERT_TRUE(conn_->SetSessionParameter("application_name", "hub-test").ok());
  auto shown = [this](const char* name) {
    absl::StatusOr<Result> r = conn_->Exec(absl::StrCat("SHOW ", name));
    return r.ok() ? std::string(r->Text(0, 0)) : r.status().ToString();
  };
  EXPECT_EQ(shown("synchronous_commit"), "local");
  ASSERT_TRUE(Connect()
                  ->Query("SELECT pg_terminate_backend($1)",
                          {absl::StrCat(conn_->BackendPid())})
                  .ok());
  EXPECT_FALSE(conn_->Exec("SELECT 1").ok());
  ASSERT_TRUE(conn_->Reconnect().ok());
  EXPECT_TRUE(conn_->Healthy());
  EXPECT_EQ(shown("synchronous_commit"), "local");  // the server's is off
  EXPECT_EQ(shown("application_name"), "hub-test");
  // A parameter the server refuses is not kept.
  EXPECT_FALSE(conn_->SetSessionParameter("no_such_parameter", "1").ok());
  ASSERT_TRUE(conn_->Reconnect().ok());
  EXPECT_EQ(shown("synchronous_commit"), "local");
}

// A server that stops accepting writes by default (a standby; a primary
// fenced with default_transaction_read_only for a switchover) reports it,
// and its connections stop counting as healthy until they reconnect.
TEST_F(PgConnTest, AConnectionToAReadOnlyServerIsNotHealthy) {
  EXPECT_TRUE(conn_->Healthy());
  ASSERT_TRUE(conn_->Exec("SET default_transaction_read_only = on").ok());
  EXPECT_FALSE(conn_->Healthy());
  absl::StatusOr<Result> refused =
      conn_->ExecPrepared("insert_item", {std::string("ro"), {}});
  EXPECT_EQ(ReasonOf(refused.status()), "STORE_UNAVAILABLE")
      << refused.status();
  ASSERT_TRUE(conn_->Reconnect().ok());
  EXPECT_TRUE(conn_->Healthy());
  EXPECT_TRUE(conn_->Run("INSERT INTO items (name) VALUES ('rw')").ok());
}

TEST_F(PgConnTest, ACommitTellsARefusalFromALostAnswer) {
  // Refused: a deferred constraint fails at COMMIT; the session stays.
  ASSERT_TRUE(conn_
                  ->Exec("CREATE TABLE d (k TEXT UNIQUE DEFERRABLE "
                         "INITIALLY DEFERRED)")
                  .ok());
  ASSERT_TRUE(conn_->Exec("BEGIN; INSERT INTO d VALUES ('x'), ('x')").ok());
  Connection::CommitAnswer refused = conn_->Commit();
  EXPECT_EQ(ReasonOf(refused.status), "STORE_CONSTRAINT") << refused.status;
  EXPECT_FALSE(refused.outcome_unknown);
  EXPECT_TRUE(conn_->Healthy());

  ASSERT_TRUE(conn_->Exec("BEGIN; INSERT INTO d VALUES ('y')").ok());
  Connection::CommitAnswer committed = conn_->Commit();
  EXPECT_TRUE(committed.status.ok()) << committed.status;

  // Lost: the backend is terminated while the transaction is open, and
  // COMMIT reads its farewell.
  ASSERT_TRUE(conn_->Exec("BEGIN; INSERT INTO d VALUES ('z')").ok());
  std::unique_ptr<Connection> admin = Connect();
  const std::string pid = absl::StrCat(conn_->BackendPid());
  ASSERT_TRUE(admin->Query("SELECT pg_terminate_backend($1)", {pid}).ok());
  auto gone = [&] {
    absl::StatusOr<Result> r =
        admin->Query("SELECT 1 FROM pg_stat_activity WHERE pid = $1", {pid});
    return r.ok() && r->rows() == 0;
  };
  while (!gone()) {
  }  // the backend has sent its FATAL and exited
  Connection::CommitAnswer lost = conn_->Commit();
  EXPECT_EQ(lost.status.code(), absl::StatusCode::kUnavailable) << lost.status;
  EXPECT_TRUE(lost.outcome_unknown);

  // A connection libpq knows is broken sends nothing: no COMMIT, so no
  // doubt.
  ASSERT_FALSE(conn_->Healthy());
  Connection::CommitAnswer unsent = conn_->Commit();
  EXPECT_EQ(ReasonOf(unsent.status), "STORE_UNAVAILABLE") << unsent.status;
  EXPECT_FALSE(unsent.outcome_unknown);

  ASSERT_TRUE(conn_->Reconnect(absl::Now() + absl::Seconds(30)).ok());
  EXPECT_EQ(conn_->Exec("SELECT string_agg(k, ',') FROM d")->Text(0, 0), "y");
}

TEST_F(PgConnTest, ARestartedServerServesWhatWasCommitted) {
  ASSERT_TRUE(
      conn_->ExecPrepared("insert_item", {std::string("kept"), {}}).ok());
  ASSERT_TRUE(server_->Stop("fast").ok());
  EXPECT_EQ(conn_->Exec("SELECT 1").status().code(),
            absl::StatusCode::kUnavailable);
  ASSERT_TRUE(server_->Start().ok());
  EXPECT_EQ(Count(), 1);
}

TEST_F(PgConnTest, ReadsChangeNothingAndDataModifyingSelectsCountTheirRows) {
  std::unique_ptr<Connection> conn = Connect();
  ASSERT_TRUE(conn->Exec("CREATE TABLE c (k INT PRIMARY KEY, v INT)").ok());
  ASSERT_TRUE(conn->Exec("INSERT INTO c VALUES (1, 0), (2, 0)").ok());
  const int64_t before = conn->total_changed();
  ASSERT_TRUE(conn->Run("SELECT k FROM c").ok());
  ASSERT_TRUE(conn->Run("SELECT k FROM c WHERE k = $1 FOR UPDATE", {"1"}).ok());
  EXPECT_EQ(conn->total_changed(), before);  // reads, a row lock
  ASSERT_TRUE(conn->Run("WITH u AS (UPDATE c SET v = 1 RETURNING k) "
                        "SELECT k FROM u")
                  .ok());
  EXPECT_EQ(conn->total_changed(), before + 2);
  ASSERT_TRUE(conn->Run("UPDATE c SET v = 2 WHERE k = 1").ok());
  EXPECT_EQ(conn->total_changed(), before + 3);
}

// What the server says this connection's backend is doing.
std::string BackendState(Connection& watcher, Connection& conn) {
  absl::StatusOr<Result> r =
      watcher.Query("SELECT state FROM pg_stat_activity WHERE pid = $1",
                    {absl::StrCat(conn.BackendPid())});
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() && r->rows() == 1 ? std::string(r->Text(0, 0)) : "";
}

TEST_F(PgConnTest, ABegunTransactionReachesTheServerWithItsFirstStatement) {
  std::unique_ptr<Connection> watcher = Connect();
  ASSERT_TRUE(conn_->Prepare("begin", "BEGIN").ok());
  const int64_t changed = conn_->total_changed();
  conn_->BeginWith({{"begin", {}}, {"insert_item", {std::string("lead"), {}}}});
  EXPECT_EQ(conn_->TransactionState(), Connection::Transaction::kOpen);
  EXPECT_EQ(BackendState(*watcher, *conn_), "idle");  // nothing sent yet
  absl::StatusOr<Result> first =
      conn_->Run("SELECT count(*) FROM items WHERE name = $1", {"lead"});
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->Int(0, 0), 1);  // the lead's insert ran before it
  EXPECT_EQ(BackendState(*watcher, *conn_), "idle in transaction");
  EXPECT_EQ(Count(), 0);                       // not committed yet
  EXPECT_EQ(conn_->total_changed(), changed);  // the lead's row not counted
  ASSERT_TRUE(conn_->Commit().status.ok());
  EXPECT_EQ(Count(), 1);
}

TEST_F(PgConnTest, ABegunTransactionThatSentNothingCommitsAsNothing) {
  std::unique_ptr<Connection> watcher = Connect();
  ASSERT_TRUE(conn_->Prepare("begin", "BEGIN").ok());
  conn_->BeginWith({{"begin", {}}, {"insert_item", {std::string("n"), {}}}});
  Connection::CommitAnswer answer = conn_->Commit();
  EXPECT_TRUE(answer.status.ok()) << answer.status;
  EXPECT_EQ(conn_->TransactionState(), Connection::Transaction::kIdle);
  EXPECT_EQ(Count(), 0);  // the lead never went out
  conn_->BeginWith({{"begin", {}}, {"insert_item", {std::string("m"), {}}}});
  EXPECT_TRUE(conn_->DropUnsentBegin());
  EXPECT_FALSE(conn_->DropUnsentBegin());
  EXPECT_TRUE(conn_->Exec("SELECT 1").ok());
  EXPECT_EQ(conn_->TransactionState(), Connection::Transaction::kIdle);
  EXPECT_EQ(BackendState(*watcher, *conn_), "idle");
  EXPECT_EQ(Count(), 0);
}

TEST_F(PgConnTest, AFailedBeginIsTheAnswerOfTheStatementItWentWith) {
  ASSERT_TRUE(
      conn_->ExecPrepared("insert_item", {std::string("dup"), {}}).ok());
  ASSERT_TRUE(conn_->Prepare("begin", "BEGIN").ok());
  // Through Run (one statement) and through Exec (sent alone first).
  for (bool simple : {false, true}) {
    SCOPED_TRACE(simple ? "Exec" : "Run");
    conn_->BeginWith(
        {{"begin", {}}, {"insert_item", {std::string("dup"), {}}}});
    absl::StatusOr<Result> r =
        simple ? conn_->Exec("INSERT INTO items (name) VALUES ('after')")
               : conn_->Run("INSERT INTO items (name) VALUES ($1)", {"after"});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(ReasonOf(r.status()), "STORE_CONSTRAINT") << r.status();
    // Rolled back: nothing of it stayed, the connection is idle and usable.
    EXPECT_EQ(conn_->TransactionState(), Connection::Transaction::kIdle);
    EXPECT_EQ(Count(), 1);
    EXPECT_TRUE(conn_->Exec("SELECT 1").ok());
  }
}

TEST_F(PgConnTest, AStatementFailingAfterAGoodBeginLeavesItsTransactionFailed) {
  ASSERT_TRUE(
      conn_->ExecPrepared("insert_item", {std::string("dup"), {}}).ok());
  ASSERT_TRUE(conn_->Prepare("begin", "BEGIN").ok());
  conn_->BeginWith({{"begin", {}}, {"insert_item", {std::string("new"), {}}}});
  std::vector<absl::StatusOr<Result>> answers =
      conn_->Pipeline({{"insert_item", {std::string("dup"), {}}},
                       {"insert_item", {std::string("other"), {}}}});
  ASSERT_EQ(answers.size(), 2u);
  EXPECT_EQ(ReasonOf(answers[0].status()), "STORE_CONSTRAINT");
  EXPECT_EQ(ReasonOf(answers[1].status()), "STORE_PIPELINE_ABORTED");
  // The transaction is the caller's, as one it had begun itself.
  EXPECT_EQ(conn_->TransactionState(), Connection::Transaction::kFailed);
  ASSERT_TRUE(conn_->Exec("ROLLBACK").ok());
  EXPECT_EQ(Count(), 1);
}

TEST_F(PgConnTest, PrefetchedStatementsRunAheadAndAnswerInOrderWhenTaken) {
  ASSERT_TRUE(conn_->Prepare("begin", "BEGIN").ok());
  const std::string insert =
      "INSERT INTO items (name) VALUES ($1) RETURNING id";
  const Statement a{insert, {std::string("a")}};
  const Statement b{insert, {std::string("b")}};
  const Statement dup{insert, {std::string("a")}};
  conn_->BeginWith({{"begin", {}}});
  conn_->Prefetch({&a, &b});
  // Both ran already, in this transaction, before anyone took an answer.
  absl::StatusOr<Result> seen = conn_->Run("SELECT count(*) FROM items");
  ASSERT_TRUE(seen.ok()) << seen.status();
  EXPECT_EQ(seen->Int(0, 0), 2);
  const int64_t changed = conn_->total_changed();
  absl::StatusOr<Result> first = conn_->RunFirst(a);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(conn_->total_changed(), changed + 1);  // counted when taken
  absl::StatusOr<Result> second = conn_->RunFirst(b);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_GT(second->Int(0, 0), first->Int(0, 0));
  // With nothing kept, RunFirst is Run.
  absl::StatusOr<Result> again = conn_->RunFirst(dup);
  EXPECT_EQ(ReasonOf(again.status()), "STORE_CONSTRAINT") << again.status();
  ASSERT_TRUE(conn_->Exec("ROLLBACK").ok());
  EXPECT_EQ(Count(), 0);
}

TEST_F(PgConnTest, APrefetchedAnswerTakenOutOfOrderOrNotAtAllCommitsNothing) {
  ASSERT_TRUE(conn_->Prepare("begin", "BEGIN").ok());
  const std::string insert = "INSERT INTO items (name) VALUES ($1)";
  const Statement a{insert, {std::string("a")}};
  const Statement b{insert, {std::string("b")}};
  // Out of order: refused, and the transaction reads as failed.
  conn_->BeginWith({{"begin", {}}});
  conn_->Prefetch({&a, &b});
  absl::StatusOr<Result> wrong = conn_->RunFirst(b);
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(ReasonOf(wrong.status()), "STORE_INTERNAL");
  EXPECT_EQ(conn_->TransactionState(), Connection::Transaction::kFailed);
  EXPECT_FALSE(conn_->Commit().status.ok());
  if (conn_->TransactionState() != Connection::Transaction::kIdle) {
    ASSERT_TRUE(conn_->Exec("ROLLBACK").ok());
  }
  EXPECT_EQ(Count(), 0);
  // Not taken at all: COMMIT is not sent.
  conn_->BeginWith({{"begin", {}}});
  conn_->Prefetch({&a, &b});
  ASSERT_TRUE(conn_->RunFirst(a).ok());
  Connection::CommitAnswer answer = conn_->Commit();
  EXPECT_FALSE(answer.status.ok());
  EXPECT_FALSE(answer.outcome_unknown);
  ASSERT_TRUE(conn_->Exec("ROLLBACK").ok());
  EXPECT_EQ(Count(), 0);
}

// libpq quotes the string it could not parse; hubd prints the error (and
// hubctl db copy reports it), so the password must not travel with it.
TEST(ConnInfoParseError, TheRefusedStringLosesItsPassword) {
  for (const std::string conninfo :
       {"postgresql://hub:pw-secret@[::1/hub",
        "postgres://hub:pw%2Fsecret@[::1/hub",
        "postgresql://hub@[::1/hub?password=pw-secret"}) {
    absl::StatusOr<std::string> named = RedactedConnInfo(conninfo);
    ASSERT_FALSE(named.ok()) << conninfo;
    EXPECT_EQ(ReasonOf(named.status()), "DATABASE_URL_INVALID");
    EXPECT_EQ(named.status().message().find("secret"), std::string::npos)
        << named.status();
    EXPECT_NE(named.status().message().find("***"), std::string::npos)
        << named.status();
  }
  EXPECT_EQ(ConnInfoParseError("host=x password='a b' dbname",
                               "missing \"=\" after \"dbname\"; 'a b'\n"),
            "missing \"=\" after \"dbname\"; '***'");
}

}  // namespace
}  // namespace hub::storage::pg
