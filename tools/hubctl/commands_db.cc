// db copy, db verify: offline commands that read a SQLite database file and
// a PostgreSQL database directly (storage/pg/pg_copy.h), not through a hub.
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/struct.pb.h"
#include "status/status.h"
#include "storage/pg/pg_copy.h"
#include "tools/hubctl/commands.h"

namespace hub::hubctl {
namespace {

// A library failure in the shape hubctl prints and exits with (the reason
// and metadata as a hub's ErrorInfo).
absl::Status Printable(const absl::Status& s) {
  if (s.ok()) return s;
  return client::MakeHubError(s.code(), hub::ReasonOf(s), s.message(),
                              hub::MetadataOf(s));
}

absl::StatusOr<storage::pg::CopyOptions> OptionsFrom(const Args& args) {
  storage::pg::CopyOptions options;
  options.sqlite_path = args.Get("from");
  options.conninfo = args.Get("to");
  if (options.sqlite_path.empty()) return UsageError("needs --from=FILE");
  if (!args.Has("to")) return UsageError("needs --to=POSTGRES_URL");
  const std::string method = args.Get("method", "copy");
  if (method == "insert") {
    options.method = storage::pg::CopyMethod::kInsert;
  } else if (method != "copy") {
    return UsageError(absl::StrCat("--method: unknown value '", method,
                                   "' (copy or insert)"));
  }
  return options;
}

std::string Source(const storage::pg::CopyReport& r) {
  return r.from_hub_schema_version.empty()
             ? absl::StrCat("triflux schema ", r.from_schema_version)
             : absl::StrCat("hub schema ", r.from_hub_schema_version);
}

void Print(Env& env, const storage::pg::CopyOptions& options,
           const storage::pg::CopyReport& r, bool copied) {
  const double copy_s = absl::ToDoubleSeconds(r.copy_time);
  const double verify_s = absl::ToDoubleSeconds(r.verify_time);
  if (env.json) {
    google::protobuf::Struct out;
    auto& f = *out.mutable_fields();
    f["from"].set_string_value(options.sqlite_path);
    f["to"].set_string_value(r.target);
    f["source"].set_string_value(Source(r));
    f["migratedSnapshot"].set_bool_value(r.migrated_snapshot);
    f["rows"].set_string_value(absl::StrCat(r.rows));
    for (const auto& t : r.tables) {
      (*f["tables"].mutable_struct_value()->mutable_fields())[t.table]
          .set_string_value(absl::StrCat(t.rows));
    }
    for (const auto& t : r.left_behind) {
      (*f["leftBehind"].mutable_struct_value()->mutable_fields())[t.table]
          .set_string_value(absl::StrCat(t.rows));
    }
    if (copied) f["copySeconds"].set_number_value(copy_s);
    f["verifySeconds"].set_number_value(verify_s);
    *env.out << ToJson(out) << "\n";
    return;
  }
  PrintFields(*env.out,
              {{"from", absl::StrCat(options.sqlite_path, " (", Source(r),
                                     r.migrated_snapshot
                                         ? ", migrated on a temporary copy)"
                                         : ")")},
               {"to", r.target}});
  Table table({"TABLE", "ROWS"});
  for (const auto& t : r.tables) table.Add({t.table, absl::StrCat(t.rows)});
  table.Add({"total", absl::StrCat(r.rows)});
  *env.out << "\n";
  table.Print(*env.out);
  *env.out << "\n";
  if (copied) {
    *env.out << absl::StrFormat(
        "copied %d rows in %.2f s (%.0f rows/s), verified row for row in "
        "%.2f s, committed\n",
        r.rows, copy_s, copy_s > 0 ? r.rows / copy_s : 0.0, verify_s);
  } else {
    *env.out << absl::StrFormat("verified %d rows row for row in %.2f s\n",
                                r.rows, verify_s);
  }
  if (!r.left_behind.empty()) {
    std::vector<std::string> names;
    for (const auto& t : r.left_behind) {
      names.push_back(absl::StrCat(t.table, " (", t.rows, " rows)"));
    }
    *env.out << "not copied (not hub's tables): " << absl::StrJoin(names, ", ")
             << "\n";
  }
}

absl::Status Copy(Env& env, const Args& args) {
  absl::StatusOr<storage::pg::CopyOptions> options = OptionsFrom(args);
  if (!options.ok()) return options.status();
  absl::StatusOr<storage::pg::CopyReport> report =
      storage::pg::CopySqliteToPostgres(*options);
  if (!report.ok()) return Printable(report.status());
  Print(env, *options, *report, /*copied=*/true);
  return absl::OkStatus();
}

absl::Status Verify(Env& env, const Args& args) {
  absl::StatusOr<storage::pg::CopyOptions> options = OptionsFrom(args);
  if (!options.ok()) return options.status();
  absl::StatusOr<storage::pg::CopyReport> report =
      storage::pg::VerifySqliteAgainstPostgres(*options);
  if (!report.ok()) return Printable(report.status());
  Print(env, *options, *report, /*copied=*/false);
  return absl::OkStatus();
}

const std::vector<FlagSpec> kDbFlags = {
    {"from", "FILE", "the SQLite database file (hub's or triflux's)"},
    {"to", "POSTGRES_URL",
     "the PostgreSQL database: postgres://user@host:port/db or key=value "
     "(password: PGPASSWORD or ~/.pgpass)"}};

}  // namespace

std::vector<Command> DbCommands() {
  std::vector<FlagSpec> copy_flags = kDbFlags;
  copy_flags.push_back(
      {"method", "copy|insert",
       "how rows travel: COPY FROM STDIN (default) or pipelined INSERTs"});
  return {
      {"db copy", "",
       "Copy a SQLite database into an empty PostgreSQL database, verified.",
       "Offline: reads FILE and writes the PostgreSQL database directly (no\n"
       "hub involved; --addr and the TLS flags do not apply). FILE is never\n"
       "written: a file that needs migration (triflux's, an older hub's) is\n"
       "migrated on a temporary copy in $TMPDIR. A FILE a running hubd holds\n"
       "is refused (DATABASE_LOCKED): stop it, or copy a `hubctl backup`.\n"
       "The target's schema is created or migrated, then one transaction\n"
       "copies every hub table, continues message_inbox's ids, reads every\n"
       "row back and compares it column for column with FILE, and commits\n"
       "only if all agree: any failure leaves the target empty. A target\n"
       "that already holds hub data is refused (TARGET_NOT_EMPTY).\n"
       "triflux's own tables (human_requests, ...) are listed, not copied.\n"
       "Exit codes: 3 STORE_URL_INVALID, 5 STORE_NOT_FOUND, 9\n"
       "TARGET_NOT_EMPTY / DATABASE_LOCKED / STORE_CORRUPT / SCHEMA_TOO_NEW\n"
       "/ STORE_NOT_SQLITE, 14 STORE_UNAVAILABLE (server unreachable), 15\n"
       "COPY_VERIFY_MISMATCH (naming the table, row and column).",
       copy_flags, 0, 0, Copy},
      {"db verify", "",
       "Compare a SQLite database with a PostgreSQL copy, row for row.",
       "Offline and read-only on both sides. Exit 0 with per-table counts\n"
       "when every row and column agrees; 15 COPY_VERIFY_MISMATCH naming the\n"
       "first differing table, row (its key) and column otherwise.",
       kDbFlags, 0, 0, Verify},
  };
}

}  // namespace hub::hubctl
