// The activation a holder receives (`tfx.role-activation.v1`), shared by
// the activator that builds it and the presence streams that carry it.
#ifndef HUB_REGISTRY_ACTIVATION_ENVELOPE_H_
#define HUB_REGISTRY_ACTIVATION_ENVELOPE_H_

#include <cstdint>
#include <string>

#include "registry/role_key.h"

namespace hub {

// The `tfx.role-activation.v1` envelope delivered to a holder.
struct ActivationEnvelope {
  RoleKey role_key;
  std::string role_key_wire;
  int64_t epoch = 0;
  int64_t activation_seq = 0;
  std::string activation_id;
  std::string charter_version;
  std::string holder_agent_id;
  std::string holder_cli;
  int64_t ack_deadline_ms = 0;
};
// The envelope as the JSON text a transport adapter types into a session.
std::string ActivationEnvelopeJson(const ActivationEnvelope& envelope);

// A probe pushed on a presence stream (hub.v1.RoleProbe): "are you there
// and able to take this role?", answered by a probe_reply frame.
struct RoleProbeEnvelope {
  std::string probe_id;  // UUIDv7, set by the presence registry
  RoleKey role_key;
  std::string role_key_wire;
  int64_t epoch = 0;
  std::string activation_id;
  int64_t deadline_ms = 0;  // reply before this; set by the registry
};

}  // namespace hub

#endif  // HUB_REGISTRY_ACTIVATION_ENVELOPE_H_
