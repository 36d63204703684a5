// Reading and binding hub's rows on PostgreSQL: a result row with the
// accessors storage/record_rows.h's readers take, parameter helpers, and
// the row readers themselves. Internal to the PostgreSQL store.
#ifndef HUB_STORAGE_PG_PG_ROWS_H_
#define HUB_STORAGE_PG_PG_ROWS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "storage/pg/pg_conn.h"
#include "storage/record_rows.h"
#include "storage/store.h"

namespace hub::storage::pg {

// One row of a Result, read like SQLite's Stmt.
class Row {
 public:
  Row(const Result& result, int row) : result_(&result), row_(row) {}
  std::string Text(int col) const {
    return std::string(result_->Text(row_, col));
  }
  int64_t Int(int col) const { return result_->Int(row_, col).value_or(0); }
  std::optional<int64_t> OptInt(int col) const {
    return result_->Int(row_, col);
  }
  std::optional<std::string> OptText(int col) const {
    if (result_->IsNull(row_, col)) return std::nullopt;
    return Text(col);
  }
  bool IsNull(int col) const { return result_->IsNull(row_, col); }

 private:
  const Result* result_;
  int row_;
};

// Parameters in text format.
inline Param P(absl::string_view v) { return std::string(v); }
inline Param P(const char* v) { return std::string(v); }
inline Param P(const std::string& v) { return v; }
inline Param P(int64_t v) { return std::to_string(v); }
inline Param P(int v) { return std::to_string(v); }
inline Param P(bool v) { return std::string(v ? "true" : "false"); }
inline Param P(const std::optional<int64_t>& v) {
  return v.has_value() ? P(*v) : Param();
}
inline Param P(const std::optional<std::string>& v) { return v; }
inline Param P(AgentStatus v) { return std::string(AgentStatusName(v)); }
inline Param P(RoleState v) { return std::string(RoleStateName(v)); }
inline Param P(MessageStatus v) { return std::string(MessageStatusName(v)); }
inline Param Null() { return Param(); }

// `values` as a PostgreSQL array literal of text ('{"a","b"}'), for
// `x = ANY($1::text[])`: one prepared statement whatever the list's length.
std::string TextArray(const std::vector<std::string>& values);
// TextArray(*values), or NULL when `values` is unset.
Param OptTextArray(const std::optional<std::vector<std::string>>& values);

// Every row of `result` read with `read` (a record_rows.h reader).
template <typename T, typename F>
std::vector<T> ReadAll(const Result& result, F read) {
  std::vector<T> out;
  out.reserve(result.rows());
  for (int i = 0; i < result.rows(); ++i) out.push_back(read(Row(result, i)));
  return out;
}
// The first row, if any.
template <typename T, typename F>
std::optional<T> ReadOne(const Result& result, F read) {
  if (result.rows() == 0) return std::nullopt;
  return read(Row(result, 0));
}

inline AgentRecord ReadAgent(const Row& r) { return rows::ReadAgentRow(r); }
inline RoleRecord ReadRole(const Row& r) { return rows::ReadRoleRow(r); }
inline CandidateRecord ReadCandidate(const Row& r) {
  return rows::ReadCandidateRow(r);
}
inline MessageRecord ReadMessage(const Row& r) {
  return rows::ReadMessageRow(r);
}
inline ClosedScopeRecord ReadClosedScope(const Row& r) {
  return rows::ReadClosedScopeRow(r);
}

}  // namespace hub::storage::pg

#endif  // HUB_STORAGE_PG_PG_ROWS_H_
