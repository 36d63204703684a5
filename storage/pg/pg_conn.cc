#include "storage/pg/pg_conn.h"

#include <poll.h>
#include <postgresql/libpq-fe.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "status/status.h"

namespace hub::storage::pg {
namespace {

// libpq's messages end with a newline.
std::string Trimmed(const char* message) {
  return std::string(
      absl::StripTrailingAsciiWhitespace(message != nullptr ? message : ""));
}

// Parameter pointers for libpq: nullptr is NULL.
std::vector<const char*> Values(const std::vector<Param>& params) {
  std::vector<const char*> values;
  values.reserve(params.size());
  for (const Param& p : params) {
    values.push_back(p.has_value() ? p->c_str() : nullptr);
  }
  return values;
}

// Whether `sql` may change rows: it names INSERT, UPDATE, DELETE or MERGE
// other than as a row lock (FOR UPDATE, FOR NO KEY UPDATE). Errs towards
// yes: a read taken for a write costs a savepoint replay, never a lost undo.
bool TextWrites(absl::string_view sql) {
  std::string text = absl::AsciiStrToUpper(sql);
  for (const char* lock : {"FOR NO KEY UPDATE", "FOR UPDATE"}) {
    for (size_t at = text.find(lock); at != std::string::npos;
         at = text.find(lock, at)) {
      text.replace(at, std::string(lock).size(), " ");
    }
  }
  auto word_at = [&text](size_t at, size_t length) {
    auto boundary = [](char c) { return !absl::ascii_isalnum(c) && c != '_'; };
    return (at == 0 || boundary(text[at - 1])) &&
           (at + length == text.size() || boundary(text[at + length]));
  };
  for (const std::string verb : {"INSERT", "UPDATE", "DELETE", "MERGE"}) {
    for (size_t at = text.find(verb); at != std::string::npos;
         at = text.find(verb, at + 1)) {
      if (word_at(at, verb.size())) return true;
    }
  }
  return false;
}

constexpr char kSetConfig[] = "SELECT set_config($1, $2, false)";

absl::Status PipelineAborted() {
  return ReasonError(absl::StatusCode::kAborted, "STORE_PIPELINE_ABORTED",
                     "an earlier statement of the pipeline failed");
}

}  // namespace

Result::Result(pg_result* result) : result_(result) {}
Result::Result(Result&& other) noexcept
    : result_(std::exchange(other.result_, nullptr)) {}
Result& Result::operator=(Result&& other) noexcept {
  if (this != &other) {
    if (result_ != nullptr) PQclear(result_);
    result_ = std::exchange(other.result_, nullptr);
  }
  return *this;
}
Result::~Result() {
  if (result_ != nullptr) PQclear(result_);
}

int Result::rows() const { return result_ ? PQntuples(result_) : 0; }
int Result::columns() const { return result_ ? PQnfields(result_) : 0; }
bool Result::IsNull(int row, int column) const {
  return result_ == nullptr || PQgetisnull(result_, row, column) == 1;
}
absl::string_view Result::Text(int row, int column) const {
  if (IsNull(row, column)) return "";
  return absl::string_view(PQgetvalue(result_, row, column),
                           PQgetlength(result_, row, column));
}
std::optional<int64_t> Result::Int(int row, int column) const {
  if (IsNull(row, column)) return std::nullopt;
  int64_t value = 0;
  if (!absl::SimpleAtoi(Text(row, column), &value)) return std::nullopt;
  return value;
}
int64_t Result::changed() const {
  if (result_ == nullptr) return 0;
  // PQcmdTuples counts a SELECT's rows too: only writes change rows.
  const absl::string_view command = PQcmdStatus(result_);
  if (!absl::StartsWith(command, "INSERT") &&
      !absl::StartsWith(command, "UPDATE") &&
      !absl::StartsWith(command, "DELETE") &&
      !absl::StartsWith(command, "MERGE") &&
      !absl::StartsWith(command, "COPY")) {
    return 0;
  }
  int64_t n = 0;
  return absl::SimpleAtoi(PQcmdTuples(result_), &n) ? n : 0;
}

absl::Status ResultError(const pg_result* result, absl::string_view what) {
  const char* state = PQresultErrorField(result, PG_DIAG_SQLSTATE);
  const std::string sqlstate = state != nullptr ? state : "";
  const std::string message =
      absl::StrCat(what, ": ", Trimmed(PQresultErrorMessage(result)));
  absl::Status s;
  if (absl::StartsWith(sqlstate, "08") || sqlstate == "57P01" ||
      sqlstate == "57P02" || sqlstate == "57P03" || sqlstate == "25006") {
    // Connection exceptions, an administrator's shutdown or termination of
    // this backend, a server starting up, a read-only transaction (a
    // standby): the store is unavailable, not broken.
    s = UnavailableError("STORE_UNAVAILABLE", message);
  } else if (absl::StartsWith(sqlstate, "23")) {
    s = ReasonError(absl::StatusCode::kFailedPrecondition, "STORE_CONSTRAINT",
                    message);
  } else if (sqlstate == "40001" || sqlstate == "40P01" ||
             sqlstate == "55P03") {
    s = ReasonError(absl::StatusCode::kAborted, "STORE_BUSY", message);
  } else if (sqlstate == "53100") {
    s = ReasonError(absl::StatusCode::kResourceExhausted, "STORE_FULL",
                    message);
  } else if (sqlstate.empty() && PQresultStatus(result) == PGRES_FATAL_ERROR) {
    // libpq's own failure (the connection broke mid-statement).
    s = UnavailableError("STORE_UNAVAILABLE", message);
  } else {
    s = ReasonError(absl::StatusCode::kInternal, "STORE_INTERNAL", message);
  }
  return sqlstate.empty() ? s
                          : WithMetadata(std::move(s), "sqlstate", sqlstate);
}

std::string ConnInfoParseError(const std::string& conninfo,
                               const char* libpq_error) {
  std::vector<std::string> secrets;
  const absl::string_view info(conninfo);
  // A URI's userinfo: user:password@host (up to the authority's end, or the
  // last '@' at all when the password holds a '/' or '?').
  for (absl::string_view scheme : {"postgresql://", "postgres://"}) {
    if (!absl::StartsWith(info, scheme)) continue;
    const absl::string_view rest = info.substr(scheme.size());
    size_t at = rest.rfind('@', rest.find_first_of("/?"));
    if (at == absl::string_view::npos) at = rest.rfind('@');
    if (at == absl::string_view::npos) break;
    const size_t colon = rest.substr(0, at).find(':');
    if (colon != absl::string_view::npos) {
      secrets.emplace_back(rest.substr(colon + 1, at - colon - 1));
    }
    break;
  }
  // password=... as a key=value pair or a URI parameter, quoted or not.
  for (size_t k = info.find("password"); k != absl::string_view::npos;
       k = info.find("password", k + 1)) {
    size_t i = k + 8;
    while (i < info.size() && info[i] == ' ') ++i;
    if (i >= info.size() || info[i] != '=') continue;
    ++i;
    while (i < info.size() && info[i] == ' ') ++i;
    size_t end = i;
    if (i < info.size() && info[i] == '\'') {
      end = ++i;
      while (end < info.size() && info[end] != '\'')
        end += info[end] == '\\' ? 2 : 1;
    } else {
      while (end < info.size() && info[end] != ' ' && info[end] != '&') ++end;
    }
    secrets.emplace_back(info.substr(i, std::min(end, info.size()) - i));
  }
  std::string message = Trimmed(libpq_error != nullptr ? libpq_error : "");
  for (const std::string& secret : secrets) {
    if (secret.empty()) continue;
    for (size_t at = message.find(secret); at != std::string::npos;
         at = message.find(secret, at + 3)) {
      message.replace(at, secret.size(), "***");
    }
  }
  return message;
}

absl::StatusOr<std::string> RedactedConnInfo(const std::string& conninfo) {
  char* error = nullptr;
  PQconninfoOption* options = PQconninfoParse(conninfo.c_str(), &error);
  if (options == nullptr) {
    absl::Status s = InvalidArgumentError(
        "DATABASE_URL_INVALID",
        absl::StrCat("not a PostgreSQL connection string: ",
                     error != nullptr ? ConnInfoParseError(conninfo, error)
                                      : std::string("out of memory")));
    PQfreemem(error);
    return s;
  }
  std::string out;
  for (PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
    if (o->val == nullptr || o->val[0] == '\0') continue;
    if (std::string_view(o->keyword) == "password") continue;
    if (!out.empty()) out += ' ';
    absl::StrAppend(&out, o->keyword, "=", o->val);
  }
  PQconninfoFree(options);
  return out;
}

absl::StatusOr<std::unique_ptr<Connection>> Connection::Open(
    const std::string& conninfo, const std::string& application) {
  // `dbname` expanded: the whole conninfo (key=value words or a URI), as
  // PQconnectdb would read it, and one more keyword beside it.
  const char* const keywords[] = {"dbname", "fallback_application_name",
                                  nullptr};
  const char* const values[] = {conninfo.c_str(), application.c_str(), nullptr};
  PGconn* conn = PQconnectdbParams(keywords, values, /*expand_dbname=*/1);
  if (conn == nullptr) {
    return UnavailableError("STORE_UNAVAILABLE",
                            "cannot allocate a PostgreSQL connection");
  }
  std::unique_ptr<Connection> c(new Connection(conn));
  if (PQstatus(conn) != CONNECTION_OK) {
    return c->ConnectionError("cannot connect to PostgreSQL");
  }
  // libpq prints the server's notices (NOTICE: relation ... already exists,
  // WARNING: terminating connection ...) on stderr by default, outside
  // hubd's structured log; what matters reaches the caller as a status. An
  // error the server sends while no statement runs (FATAL: terminating
  // connection due to administrator command, before it closes the
  // connection) comes this way too: the session is over.
  PQsetNoticeReceiver(
      conn,
      [](void* arg, const PGresult* notice) {
        const char* severity =
            PQresultErrorField(notice, PG_DIAG_SEVERITY_NONLOCALIZED);
        if (severity != nullptr && (absl::string_view(severity) == "FATAL" ||
                                    absl::string_view(severity) == "PANIC")) {
          static_cast<Connection*>(arg)->session_lost_ = true;
        }
      },
      c.get());
  return c;
}

Connection::~Connection() { PQfinish(conn_); }

absl::Status Connection::ConnectionError(absl::string_view what) const {
  return UnavailableError(
      "STORE_UNAVAILABLE",
      absl::StrCat(what, ": ", Trimmed(PQerrorMessage(conn_))));
}

bool Connection::Healthy() const {
  if (PQstatus(conn_) != CONNECTION_OK || session_lost_) return false;
  // PostgreSQL (14 and newer) reports both whenever they change, with the
  // answer to the next statement.
  for (const char* read_only :
       {"in_hot_standby", "default_transaction_read_only"}) {
    const char* value = PQparameterStatus(conn_, read_only);
    if (value != nullptr && absl::string_view(value) == "on") return false;
  }
  return true;
}

Connection::Transaction Connection::TransactionState() const {
  if (prefetch_broken_) return Transaction::kFailed;
  if (!unsent_begin_.empty()) return Transaction::kOpen;
  switch (PQtransactionStatus(conn_)) {
    case PQTRANS_IDLE:
      return Transaction::kIdle;
    case PQTRANS_INTRANS:
    case PQTRANS_ACTIVE:
      return Transaction::kOpen;
    case PQTRANS_INERROR:
      return Transaction::kFailed;
    default:
      return Transaction::kUnknown;
  }
}

absl::StatusOr<Result> Connection::Counted(absl::StatusOr<Result> result,
                                           bool text_writes) {
  if (!result.ok()) return result;
  const int64_t changed = result->changed();
  if (changed > 0) {
    total_changed_ += changed;
  } else if (text_writes) {
    total_changed_ += result->rows();  // WITH ... UPDATE ... SELECT
  }
  return result;
}
int Connection::BackendPid() const { return PQbackendPID(conn_); }

int Connection::Socket() const { return PQsocket(conn_); }

absl::Status Connection::ConsumeInput() {
  if (PQconsumeInput(conn_) == 0 || !Healthy()) {
    return ConnectionError("lost the PostgreSQL connection");
  }
  return absl::OkStatus();
}

void Connection::ReadWhileIdle() {
  for (int i = 0; i < 2; ++i) {
    if (PQconsumeInput(conn_) == 0) return;  // lost: PQstatus says so
    PQisBusy(conn_);  // parses it: an error now reaches the notice receiver
  }
}

std::vector<Notification> Connection::TakeNotifications() {
  std::vector<Notification> out;
  while (PGnotify* n = PQnotifies(conn_)) {
    out.push_back(Notification{n->relname != nullptr ? n->relname : "",
                               n->extra != nullptr ? n->extra : "", n->be_pid});
    PQfreemem(n);
  }
  return out;
}

std::string QuotedIdentifier(absl::string_view name) {
  std::string out = "\"";
  for (char c : name) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

std::string Connection::Describe() const {
  auto value = [](const char* v) { return v != nullptr ? v : ""; };
  return absl::StrCat("postgresql://", value(PQuser(conn_)), "@",
                      value(PQhost(conn_)), ":", value(PQport(conn_)), "/",
                      value(PQdb(conn_)));
}

namespace {

// A result that is not an error, as a Result; otherwise its status.
absl::StatusOr<Result> Take(PGresult* raw, absl::string_view what,
                            pg_conn* conn) {
  if (raw == nullptr) {
    return UnavailableError(
        "STORE_UNAVAILABLE",
        absl::StrCat(what, ": ", Trimmed(PQerrorMessage(conn))));
  }
  Result result(raw);
  switch (PQresultStatus(raw)) {
    case PGRES_COMMAND_OK:
    case PGRES_TUPLES_OK:
    case PGRES_EMPTY_QUERY:
      return result;
    case PGRES_PIPELINE_ABORTED:
      return PipelineAborted();
    default:
      return ResultError(raw, what);
  }
}

}  // namespace

void Connection::BeginWith(std::vector<Pipelined> begin) {
  unsent_begin_ = std::move(begin);
}

bool Connection::DropUnsentBegin() {
  if (unsent_begin_.empty()) return false;
  unsent_begin_.clear();
  return true;
}

absl::StatusOr<Result> Connection::Exec(absl::string_view sql) {
  if (absl::Status s = SendUnsentBegin(); !s.ok()) return s;
  const std::string text(sql);
  return Counted(Take(PQexec(conn_, text.c_str()), "statement failed", conn_),
                 TextWrites(sql));
}

absl::StatusOr<Result> Connection::Query(absl::string_view sql,
                                         const std::vector<Param>& params) {
  if (absl::Status s = SendUnsentBegin(); !s.ok()) return s;
  const std::string text(sql);
  std::vector<const char*> values = Values(params);
  return Counted(
      Take(PQexecParams(conn_, text.c_str(), static_cast<int>(values.size()),
                        nullptr, values.data(), nullptr, nullptr, 0),
           "statement failed", conn_),
      TextWrites(sql));
}

absl::Status Connection::Prepare(const std::string& name,
                                 absl::string_view sql) {
  const std::string text(sql);
  absl::StatusOr<Result> r =
      Take(PQprepare(conn_, name.c_str(), text.c_str(), 0, nullptr),
           absl::StrCat("cannot prepare ", name), conn_);
  if (!r.ok()) return r.status();
  prepared_.push_back(name);
  if (TextWrites(sql)) writing_.insert(name);
  return absl::OkStatus();
}

bool Connection::Prepared(const std::string& name) const {
  return std::find(prepared_.begin(), prepared_.end(), name) != prepared_.end();
}

absl::StatusOr<Result> Connection::ExecPrepared(
    const std::string& name, const std::vector<Param>& params) {
  if (!unsent_begin_.empty()) {
    return std::move(Pipeline({Pipelined{name, params}}).front());
  }
  std::vector<const char*> values = Values(params);
  return Counted(
      Take(PQexecPrepared(conn_, name.c_str(), static_cast<int>(values.size()),
                          values.data(), nullptr, nullptr, 0),
           absl::StrCat(name, " failed"), conn_),
      writing_.contains(name));
}

absl::StatusOr<Result> Connection::Run(absl::string_view sql,
                                       const std::vector<Param>& params) {
  auto it = by_text_.find(sql);
  if (it == by_text_.end()) {
    std::string name = absl::StrCat("hub_", by_text_.size());
    absl::Status s = Prepare(name, sql);
    if (!s.ok()) return s;
    it = by_text_.emplace(std::string(sql), std::move(name)).first;
  }
  return ExecPrepared(it->second, params);
}

absl::Status Connection::SetSessionParameter(const std::string& name,
                                             const std::string& value) {
  absl::StatusOr<Result> set = Query(kSetConfig, {name, value});
  if (!set.ok()) return set.status();
  auto same = [&name](const auto& p) { return p.first == name; };
  session_.erase(std::remove_if(session_.begin(), session_.end(), same),
                 session_.end());
  session_.emplace_back(name, value);
  return absl::OkStatus();
}

absl::Status Connection::Reconnect(absl::Time deadline) {
  unsent_begin_.clear();
  DropPrefetched();
  prepared_.clear();
  writing_.clear();
  by_text_.clear();
  session_lost_ = true;
  // libpq's non-blocking reset, so that a server that does not answer
  // (rather than refuses) costs at most the deadline.
  if (PQresetStart(conn_) != 1) {
    return ConnectionError("cannot reconnect to PostgreSQL");
  }
  PostgresPollingStatusType polled = PGRES_POLLING_WRITING;
  while (polled != PGRES_POLLING_OK) {
    if (polled == PGRES_POLLING_FAILED) {
      return ConnectionError("cannot reconnect to PostgreSQL");
    }
    pollfd wait = {};
    wait.fd = PQsocket(conn_);
    wait.events = polled == PGRES_POLLING_READING ? POLLIN : POLLOUT;
    const absl::Duration left = deadline - absl::Now();
    const int ms = left == absl::InfiniteDuration()
                       ? -1
                       : static_cast<int>(std::clamp<int64_t>(
                             absl::ToInt64Milliseconds(left), 0, 1 << 30));
    const int ready = ms == 0 ? 0 : poll(&wait, 1, ms);
    if (ready == 0) {
      return UnavailableError("STORE_UNAVAILABLE",
                              "cannot reconnect to PostgreSQL in time");
    }
    if (ready < 0 && errno != EINTR) {
      return ConnectionError("cannot reconnect to PostgreSQL");
    }
    if (ready > 0) polled = PQresetPoll(conn_);
  }
  for (const auto& [name, value] : session_) {
    absl::StatusOr<Result> set = Query(kSetConfig, {name, value});
    if (!set.ok()) return set.status();
  }
  session_lost_ = false;
  return absl::OkStatus();
}

Connection::CommitAnswer Connection::Commit(
    const std::function<void()>& after_send) {
  if (!prefetched_.empty() || prefetch_broken_) {
    DropPrefetched();
    return {ReasonError(absl::StatusCode::kInternal, "STORE_INTERNAL",
                        "COMMIT with statements sent ahead that nobody read: "
                        "not committed"),
            false};
  }
  if (DropUnsentBegin()) return {};  // nothing was sent: nothing to commit
  // libpq sends nothing on a connection it knows is broken: no COMMIT, so
  // the transaction cannot commit.
  if (PQstatus(conn_) != CONNECTION_OK) {
    return {ConnectionError("cannot send COMMIT"), false};
  }
  if (PQsendQuery(conn_, "COMMIT") != 1) {
    // Some of it may have left: the server may have it.
    return {ConnectionError("cannot send COMMIT"), true};
  }
  if (after_send) after_send();
  PGresult* answer = nullptr;
  while (PGresult* next = PQgetResult(conn_)) {
    if (answer != nullptr) PQclear(answer);
    answer = next;
  }
  if (answer == nullptr) {
    return {ConnectionError("no answer to COMMIT"), true};
  }
  Result owned(answer);
  if (PQresultStatus(answer) == PGRES_COMMAND_OK) {
    if (absl::string_view(PQcmdStatus(answer)) == "COMMIT") return {};
    // COMMIT of a failed transaction answers ROLLBACK.
    return {ReasonError(absl::StatusCode::kInternal, "STORE_INTERNAL",
                        "COMMIT rolled back a failed transaction"),
            false};
  }
  // The server refuses a COMMIT with an ERROR and keeps the session: the
  // transaction is rolled back. Anything else (FATAL: the backend is
  // exiting; libpq's own error, with no severity: the connection broke)
  // may have come after the commit itself.
  const char* severity =
      PQresultErrorField(answer, PG_DIAG_SEVERITY_NONLOCALIZED);
  const bool refused =
      severity != nullptr && absl::string_view(severity) == "ERROR";
  return {ResultError(answer, "COMMIT failed"), !refused};
}

absl::Status Connection::StartCopyIn(absl::string_view sql) {
  if (absl::Status s = SendUnsentBegin(); !s.ok()) return s;
  const std::string text(sql);
  PGresult* raw = PQexec(conn_, text.c_str());
  if (raw != nullptr && PQresultStatus(raw) == PGRES_COPY_IN) {
    PQclear(raw);
    return absl::OkStatus();
  }
  absl::StatusOr<Result> r = Take(raw, "COPY failed", conn_);
  if (!r.ok()) return r.status();
  return ReasonError(absl::StatusCode::kInternal, "STORE_INTERNAL",
                     "COPY did not start a copy (not COPY ... FROM STDIN?)");
}

absl::Status Connection::PutCopyData(absl::string_view data) {
  if (PQputCopyData(conn_, data.data(), static_cast<int>(data.size())) != 1) {
    return ConnectionError("cannot send COPY data");
  }
  return absl::OkStatus();
}

absl::StatusOr<Result> Connection::EndCopyIn(
    const std::optional<std::string>& abort_reason) {
  if (PQputCopyEnd(conn_, abort_reason.has_value() ? abort_reason->c_str()
                                                   : nullptr) != 1) {
    return ConnectionError("cannot end COPY");
  }
  // The COPY's own result, then a NULL that ends it.
  absl::StatusOr<Result> answer =
      Take(PQgetResult(conn_), "COPY failed", conn_);
  while (PGresult* extra = PQgetResult(conn_)) PQclear(extra);
  return answer;
}

void Connection::Prefetch(const std::vector<const Statement*>& statements) {
  std::vector<Pipelined> named;
  named.reserve(statements.size());
  absl::Status prepared;
  for (const Statement* st : statements) {
    auto it = by_text_.find(st->sql);
    if (it == by_text_.end() && prepared.ok()) {
      std::string name = absl::StrCat("hub_", by_text_.size());
      prepared = Prepare(name, st->sql);
      if (prepared.ok()) {
        it = by_text_.emplace(st->sql, std::move(name)).first;
      }
    }
    if (!prepared.ok()) break;
    named.push_back({it->second, st->params});
  }
  // One that cannot be prepared: nothing is sent ahead, so each statement
  // is run (and fails) on its own, as Run() would.
  if (!prepared.ok()) return;
  std::vector<absl::StatusOr<Result>> answers =
      SendPipeline(std::exchange(unsent_begin_, {}), named, nullptr);
  for (size_t i = 0; i < statements.size(); ++i) {
    prefetched_.push_back({statements[i], std::move(answers[i])});
  }
}

absl::StatusOr<Result> Connection::RunFirst(const Statement& statement) {
  if (prefetched_.empty()) return Run(statement.sql, statement.params);
  if (prefetched_.front().statement != &statement) {
    prefetch_broken_ = true;
    prefetched_.clear();
    return ReasonError(absl::StatusCode::kInternal, "STORE_INTERNAL",
                       "a statement sent ahead was not the next one run");
  }
  absl::StatusOr<Result> answer = std::move(prefetched_.front().answer);
  prefetched_.pop_front();
  auto it = by_text_.find(statement.sql);
  return Counted(std::move(answer),
                 it != by_text_.end() && writing_.contains(it->second));
}

void Connection::DropPrefetched() {
  prefetched_.clear();
  prefetch_broken_ = false;
}

std::vector<absl::StatusOr<Result>> Connection::Pipeline(
    const std::vector<Pipelined>& statements) {
  return SendPipeline(std::exchange(unsent_begin_, {}), statements, nullptr);
}

absl::Status Connection::SendUnsentBegin() {
  if (unsent_begin_.empty()) return absl::OkStatus();
  absl::Status sent;
  SendPipeline(std::exchange(unsent_begin_, {}), {}, &sent);
  return sent;
}

std::vector<absl::StatusOr<Result>> Connection::SendPipeline(
    const std::vector<Pipelined>& lead,
    const std::vector<Pipelined>& statements, absl::Status* lead_status) {
  std::vector<absl::StatusOr<Result>> answers;
  answers.reserve(statements.size());
  auto fail_all = [&](const absl::Status& s) {
    if (lead_status != nullptr) *lead_status = s;
    std::vector<absl::StatusOr<Result>> failed;
    for (size_t i = 0; i < statements.size(); ++i) failed.push_back(s);
    return failed;
  };
  if (lead.empty() && statements.empty()) return answers;
  const bool in_transaction = PQtransactionStatus(conn_) != PQTRANS_IDLE;
  if (PQenterPipelineMode(conn_) != 1) {
    return fail_all(ConnectionError("cannot enter pipeline mode"));
  }
  bool sent = true;
  for (const std::vector<Pipelined>* list : {&lead, &statements}) {
    for (const Pipelined& p : *list) {
      std::vector<const char*> values = Values(p.params);
      if (sent &&
          PQsendQueryPrepared(conn_, p.statement.c_str(),
                              static_cast<int>(values.size()), values.data(),
                              nullptr, nullptr, 0) != 1) {
        sent = false;
      }
    }
  }
  if (!sent || PQpipelineSync(conn_) != 1) {
    absl::Status s = ConnectionError("cannot send the pipeline");
    PQexitPipelineMode(conn_);
    return fail_all(s);
  }
  // Each statement's answer is its result, then a NULL that ends it.
  auto answer = [&](const Pipelined& p, bool* broke) {
    PGresult* raw = PQgetResult(conn_);
    absl::StatusOr<Result> taken =
        Take(raw, absl::StrCat(p.statement, " failed"), conn_);
    *broke = raw == nullptr;  // the connection broke: no more answers
    if (!*broke) {
      while (PGresult* extra = PQgetResult(conn_)) PQclear(extra);
    }
    return taken;
  };
  absl::Status lead_failed;
  bool broke = false;
  for (const Pipelined& p : lead) {
    absl::StatusOr<Result> taken = answer(p, &broke);
    if (!taken.ok() && lead_failed.ok()) lead_failed = taken.status();
    if (broke) break;
  }
  for (size_t i = 0; i < statements.size() && !broke; ++i) {
    answers.push_back(Counted(answer(statements[i], &broke),
                              writing_.contains(statements[i].statement)));
  }
  // The Sync's answer; then the pipeline is idle and can be left. (A few
  // stray end-of-result NULLs are skipped; a broken connection gives only
  // NULLs.)
  for (int nulls = 0; nulls < 3 && PQstatus(conn_) == CONNECTION_OK;) {
    PGresult* sync = PQgetResult(conn_);
    if (sync == nullptr) {
      ++nulls;
      continue;
    }
    const bool done = PQresultStatus(sync) == PGRES_PIPELINE_SYNC;
    PQclear(sync);
    if (done) break;
  }
  PQexitPipelineMode(conn_);
  // A transaction this pipeline began, when its beginning or (with no
  // lead) any of its statements failed, is rolled back; one begun by a
  // lead that went well is the caller's to end.
  if (!in_transaction && PQtransactionStatus(conn_) == PQTRANS_INERROR &&
      (lead.empty() || !lead_failed.ok())) {
    PQclear(PQexec(conn_, "ROLLBACK"));
  }
  if (lead_status != nullptr) *lead_status = lead_failed;
  if (!lead_failed.ok()) return fail_all(lead_failed);
  while (answers.size() < statements.size()) {
    answers.push_back(ConnectionError("the connection broke mid-pipeline"));
  }
  return answers;
}

}  // namespace hub::storage::pg
