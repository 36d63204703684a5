// The rows of a copy into PostgreSQL (internal to pg_copy.cc): hub's tables
// and their keys, each table's rows read from SQLite and written with COPY
// FROM STDIN or pipelined INSERTs, and the side-by-side comparison of a
// table's rows in both engines that verification runs.
#ifndef HUB_STORAGE_PG_COPY_ROWS_H_
#define HUB_STORAGE_PG_COPY_ROWS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "storage/pg/pg_conn.h"
#include "storage/sqlite/sqlite_db.h"

namespace hub::storage::pg {

// A hub table and the key both engines order its rows by (its primary key).
struct TableSpec {
  const char* name;
  std::vector<const char*> key;
  // The key's columns that order as integers (the others as bytes).
  std::vector<const char*> integer_key = {};
  const char* identity = nullptr;  // a GENERATED ALWAYS AS IDENTITY column
  // Columns read from SQLite as an expression of the row rather than as
  // stored, when copied and when verified alike: {column, expression}.
  std::vector<std::pair<const char*, const char*>> sqlite_reads = {};
};

const std::vector<TableSpec>& Tables();

// SELECT of `columns` in key order, for SQLite (each of the table's
// sqlite_reads as its expression).
std::string SqliteSelect(const TableSpec& table,
                         const std::vector<std::string>& columns);

// Writes every row `rows` (SqliteSelect's statement) yields into `table`;
// the number of rows. CopyRows streams COPY FROM STDIN; InsertRows sends
// INSERTs of up to `batch_rows` rows, several per pipeline.
absl::StatusOr<int64_t> CopyRows(Connection& pg, Stmt& rows,
                                 const TableSpec& table,
                                 const std::vector<std::string>& columns);
absl::StatusOr<int64_t> InsertRows(Connection& pg, Stmt& rows,
                                   const TableSpec& table,
                                   const std::vector<std::string>& columns,
                                   int batch_rows);

// Walks both engines' rows of `table` in key order, side by side: the
// number of rows when every row and column agrees, else DATA_LOSS /
// COPY_VERIFY_MISMATCH naming the first difference (metadata table, key,
// column). REQUIRES: `pg` is inside a transaction (it opens a cursor).
absl::StatusOr<int64_t> VerifyTable(Connection& pg, storage::Connection& sqlite,
                                    const TableSpec& table,
                                    const std::vector<std::string>& columns);

}  // namespace hub::storage::pg

#endif  // HUB_STORAGE_PG_COPY_ROWS_H_
