// A libpq connection with the few operations the PostgreSQL store needs:
// simple statements, prepared statements, and pipelines that send many
// prepared statements in one round trip (libpq's pipeline mode), each
// answered with a Result or a reason-coded status.
//
// Not thread-safe: one owner at a time (the store's writer, or one reader).
// Failures carry the store's reasons: a lost or refused connection is
// UNAVAILABLE / STORE_UNAVAILABLE, a constraint violation FAILED_PRECONDITION
// / STORE_CONSTRAINT, a serialization failure or deadlock ABORTED /
// STORE_BUSY, anything else INTERNAL / STORE_INTERNAL; metadata sqlstate
// names PostgreSQL's code. See docs/design/postgres.md.
#ifndef HUB_STORAGE_PG_PG_CONN_H_
#define HUB_STORAGE_PG_PG_CONN_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

struct pg_conn;
struct pg_result;

namespace hub::storage::pg {

// One statement's rows (or its changed-row count). Movable, owns the
// PGresult.
class Result {
 public:
  Result() = default;
  explicit Result(pg_result* result);
  Result(Result&&) noexcept;
  Result& operator=(Result&&) noexcept;
  ~Result();

  int rows() const;
  int columns() const;
  bool IsNull(int row, int column) const;
  // The value as text (PostgreSQL's text format); "" for NULL.
  absl::string_view Text(int row, int column) const;
  // The value as an integer; nullopt for NULL or text that is no integer.
  std::optional<int64_t> Int(int row, int column) const;
  // Rows the statement changed (INSERT, UPDATE, DELETE); 0 for others.
  int64_t changed() const;

 private:
  pg_result* result_ = nullptr;
};

// A NOTIFY received on a connection that LISTENs.
struct Notification {
  std::string channel;
  std::string payload;
  int sender_pid = 0;  // the notifying server process
};

// A statement parameter in text format; nullopt is SQL NULL.
using Param = std::optional<std::string>;

// A prepared statement and its parameters, for Pipeline().
struct Pipelined {
  std::string statement;  // a name given to Prepare()
  std::vector<Param> params;
};

// A statement by its text and its parameters, for Prefetch().
struct Statement {
  std::string sql;
  std::vector<Param> params;
};

class Connection {
 public:
  // Connects with a libpq connection string or URI (several hosts and
  // target_session_attrs=read-write work as libpq documents).
  // `application` is the name the server shows for the connection
  // (pg_stat_activity.application_name) unless `conninfo` gives one: which
  // of a hub's connections is which. UNAVAILABLE / STORE_UNAVAILABLE when
  // the server cannot be reached.
  static absl::StatusOr<std::unique_ptr<Connection>> Open(
      const std::string& conninfo, const std::string& application = "");
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Runs `sql` (one or more statements, no parameters) with the simple
  // query protocol; the last statement's result.
  absl::StatusOr<Result> Exec(absl::string_view sql);
  // Runs one statement with parameters ($1, $2, ...).
  absl::StatusOr<Result> Query(absl::string_view sql,
                               const std::vector<Param>& params);
  // Prepares `sql` under `name` on this connection (once; a reconnect
  // forgets it: Prepared() tells).
  absl::Status Prepare(const std::string& name, absl::string_view sql);
  bool Prepared(const std::string& name) const;
  absl::StatusOr<Result> ExecPrepared(const std::string& name,
                                      const std::vector<Param>& params);
  // Runs `sql` with parameters as a statement prepared on this connection
  // the first time this text is run (parsed and planned once, like SQLite's
  // statement cache); the store's statements are all run this way.
  absl::StatusOr<Result> Run(absl::string_view sql,
                             const std::vector<Param>& params = {});
  // Sets a session parameter (set_config(name, value, false)) now, and again
  // after every Reconnect() before it reports success, so that a setting
  // the caller relies on (the writer's synchronous_commit) never lapses to
  // the server's default across a reconnect, e.g. to a promoted standby.
  absl::Status SetSessionParameter(const std::string& name,
                                   const std::string& value);
  // Reconnects with the same parameters (libpq's reset: with several
  // hosts, the first that qualifies, tried in order again) after the
  // connection broke; prepared statements are forgotten (Run() prepares
  // them again), session parameters set again. Until one succeeds,
  // Healthy() is false. UNAVAILABLE / STORE_UNAVAILABLE when no server can
  // be reached, or not by `deadline` (a server that does not answer, rather
  // than refuses, costs at most that).
  absl::Status Reconnect(absl::Time deadline = absl::InfiniteFuture());

  // What became of a COMMIT.
  struct CommitAnswer {
    absl::Status status;  // OK: committed
    // With an error: true when the answer was lost (the connection broke,
    // or the backend was terminated, once COMMIT may have reached the
    // server), so the transaction may have committed or not; false when
    // the server refused COMMIT with an ERROR (a deferred constraint, a
    // serialization failure) and rolled the transaction back, or COMMIT
    // could not have been sent.
    bool outcome_unknown = false;
  };
  // Commits the open transaction. `after_send`, when set, runs after
  // COMMIT was sent and before its answer is read (tests lose the answer
  // there). A transaction begun with BeginWith() that sent nothing yet
  // commits as nothing: no COMMIT is sent, and OK is returned.
  CommitAnswer Commit(const std::function<void()>& after_send = nullptr);
  // Begins a transaction without a round trip of its own: `begin` (BEGIN,
  // then statements of the new transaction, all prepared) goes out ahead
  // of the next statement this connection sends, in the same pipeline
  // (Run, ExecPrepared and Pipeline; Exec, Query and StartCopyIn send it
  // alone first). Until then TransactionState() is kOpen and the server has
  // seen nothing. When one of `begin`'s statements fails, whatever it
  // started is rolled back (the connection is idle again) and every
  // statement that went with it answers with that failure. Rows `begin`
  // changes are not counted in total_changed(). Reconnect() drops it.
  void BeginWith(std::vector<Pipelined> begin);
  // Drops what BeginWith() queued, if it was not sent yet (true then): the
  // transaction never reached the server, so there is nothing to roll back.
  bool DropUnsentBegin();
  // Sends `statements` (prepared by text, as Run() does) in one pipeline,
  // after BeginWith()'s statements if still unsent, and keeps their answers
  // in order: RunFirst() of the next kept statement returns its answer
  // without a round trip. Meant for statements of one transaction that do
  // not depend on each other's answers. Answers are counted in
  // total_changed() when taken. Commit(), DropPrefetched() and Reconnect()
  // drop those not taken; Commit() with some still kept commits nothing
  // and fails (a statement ran that nobody read). When one of them cannot
  // be prepared, nothing is sent or kept (RunFirst then runs each).
  void Prefetch(const std::vector<const Statement*>& statements);
  // Run(statement.sql, statement.params), or, when Prefetch() kept
  // answers, the next one, which must be this very object's (the kept ones
  // are known by address, so they must outlive their taking): if it is
  // not, INTERNAL / STORE_INTERNAL, and the transaction reads as failed
  // until it is rolled back.
  absl::StatusOr<Result> RunFirst(const Statement& statement);
  void DropPrefetched();
  // Sends every statement, then one Sync, and reads every answer: one
  // network round trip for the lot. One answer per statement, in order.
  // Without an explicit BEGIN the statements up to the Sync form one
  // implicit transaction (PostgreSQL's extended protocol): the first failure
  // rolls back the earlier ones too, and the rest answer ABORTED /
  // STORE_PIPELINE_ABORTED. A failed explicit transaction begun by the
  // pipeline itself (BEGIN sent first) is rolled back before this returns,
  // so the connection is idle; one that was open before the call is left
  // to the caller (failed: it must roll back, or back to a savepoint).
  std::vector<absl::StatusOr<Result>> Pipeline(
      const std::vector<Pipelined>& statements);

  // COPY ... FROM STDIN in three steps: StartCopyIn runs the COPY
  // statement `sql`, PutCopyData sends rows in the format it names (any
  // chunking; libpq buffers), EndCopyIn ends the data and returns the
  // COPY's result (changed() = rows copied) or the server's error: one bad
  // row fails the whole COPY. `abort_reason` ends it with that error
  // instead (nothing is copied). REQUIRES: nothing else is sent on this
  // connection between StartCopyIn and EndCopyIn.
  absl::Status StartCopyIn(absl::string_view sql);
  absl::Status PutCopyData(absl::string_view data);
  absl::StatusOr<Result> EndCopyIn(
      const std::optional<std::string>& abort_reason = std::nullopt);

  // LISTEN's side: the socket to wait on with poll() (-1 when there is
  // none), reading whatever the server sent without blocking (UNAVAILABLE /
  // STORE_UNAVAILABLE when the connection is lost), and the notifications
  // read so far, oldest first. Run() and Exec() read notifications too.
  int Socket() const;
  absl::Status ConsumeInput();
  // Between statements: reads and parses what the server sent meanwhile,
  // without blocking, so that a connection the server ended (its FATAL
  // goodbye, then the end of the stream) is no longer Healthy(). Two reads:
  // the goodbye, then the end.
  void ReadWhileIdle();
  std::vector<Notification> TakeNotifications();

  // Whether the connection is still up (PQstatus), with its session
  // parameters set, to a server that accepts writes: one that reported
  // in_hot_standby or default_transaction_read_only on (a standby; an old
  // primary an operator made read-only to fence it for a switchover, which
  // stops seeing writes once the standby is promoted) is not healthy any
  // more, so that the writer reconnects (through the host list again) and
  // readers leave it.
  bool Healthy() const;
  // Where the connection is as to transactions (PQtransactionStatus).
  enum class Transaction { kIdle, kOpen, kFailed, kUnknown };
  Transaction TransactionState() const;
  // Rows changed by every statement this connection ran so far: whether
  // an operation wrote anything. A write's changed() count; for a SELECT
  // whose text writes (a data-modifying WITH), the rows it returned, which
  // such statements return per row written; 0 for a plain read.
  int64_t total_changed() const { return total_changed_; }
  // The server's process id for this connection (pg_terminate_backend).
  int BackendPid() const;
  // Where this connection went, without its password:
  // postgresql://USER@HOST:PORT/DATABASE (HOST may be a socket directory).
  std::string Describe() const;

 private:
  explicit Connection(pg_conn* conn) : conn_(conn) {}
  absl::Status ConnectionError(absl::string_view what) const;
  // Counts a successful result's changed rows (see total_changed()).
  absl::StatusOr<Result> Counted(absl::StatusOr<Result> result,
                                 bool text_writes);

  pg_conn* conn_;
  // SetSessionParameter()'s settings, in order, for Reconnect().
  // Sends BeginWith()'s statements, if still queued, in a pipeline of
  // their own.
  absl::Status SendUnsentBegin();
  // Pipeline() with `lead` (BeginWith()'s statements) sent first: answers
  // for `statements` only, each of them the lead's failure if it failed
  // (also told in `lead_status`, when not null).
  std::vector<absl::StatusOr<Result>> SendPipeline(
      const std::vector<Pipelined>& lead,
      const std::vector<Pipelined>& statements, absl::Status* lead_status);

  std::vector<std::pair<std::string, std::string>> session_;
  // BeginWith()'s statements, not sent yet.
  std::vector<Pipelined> unsent_begin_;
  // Prefetch()'s statements and their answers, not taken yet, in order.
  struct Kept {
    const Statement* statement;  // the caller's, known by address
    absl::StatusOr<Result> answer;
  };
  std::deque<Kept> prefetched_;
  // RunFirst() met another statement than the next kept one.
  bool prefetch_broken_ = false;
  // A reconnect that could not set session_ again, or the server ended the
  // session (an error it sent while no statement ran): not to be used.
  bool session_lost_ = false;
  int64_t total_changed_ = 0;
  std::vector<std::string> prepared_;
  // Prepared statements whose text writes (see total_changed()).
  absl::flat_hash_set<std::string> writing_;
  // Run()'s statements: their text -> the name they were prepared under.
  absl::flat_hash_map<std::string, std::string> by_text_;
};

// `conninfo` (a key=value string or a URI) as key=value pairs without its
// password, for logs and StoreInfo; INVALID_ARGUMENT /
// DATABASE_URL_INVALID when libpq cannot parse it.
absl::StatusOr<std::string> RedactedConnInfo(const std::string& conninfo);

// libpq's message for a `conninfo` it could not parse (PQconninfoParse's
// error), with every password `conninfo` appears to carry (a URI's
// user:password@, a password=... parameter) replaced by "***": libpq quotes
// the string it refused, password included.
std::string ConnInfoParseError(const std::string& conninfo,
                               const char* libpq_error);

// `name` as an SQL identifier in double quotes (LISTEN "a channel").
std::string QuotedIdentifier(absl::string_view name);

// The status for a failed PGresult (its SQLSTATE decides the reason).
absl::Status ResultError(const pg_result* result, absl::string_view what);

}  // namespace hub::storage::pg

#endif  // HUB_STORAGE_PG_PG_CONN_H_
