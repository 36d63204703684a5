// Validation of what an agent sends about itself (TRIFLUX-HUB §2.1, §3.1,
// §7.4 bounds), turning a registration request into the store's fenced
// upsert. Pure functions; every failure carries its reason code.
#ifndef HUB_REGISTRY_AGENT_VALIDATION_H_
#define HUB_REGISTRY_AGENT_VALIDATION_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "registry/presence.h"
#include "storage/store.h"

namespace hub {

// ^[A-Za-z0-9._:-]{3,64}$ and not an address ("topic:..."): AGENT_ID_INVALID.
absl::Status ValidateAgentId(absl::string_view agent_id);
// Within [min_ttl, max_ttl]: HEARTBEAT_TTL_INVALID.
absl::Status ValidateTtl(absl::Duration ttl, const PresenceConfig& config);
// A topic name: ^[A-Za-z0-9._:-]{1,128}$, not "role:..." (role topics are
// addressed by wire, never subscribed to): TOPIC_INVALID.
absl::Status ValidateTopic(absl::string_view topic);
// codex | gemini | claude | other: AGENT_CLI_INVALID.
absl::Status ValidateCli(absl::string_view cli);

// Validates every field of `input` (identity with all of §3's codes) and
// returns the store's upsert for it, at `now_ms`. Nothing is written.
absl::StatusOr<storage::AgentRegistration> BuildRegistration(
    const RegisterInput& input, const PresenceConfig& config, int64_t now_ms);

// Whether a stored topics_json array contains `topic`.
bool TopicsJsonContains(absl::string_view topics_json, absl::string_view topic);
// The strings of a stored topics_json array (none when it is not an array).
std::vector<std::string> TopicsFromJson(absl::string_view topics_json);

// ListAgents paging: an opaque token naming the last agent of a page.
std::string EncodeAgentPageToken(absl::string_view last_agent_id);
// "" for "" (first page); PAGE_TOKEN_INVALID for anything not made above.
absl::StatusOr<std::string> DecodeAgentPageToken(absl::string_view token);

}  // namespace hub

#endif  // HUB_REGISTRY_AGENT_VALIDATION_H_
