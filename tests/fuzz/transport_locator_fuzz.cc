// Fuzz target: the transport locator normalizer (registry/transport_locator.h)
// through NormalizeRegistrationIdentity, as a registration reaches it.
//
// Input: one control byte (cli codex or claude; explicit host_id or not;
// locators as JSON text or as a parsed value; lease 10 s or 2 h), then the
// locator list as JSON text. Every input is accepted or refused with
// INVALID_ARGUMENT and a reason; an accepted list, stored and parsed back,
// gives the same stored form.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "nlohmann/json.hpp"
#include "registry/transport_locator.h"
#include "status/status.h"

namespace {

constexpr int64_t kNowMs = 1'700'000'000'000;

void Check(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "transport_locator_fuzz: %s\n", what);
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t control = data[0];
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  hub::IdentityInput input;
  input.cli = (control & 1) != 0 ? "codex" : "claude";
  if ((control & 2) != 0) input.host_id = "hst_abc";
  input.heartbeat_ttl_ms = (control & 8) != 0 ? 7'200'000 : 10'000;
  input.now_ms = kNowMs;
  if ((control & 4) != 0) {
    nlohmann::json value = nlohmann::json::parse(text, nullptr, false);
    if (value.is_discarded()) return 0;
    input.transport_locators = std::move(value);
  } else {
    input.transport_locators_json = text;
  }
  absl::StatusOr<hub::RegistrationIdentity> identity =
      hub::NormalizeRegistrationIdentity(input);
  if (!identity.ok()) {
    Check(identity.status().code() == absl::StatusCode::kInvalidArgument,
          "a refused list is not INVALID_ARGUMENT");
    Check(!hub::ReasonOf(identity.status()).empty(),
          "a refused list has no reason");
    return 0;
  }
  Check(identity->locators.has_value(), "accepted locators are missing");
  const std::string stored = hub::TransportLocatorsToJson(*identity->locators);
  hub::LocatorContext context;
  context.cli = input.cli;
  context.host_id = identity->host_id;
  context.now_ms = kNowMs;
  context.heartbeat_ttl_ms = input.heartbeat_ttl_ms;
  absl::StatusOr<std::vector<hub::TransportLocator>> again =
      hub::ParseTransportLocatorsJson(stored, context);
  Check(again.ok(), "the stored form of accepted locators is refused");
  Check(hub::TransportLocatorsToJson(*again) == stored,
        "the stored form does not round-trip");
  return 0;
}
