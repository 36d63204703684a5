// A message as pushed to one recipient over its presence stream: the message
// row, that recipient's inbox row and, for role backlog, the activation it
// was handed to (the fence). Plain data shared by presence and messaging.
#ifndef HUB_REGISTRY_MESSAGE_DELIVERY_H_
#define HUB_REGISTRY_MESSAGE_DELIVERY_H_

#include <cstdint>
#include <optional>
#include <string>

#include "storage/store.h"

namespace hub {

struct MessageDelivery {
  MessageRecord message;
  InboxRecord inbox;  // the recipient is inbox.agent_id
  std::optional<int64_t> role_epoch;
  std::optional<std::string> activation_id;
};

}  // namespace hub

#endif  // HUB_REGISTRY_MESSAGE_DELIVERY_H_
