// PostgresStore: open, the reader pool, shared helpers. The concerns live
// in pg_store_agents.cc (over pg_agent_rows.cc), pg_store_roles.cc (over
// pg_role_rows.cc), pg_store_messages.cc (over pg_message_rows.cc),
// pg_store_reservations.cc, and the jobs: JobCalls over pg_job_rows.cc.
#include "storage/pg/pg_store.h"

#include <openssl/sha.h>

#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "status/status.h"
#include "storage/job_store_calls.h"
#include "storage/pg/pg_job_rows.h"
#include "storage/pg/pg_rows.h"
#include "storage/pg/pg_signals.h"

namespace hub::storage::pg {
namespace {

std::string Sha256Hex(absl::string_view text) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(),
         digest);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest), sizeof(digest)));
}

}  // namespace

std::string TextArray(const std::vector<std::string>& values) {
  std::string out = "{";
  for (const std::string& v : values) {
    if (out.size() > 1) out += ',';
    out += '"';
    for (char c : v) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  out += '}';
  return out;
}

Param OptTextArray(const std::optional<std::vector<std::string>>& values) {
  if (!values.has_value()) return Null();
  return TextArray(*values);
}

absl::StatusOr<std::unique_ptr<PostgresStore>> PostgresStore::Open(
    PostgresStoreOptions options) {
  if (!options.new_id) options.new_id = NewUuidV7;
  if (!options.now_ms) options.now_ms = SystemNowMs;
  // A conninfo libpq cannot parse is the caller's mistake, not an outage.
  absl::StatusOr<std::string> redacted = RedactedConnInfo(options.conninfo);
  if (!redacted.ok()) return redacted.status();
  std::unique_ptr<PostgresStore> store(new PostgresStore(std::move(options)));
  const PostgresStoreOptions& opts = store->options_;

  absl::StatusOr<std::unique_ptr<Connection>> conn =
      Connection::Open(opts.conninfo, "hubd writer");
  if (!conn.ok()) return conn.status();
  absl::StatusOr<PgMigrationReport> migrated = MigratePostgres(**conn);
  if (!migrated.ok()) return migrated.status();
  store->migration_ = *migrated;
  // Set again whenever the writer reconnects (a restart, a failover).
  absl::Status set = (*conn)->SetSessionParameter("synchronous_commit",
                                                  opts.synchronous_commit);
  if (!set.ok()) return set;
  // The writer's statements find their rows through an index whatever
  // their parameters' values, so one plan serves every call. Left to
  // choose, the server plans the acks' `= ANY($1::text[])` statements anew
  // on every execution (36 + 45 µs of its CPU per publish, measured
  // 2026-12-04, commit d81d191; the run is in git history of
  // docs/BENCHMARKS.md); pg_plans_test checks that no write scans a whole
  // table under its generic plan.
  set = (*conn)->SetSessionParameter("plan_cache_mode", "force_generic_plan");
  if (!set.ok()) return set;
  // The writer's statements keep the inbox counts themselves (hub_inbox_
  // pending, hub_inbox_settled), so the triggers that keep them for every
  // other session skip this one (storage/pg/schema.sql). Set before the
  // writer's first write, and again on every reconnect, like the others:
  // a write without it would be counted twice.
  set = (*conn)->SetSessionParameter("hub.inbox_counts", "kept");
  if (!set.ok()) return set;
  // A hub paused in the middle of a group (SIGSTOP, a stalled VM) would
  // keep that transaction's row locks, and every other hub's writes on
  // those rows would wait for the whole pause: the server ends such a
  // transaction instead (the paused hub's group then fails, changing
  // nothing).
  if (opts.idle_in_transaction_timeout_ms > 0) {
    set = (*conn)->SetSessionParameter(
        "idle_in_transaction_session_timeout",
        std::to_string(opts.idle_in_transaction_timeout_ms));
    if (!set.ok()) return set;
  }
  absl::StatusOr<Result> identity = (*conn)->Exec(
      "SELECT system_identifier::text, current_database() "
      "FROM pg_control_system()");
  if (!identity.ok()) return identity.status();

  store->info_.store_type = "postgres";
  store->info_.db_path = (*conn)->Describe();
  // The cluster and the database, not the address: every hub over one
  // database reports the same fingerprint, whatever host name it uses.
  store->info_.fingerprint = absl::StrCat(
      "postgres:",
      Sha256Hex(absl::StrCat(identity->Text(0, 0), "/", identity->Text(0, 1))));
  store->info_.schema_version = std::to_string(kPgTrifluxSchemaVersion);
  store->info_.hub_schema_version = std::to_string(kPgSchemaVersion);
  // Fail at open, not at the first read, if readers cannot connect.
  absl::StatusOr<std::unique_ptr<Connection>> reader = store->AcquireReader();
  if (!reader.ok()) return reader.status();
  store->ReleaseReader(std::move(*reader));
  store->writer_ = std::make_unique<PgGroupCommitWriter>(
      std::move(*conn), opts.max_group_size, /*completion_threads=*/2,
      opts.on_group_committed, /*on_rollback=*/nullptr,
      PgGroupEngine(opts.commits));
  if (!opts.hub_id.empty()) {
    store->membership_ =
        std::make_unique<PgMembership>(opts.conninfo, opts.hub_id);
  }
  store->agents_ = store->NewAgentStore();
  store->roles_ = store->NewRoleStore();
  store->messages_ = store->NewMessageStore();
  store->reservations_ = store->NewReservationStore();
  store->jobs_ = std::make_unique<JobCalls<PostgresStore, PgJobRows>>(*store);
  store->signals_ = std::make_unique<PgSignals>(opts.conninfo);
  return store;
}

PostgresStore::~PostgresStore() {
  writer_.reset();  // every queued write committed and answered
  absl::MutexLock lock(&readers_mu_);
  idle_readers_.clear();
}

absl::StatusOr<std::unique_ptr<Connection>> PostgresStore::AcquireReader(
    bool* pooled) {
  if (pooled != nullptr) *pooled = false;
  {
    absl::MutexLock lock(&readers_mu_);
    while (!idle_readers_.empty()) {
      std::unique_ptr<Connection> conn = std::move(idle_readers_.back());
      idle_readers_.pop_back();
      if (conn->Healthy()) {
        if (pooled != nullptr) *pooled = true;
        return conn;
      }
    }
  }
  return Connection::Open(options_.conninfo, kReaderName);
}

void PostgresStore::ReleaseReader(std::unique_ptr<Connection> conn) {
  if (!conn->Healthy() ||
      conn->TransactionState() != Connection::Transaction::kIdle) {
    return;  // broken, or left inside a transaction: not reused
  }
  absl::MutexLock lock(&readers_mu_);
  if (static_cast<int>(idle_readers_.size()) < options_.max_idle_readers) {
    idle_readers_.push_back(std::move(conn));
  }
}

}  // namespace hub::storage::pg
