// PostgresStore's RoleStore: the shared RoleCalls over PgRoleRows, with
// PostgreSQL's additions:
// - a compare-and-set that names its whole fence is one statement (the
//   patch applied in SQL; the row is read only to explain a refusal), and
//   its asynchronous form goes ahead with its group's neighbours in one
//   round trip (storage/group_commit_writer.h);
// - the role change log (hub_role_changes, storage/pg/schema.sql), written
//   by a trigger on role_registry in the transaction of every write,
//   whoever makes it; this file only reads and prunes it. See
//   docs/design/multi-hub.md, "Role changes across hubs";
// - the candidates of several roles in one statement.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "status/status.h"
#include "storage/pg/pg_role_rows.h"
#include "storage/pg/pg_rows.h"
#include "storage/pg/pg_store.h"
#include "storage/role_ops.h"
#include "storage/role_store_calls.h"

namespace hub::storage::pg {
namespace {

// The role columns first (ReadRole reads from column 0), then the change's,
// then the head, all from one snapshot; with no change after $1, one row
// of NULLs but the head.
constexpr char kChangesAfterSql[] =
    "SELECT " HUB_ROLE_COLUMNS
    ", seq, kind, written_at_ms, head FROM "
    "(SELECT COALESCE((SELECT seq FROM hub_role_change_counter), 0) AS head) "
    "h LEFT JOIN LATERAL (SELECT * FROM hub_role_changes WHERE seq > $1 "
    "ORDER BY seq LIMIT $2) x ON true ORDER BY seq";

// written_at_ms grows with seq (it is read once the counter's lock is
// held), so the changes older than the cutoff are the ones below the first
// that is not: found walking the primary key from its low end, at a cost
// that follows the rows deleted, not the log's size.
constexpr char kPruneSql[] =
    "WITH bound AS (SELECT COALESCE("
    "(SELECT seq FROM hub_role_changes WHERE written_at_ms >= "
    "(extract(epoch FROM clock_timestamp()) * 1000)::bigint - $1 "
    "ORDER BY seq LIMIT 1), "
    "(SELECT max(seq) + 1 FROM hub_role_changes)) AS below, "
    "(SELECT min(seq) FROM hub_role_changes) AS lowest) "
    "DELETE FROM hub_role_changes "
    "WHERE seq < (SELECT below FROM bound) "
    "AND seq < (SELECT lowest FROM bound) + $2";

RoleChange::Kind KindOf(absl::string_view word) {
  if (word == "created") return RoleChange::Kind::kCreated;
  if (word == "removed") return RoleChange::Kind::kRemoved;
  return RoleChange::Kind::kUpdated;
}

}  // namespace

class PgRoleStore final : public RoleCalls<PostgresStore, PgRoleRows> {
 public:
  using RoleCalls::RoleCalls;

  absl::StatusOr<RoleWrite> CompareAndSetRole(const RoleCas& cas) override {
    return Write<RoleWrite>([&](PgRoleRows& rows) {
      if (!NamesEveryGuard(cas)) return CompareAndSetRoleWith(rows, cas);
      return CompareAndSetRoleWith(rows, cas, rows.CasIfFence(cas));
    });
  }
  void CompareAndSetRoleAsync(const RoleCas& cas,
                              Callback<RoleWrite> done) override {
    if (!NamesEveryGuard(cas)) {
      RoleCalls::CompareAndSetRoleAsync(cas, std::move(done));
      return;
    }
    engine().WriteAsyncFirst<RoleWrite>(
        PgRoleRows::CasStatement(cas),
        [cas](const Statement&, absl::StatusOr<Result> answer,
              Connection& conn) {
          PgRoleRows rows(conn);
          return CompareAndSetRoleWith(
              rows, cas, PgRoleRows::CasedRole(std::move(answer)));
        },
        std::move(done));
  }

  absl::StatusOr<std::vector<CandidateRecord>> ListCandidatesOfRoles(
      const std::vector<std::string>& wires) override {
    if (wires.empty()) return std::vector<CandidateRecord>();
    return Read<std::vector<CandidateRecord>>(
        [&](PgRoleRows& rows) { return rows.CandidatesOf(wires); });
  }

  bool HasRoleChangeLog() const override { return true; }
  absl::StatusOr<int64_t> RoleChangeHead() override;
  absl::StatusOr<RoleChangePage> ReadRoleChanges(int64_t after_seq,
                                                 int64_t limit) override;
  absl::StatusOr<int64_t> PruneRoleChanges(int64_t keep_ms,
                                           int64_t limit) override;
};

absl::StatusOr<int64_t> PgRoleStore::RoleChangeHead() {
  return engine().Read<int64_t>(
      [](Connection& conn) -> absl::StatusOr<int64_t> {
        absl::StatusOr<Result> r = conn.Run(
            "SELECT COALESCE((SELECT seq FROM hub_role_change_counter), 0)");
        if (!r.ok()) return r.status();
        return r->Int(0, 0).value_or(0);
      });
}

absl::StatusOr<RoleChangePage> PgRoleStore::ReadRoleChanges(int64_t after_seq,
                                                            int64_t limit) {
  if (limit <= 0) {
    return InvalidArgumentError("REQUEST_INVALID",
                                "a role change page needs a limit above 0");
  }
  return engine().Read<RoleChangePage>(
      [&](Connection& conn) -> absl::StatusOr<RoleChangePage> {
        absl::StatusOr<Result> r =
            conn.Run(kChangesAfterSql, {P(after_seq), P(limit)});
        if (!r.ok()) return r.status();
        RoleChangePage page;
        page.changes.reserve(r->rows());
        for (int i = 0; i < r->rows(); ++i) {
          const Row row(*r, i);
          page.head = row.Int(23);
          if (row.IsNull(20)) continue;  // no change: the head only
          RoleChange change;
          change.role = ReadRole(row);
          change.seq = row.Int(20);
          change.kind = KindOf(row.Text(21));
          change.committed_at_ms = row.Int(22);
          page.changes.push_back(std::move(change));
        }
        return page;
      });
}

absl::StatusOr<int64_t> PgRoleStore::PruneRoleChanges(int64_t keep_ms,
                                                      int64_t limit) {
  if (limit <= 0) {
    return InvalidArgumentError("REQUEST_INVALID",
                                "pruning role changes needs a limit above 0");
  }
  return engine().Write<int64_t>(
      [=](Connection& conn) -> absl::StatusOr<int64_t> {
        absl::StatusOr<Result> r = conn.Run(kPruneSql, {P(keep_ms), P(limit)});
        if (!r.ok()) return r.status();
        return r->changed();
      });
}

std::unique_ptr<RoleStore> PostgresStore::NewRoleStore() {
  return std::make_unique<PgRoleStore>(*this, options_.new_id);
}

}  // namespace hub::storage::pg
