#include <ostream>

#include "records/agent.h"
#include "records/hub.h"
#include "records/job.h"
#include "records/message.h"
#include "records/role.h"

namespace hub {

std::ostream& operator<<(std::ostream& out, AgentStatus value) {
  return out << AgentStatusName(value);
}
std::ostream& operator<<(std::ostream& out, RoleState value) {
  return out << RoleStateName(value);
}
std::ostream& operator<<(std::ostream& out, MessageStatus value) {
  return out << MessageStatusName(value);
}
std::ostream& operator<<(std::ostream& out, HubState value) {
  return out << HubStateName(value);
}

std::ostream& operator<<(std::ostream& out, JobState value) {
  return out << JobStateName(value);
}

}  // namespace hub
