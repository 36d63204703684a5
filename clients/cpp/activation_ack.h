// The activation ACK an agent sends when it takes a role offered on its
// presence stream (a RoleActivation event): the envelope's fences echoed
// back, reachable, and the charter acknowledged. One definition for the
// client's PresenceSession, hubbench's agents and the tests.
#ifndef HUB_CLIENTS_CPP_ACTIVATION_ACK_H_
#define HUB_CLIENTS_CPP_ACTIVATION_ACK_H_

#include "hub/v1/role_activation.pb.h"

namespace hub::client {

inline constexpr char kActivationAckSchema[] = "tfx.role-activation-ack.v1";

// Fills `ack` to accept `activation`.
inline void FillAcceptingAck(const hub::v1::RoleActivation& activation,
                             hub::v1::RoleActivationAck* ack) {
  ack->set_schema(kActivationAckSchema);
  ack->set_activation_id(activation.activation_id());
  ack->set_role_key_wire(activation.role_key_wire());
  ack->set_epoch(activation.epoch());
  ack->set_activation_seq(activation.activation_seq());
  ack->set_holder_agent_id(activation.holder_agent_id());
  ack->set_reachable(true);
  hub::v1::CharterAck* charter = ack->mutable_charter_ack();
  charter->set_role_key_wire(activation.role_key_wire());
  charter->set_epoch(activation.epoch());
  charter->set_charter_version(activation.charter_version());
}

}  // namespace hub::client

#endif  // HUB_CLIENTS_CPP_ACTIVATION_ACK_H_
