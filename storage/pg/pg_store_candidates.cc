// PostgresStore: candidates. IN PROGRESS: placeholders to be replaced.
#include <utility>

#include "status/status.h"
#include "storage/pg/pg_rows.h"
#include "storage/pg/pg_store.h"

namespace hub::storage::pg {
namespace {

absl::Status NotYet() {
  return ReasonError(absl::StatusCode::kUnimplemented, "NOT_YET",
                     "not implemented yet");
}

}  // namespace

absl::StatusOr<ScopeCloseResult> PostgresStore::CloseLeadScope(
    const ScopeClose& close) {
  return NotYet();
}

absl::StatusOr<std::optional<ClosedScopeRecord>> PostgresStore::GetClosedScope(
    absl::string_view wire) {
  return NotYet();
}

absl::StatusOr<std::vector<ClosedScopeRecord>> PostgresStore::ListClosedScopes(
    const ClosedScopeFilter& filter) {
  return NotYet();
}

absl::StatusOr<bool> PostgresStore::DeleteCandidate(
    absl::string_view wire, absl::string_view agent_id) {
  return NotYet();
}

absl::StatusOr<CandidateRecord> PostgresStore::UpsertCandidate(
    const CandidateUpsert& upsert) {
  return NotYet();
}

absl::StatusOr<CandidateRecord> PostgresStore::UpdateCandidateReachability(
    const ReachabilityUpdate& update) {
  return NotYet();
}

absl::StatusOr<std::vector<CandidateRecord>> PostgresStore::ListCandidates(
    absl::string_view wire) {
  return NotYet();
}

absl::StatusOr<std::vector<CandidateRecord>> PostgresStore::ListCandidatesPage(
    const CandidatePageQuery& query) {
  return NotYet();
}

}  // namespace hub::storage::pg
