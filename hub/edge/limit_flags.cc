#include "hub/edge/limit_flags.h"

#include <cstdint>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

// Defaults are the library defaults (hub/edge/call_gate.h, registry/presence.h,
// registry/messaging.h, hub/server.h); docs/design/limits.md lists them.
ABSL_FLAG(int64_t, max_request_bytes, 2 * 1024 * 1024,
          "largest request message, serialized, in bytes (LIMIT_EXCEEDED "
          "max_request_bytes); gRPC refuses more than twice this unparsed");
ABSL_FLAG(int64_t, max_payload_bytes, 1024 * 1024,
          "largest message payload (JSON text) in bytes");
ABSL_FLAG(int32_t, max_locators_per_agent, 16,
          "transport locators one registration may carry");
ABSL_FLAG(int32_t, max_topics_per_agent, 64,
          "topics one registration may subscribe to");
ABSL_FLAG(int32_t, max_capabilities_per_agent, 64,
          "capabilities one registration may declare");
ABSL_FLAG(int64_t, max_metadata_bytes, 64 * 1024,
          "largest registration metadata (JSON text) in bytes");
ABSL_FLAG(int64_t, max_streams_per_principal, 20000,
          "open Attach + WatchRoles streams per principal (a valid token's "
          "principal; the peer host for calls without one); 0 = unlimited");
ABSL_FLAG(int64_t, max_pending_per_inbox, 10000,
          "unacknowledged messages an agent may have; a publish that would "
          "exceed it is refused whole");
ABSL_FLAG(int64_t, max_reservations_per_agent, 256,
          "live path reservations one agent may hold in one project; 0 = "
          "unlimited");
ABSL_FLAG(int64_t, max_reservations_per_project, 100000,
          "path reservations one project may hold; 0 = unlimited");
ABSL_FLAG(int64_t, max_patterns_per_reservation, 64,
          "path patterns of one reservation (RESERVATION_TOO_MANY_PATTERNS)");
ABSL_FLAG(double, requests_per_second, 100000,
          "sustained calls (and stream starts) per second per principal, a "
          "token bucket; 0 = unlimited");
ABSL_FLAG(int64_t, request_burst, 200000,
          "token bucket size: calls a principal may make at once");
ABSL_FLAG(absl::Duration, idle_stream_timeout, absl::Hours(3),
          "a presence stream whose client sent nothing for this long is ended "
          "(LIMIT_EXCEEDED idle_stream_timeout_ms); 0 = never");
ABSL_FLAG(absl::Duration, min_client_ping_interval, absl::Seconds(1),
          "HTTP/2 keepalive enforcement: the shortest interval between client "
          "pings without data; faster pings are strikes");
ABSL_FLAG(int32_t, max_ping_strikes, 2,
          "too-frequent client pings tolerated before the connection gets "
          "GOAWAY (too_many_pings); 0 = none");

namespace hub {
namespace {

absl::Status OutOfRange(absl::string_view flag, absl::string_view rule) {
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag, " must be ", rule));
}

}  // namespace

absl::Status ApplyLimitFlags(HubServerOptions* options) {
  const int64_t request_bytes = absl::GetFlag(FLAGS_max_request_bytes);
  if (request_bytes < 1024 || request_bytes > (int64_t{512} << 20)) {
    return OutOfRange("max_request_bytes", "within 1 KiB .. 512 MiB");
  }
  const int64_t payload_bytes = absl::GetFlag(FLAGS_max_payload_bytes);
  if (payload_bytes < 2 || payload_bytes > request_bytes) {
    return OutOfRange("max_payload_bytes",
                      "at least 2 and at most --max_request_bytes");
  }
  for (const auto& [name, value] :
       {std::pair<absl::string_view, int64_t>{
            "max_locators_per_agent",
            absl::GetFlag(FLAGS_max_locators_per_agent)},
        {"max_topics_per_agent", absl::GetFlag(FLAGS_max_topics_per_agent)},
        {"max_capabilities_per_agent",
         absl::GetFlag(FLAGS_max_capabilities_per_agent)},
        {"max_metadata_bytes", absl::GetFlag(FLAGS_max_metadata_bytes)},
        {"max_pending_per_inbox", absl::GetFlag(FLAGS_max_pending_per_inbox)},
        {"request_burst", absl::GetFlag(FLAGS_request_burst)}}) {
    if (value < 1 || value > (int64_t{1} << 30)) {
      return OutOfRange(name, "within 1 .. 2^30");
    }
  }
  for (const auto& [name, value] :
       {std::pair<absl::string_view, int64_t>{
            "max_reservations_per_agent",
            absl::GetFlag(FLAGS_max_reservations_per_agent)},
        {"max_reservations_per_project",
         absl::GetFlag(FLAGS_max_reservations_per_project)}}) {
    if (value < 0 || value > (int64_t{1} << 30)) {
      return OutOfRange(name, "within 0 .. 2^30");
    }
  }
  const int64_t patterns = absl::GetFlag(FLAGS_max_patterns_per_reservation);
  if (patterns < 1 || patterns > 10000) {
    return OutOfRange("max_patterns_per_reservation", "within 1 .. 10000");
  }
  options->reservations.max_per_agent =
      absl::GetFlag(FLAGS_max_reservations_per_agent);
  options->reservations.max_per_project =
      absl::GetFlag(FLAGS_max_reservations_per_project);
  options->reservations.max_patterns = patterns;
  if (absl::GetFlag(FLAGS_max_streams_per_principal) < 0) {
    return OutOfRange("max_streams_per_principal", "0 or more");
  }
  if (!(absl::GetFlag(FLAGS_requests_per_second) >= 0)) {
    return OutOfRange("requests_per_second", "0 or more");
  }
  if (absl::GetFlag(FLAGS_idle_stream_timeout) < absl::ZeroDuration()) {
    return OutOfRange("idle_stream_timeout", "0 or more");
  }
  const absl::Duration ping = absl::GetFlag(FLAGS_min_client_ping_interval);
  if (ping < absl::Milliseconds(1) || ping > absl::Hours(1)) {
    return OutOfRange("min_client_ping_interval", "within 1ms .. 1h");
  }
  if (absl::GetFlag(FLAGS_max_ping_strikes) < 0) {
    return OutOfRange("max_ping_strikes", "0 or more");
  }
  options->limits.max_request_bytes = request_bytes;
  options->limits.requests_per_second =
      absl::GetFlag(FLAGS_requests_per_second);
  options->limits.request_burst = absl::GetFlag(FLAGS_request_burst);
  options->limits.max_streams_per_principal =
      absl::GetFlag(FLAGS_max_streams_per_principal);
  options->limits.idle_stream_timeout =
      absl::GetFlag(FLAGS_idle_stream_timeout);
  options->messaging.max_payload_bytes = static_cast<size_t>(payload_bytes);
  options->messaging.max_pending_per_inbox =
      absl::GetFlag(FLAGS_max_pending_per_inbox);
  options->presence.max_locators_per_agent =
      absl::GetFlag(FLAGS_max_locators_per_agent);
  options->presence.max_topics_per_agent =
      absl::GetFlag(FLAGS_max_topics_per_agent);
  options->presence.max_capabilities_per_agent =
      absl::GetFlag(FLAGS_max_capabilities_per_agent);
  options->presence.max_metadata_bytes =
      static_cast<size_t>(absl::GetFlag(FLAGS_max_metadata_bytes));
  options->min_client_ping_interval = ping;
  options->max_ping_strikes = absl::GetFlag(FLAGS_max_ping_strikes);
  return absl::OkStatus();
}

}  // namespace hub
