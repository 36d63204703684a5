#include "storage/pg/pg_group_commit.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "status/status.h"
#include "storage/store.h"

namespace hub::storage::pg {
namespace {

constexpr const char kBeginName[] = "hub_group_begin";
constexpr const char kBeginSql[] = "BEGIN";
constexpr const char kRecordName[] = "hub_group_record";
constexpr const char kRecordSql[] = "INSERT INTO hub_commits (id) VALUES ($1)";
// Rows another hub's writer is deleting are skipped, never waited for: a
// prune must not make one hub's group wait for another's.
constexpr const char kPruneName[] = "hub_group_prune";
constexpr const char kPruneSql[] =
    "DELETE FROM hub_commits WHERE id IN (SELECT id FROM hub_commits "
    "WHERE id < $1::uuid AND begun_at < now() - $2::interval ORDER BY id "
    "LIMIT 4096 FOR UPDATE SKIP LOCKED)";

absl::Status PrepareOnce(Connection& conn, const char* name, const char* sql) {
  return conn.Prepared(name) ? absl::OkStatus() : conn.Prepare(name, sql);
}

// The smallest UUIDv7 of millisecond `ms` (UUIDs compare bytewise, and a
// UUIDv7 starts with its 48-bit millisecond timestamp).
std::string UuidV7Floor(int64_t ms) {
  const uint64_t t = static_cast<uint64_t>(std::max<int64_t>(ms, 0));
  return absl::StrFormat("%08x-%04x-0000-0000-000000000000",
                         (t >> 16) & 0xffffffffu, t & 0xffffu);
}

// One lookup on a connection that is up.
absl::StatusOr<bool> LookUpCommit(Connection& conn,
                                  const std::string& commit_id,
                                  absl::Time deadline) {
  const int64_t wait_ms =
      std::max<int64_t>(1, absl::ToInt64Milliseconds(deadline - absl::Now()));
  absl::StatusOr<Result> inserted = conn.Exec("BEGIN");
  if (inserted.ok()) {
    inserted = conn.Query("SELECT set_config('lock_timeout', $1, true)",
                          {absl::StrCat(wait_ms, "ms")});
  }
  if (inserted.ok()) {
    inserted = conn.Query(
        "INSERT INTO hub_commits (id) VALUES ($1) ON CONFLICT DO NOTHING",
        {commit_id});
  }
  if (conn.Healthy() &&
      conn.TransactionState() != Connection::Transaction::kIdle) {
    conn.Exec("ROLLBACK").IgnoreError();
  }
  if (!inserted.ok()) return inserted.status();
  return inserted->changed() == 0;
}

}  // namespace

absl::Status PgGroupEngine::Ready(std::unique_ptr<Connection>& conn) {
  // libpq marks a connection bad only once it reads from it, so an idle one
  // the server ended meanwhile (a restart, a terminated backend) would fail
  // the group's first statement. Read what the server sent since the last
  // group first: its goodbye, and the end of the stream if it came.
  conn->ReadWhileIdle();
  if (conn->Healthy()) return absl::OkStatus();
  return conn->Reconnect();
}

absl::Status PgGroupEngine::Begin(Connection& conn) {
  conn.DropPrefetched();  // whatever an ended group left
  for (auto [name, sql] :
       {std::pair{kBeginName, kBeginSql}, std::pair{kRecordName, kRecordSql},
        std::pair{kPruneName, kPruneSql}}) {
    if (absl::Status s = PrepareOnce(conn, name, sql); !s.ok()) return s;
  }
  commit_id_ = NewUuidV7();
  std::vector<Pipelined> batch = {{kBeginName, {}},
                                  {kRecordName, {commit_id_}}};
  if (++groups_ % std::max(1, options_.prune_every) == 0) {
    batch.push_back(
        {kPruneName,
         {UuidV7Floor(SystemNowMs() -
                      absl::ToInt64Milliseconds(kCommitIdRetention)),
          absl::StrCat(absl::ToInt64Seconds(kCommitIdRetention), " seconds")}});
  }
  // Sent ahead of the group's first statement, in its round trip.
  conn.BeginWith(std::move(batch));
  return absl::OkStatus();
}

absl::Status PgGroupEngine::Commit(Connection& conn) {
  if (options_.before_commit) options_.before_commit(conn);
  std::function<void()> after_send;
  if (options_.after_commit_sent) {
    after_send = [this, &conn] { options_.after_commit_sent(conn); };
  }
  Connection::CommitAnswer answer = conn.Commit(after_send);
  if (answer.status.ok() || !answer.outcome_unknown) return answer.status;
  absl::StatusOr<bool> committed =
      FindCommit(conn, commit_id_, absl::Now() + options_.resolve_timeout);
  if (!committed.ok()) {
    return UnavailableError(
        "STORE_COMMIT_UNKNOWN",
        absl::StrCat("the connection to PostgreSQL broke while COMMIT was in "
                     "flight (",
                     answer.status.message(),
                     ") and whether it committed could not be learned (",
                     committed.status().message(), "): group ", commit_id_,
                     " may or may not have been written"));
  }
  if (*committed) return absl::OkStatus();
  return UnavailableError(
      "STORE_UNAVAILABLE",
      absl::StrCat(answer.status.message(), " (group ", commit_id_,
                   " looked up: it did not commit)"));
}

absl::Status PgGroupEngine::Exec(Connection& conn, const char* sql) {
  if (absl::string_view(sql) == "ROLLBACK") {
    conn.DropPrefetched();
    // A group that sent nothing yet has nothing on the server to undo.
    if (conn.DropUnsentBegin()) return absl::OkStatus();
  }
  return conn.Run(sql).status();
}

void PgGroupEngine::Prefetch(Connection& conn,
                             const std::vector<const First*>& run) {
  std::vector<const Statement*> statements;
  statements.reserve(run.size());
  for (const First* first : run) statements.push_back(first->get());
  conn.Prefetch(statements);
}

GroupTransaction PgGroupEngine::State(Connection& conn) {
  if (!conn.Healthy()) return GroupTransaction::kGone;
  switch (conn.TransactionState()) {
    case Connection::Transaction::kOpen:
      return GroupTransaction::kOpen;
    case Connection::Transaction::kFailed:
      return GroupTransaction::kFailed;
    case Connection::Transaction::kIdle:
    case Connection::Transaction::kUnknown:
      return GroupTransaction::kGone;
  }
  return GroupTransaction::kGone;
}

absl::StatusOr<bool> FindCommit(Connection& conn, const std::string& commit_id,
                                absl::Time deadline) {
  // Always a new connection first: the old one may still look up to libpq,
  // and its backend may be waiting for this client to go.
  absl::Status last = conn.Reconnect(deadline);
  absl::Duration backoff = absl::Milliseconds(20);
  while (true) {
    if (last.ok()) {
      absl::StatusOr<bool> found = LookUpCommit(conn, commit_id, deadline);
      if (found.ok()) return found;
      last = found.status();
    }
    if (absl::Now() + backoff >= deadline) return last;
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, absl::Milliseconds(500));
    last = conn.Healthy() ? absl::OkStatus() : conn.Reconnect(deadline);
  }
}

}  // namespace hub::storage::pg

namespace hub::storage {
template class BasicGroupCommitWriter<pg::PgGroupEngine>;
}  // namespace hub::storage
