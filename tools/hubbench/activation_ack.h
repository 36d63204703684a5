// The activation ACK an agent sends when it takes a role offered on its
// presence stream: the envelope's fences echoed back, charter acknowledged.
#ifndef TOOLS_HUBBENCH_ACTIVATION_ACK_H_
#define TOOLS_HUBBENCH_ACTIVATION_ACK_H_

#include "hub/v1/role_activation.pb.h"

namespace hubbench {

inline void FillActivationAck(const hub::v1::RoleActivation& a,
                              hub::v1::RoleActivationAck* ack) {
  ack->set_schema("tfx.role-activation-ack.v1");
  ack->set_activation_id(a.activation_id());
  ack->set_role_key_wire(a.role_key_wire());
  ack->set_epoch(a.epoch());
  ack->set_activation_seq(a.activation_seq());
  ack->set_holder_agent_id(a.holder_agent_id());
  ack->set_reachable(true);
  ack->mutable_charter_ack()->set_role_key_wire(a.role_key_wire());
  ack->mutable_charter_ack()->set_epoch(a.epoch());
  ack->mutable_charter_ack()->set_charter_version(a.charter_version());
}

}  // namespace hubbench

#endif  // TOOLS_HUBBENCH_ACTIVATION_ACK_H_
