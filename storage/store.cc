#include "storage/store.h"

#include "absl/strings/str_cat.h"
#include "status/status.h"

namespace hub::storage {

absl::Status CheckAckGeneration(int64_t current,
                                std::optional<int64_t> claimed) {
  if (!claimed.has_value() || *claimed == current) return absl::OkStatus();
  return FailedPreconditionError(
      "STALE_PRESENCE_OWNER", absl::StrCat("presence_generation ", *claimed,
                                           " is not current (", current, ")"));
}

absl::Status InboxFullError(absl::string_view agent_id, int64_t limit) {
  return WithMetadata(
      LimitExceededError("max_pending_per_inbox", limit,
                         absl::StrCat("agent ", agent_id, " already has ",
                                      limit, " unacknowledged messages")),
      "agent_id", agent_id);
}

absl::Status ScopeClosedError(absl::string_view wire) {
  return WithMetadata(
      FailedPreconditionError(
          kScopeClosedReason,
          "the lead scope is closed: its role, candidates and backlog were "
          "removed and the scope id is never reused"),
      "role_key_wire", wire);
}

}  // namespace hub::storage
