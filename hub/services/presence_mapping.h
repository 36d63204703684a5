// Mapping between hub.v1 presence messages and the presence domain types.
#ifndef HUB_HUB_SERVICES_PRESENCE_MAPPING_H_
#define HUB_HUB_SERVICES_PRESENCE_MAPPING_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "hub/v1/agent.pb.h"
#include "hub/v1/presence.pb.h"
#include "registry/presence.h"

namespace hub {

// The domain input of a RegisterAgent request. Structured locators become
// triflux JSON objects so that one validator decides (and every triflux
// reason code stays reachable); metadata becomes JSON text.
absl::StatusOr<RegisterInput> ToRegisterInput(
    const hub::v1::RegisterAgentRequest& request);

// "codex" for AGENT_CLI_CODEX ...; "" for UNSPECIFIED or unknown values.
std::string CliName(hub::v1::AgentCli cli);
// The domain's status for AGENT_STATUS_ONLINE ...; nullopt for UNSPECIFIED
// or unknown values.
std::optional<AgentStatus> StatusFromProto(hub::v1::AgentStatus status);
// The proto's value of a domain status.
hub::v1::AgentStatus StatusToProto(AgentStatus status);

// The Agent message for a view, with `live` judged at `now`.
hub::v1::Agent ToAgentProto(const AgentView& view, absl::Time now);

}  // namespace hub

#endif  // HUB_HUB_SERVICES_PRESENCE_MAPPING_H_
