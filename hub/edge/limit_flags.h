// hubd's limit flags (docs/design/limits.md has the table): defined here so
// that hubd_main.cc only applies them.
#ifndef HUB_HUB_EDGE_LIMIT_FLAGS_H_
#define HUB_HUB_EDGE_LIMIT_FLAGS_H_

#include "absl/status/status.h"
#include "hub/server.h"

namespace hub {

// Copies every --max_* / rate / idle / ping flag into `options`; a value out
// of range is INVALID_ARGUMENT naming the flag.
absl::Status ApplyLimitFlags(HubServerOptions* options);

}  // namespace hub

#endif  // HUB_HUB_EDGE_LIMIT_FLAGS_H_
