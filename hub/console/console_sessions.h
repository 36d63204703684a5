// ConsoleSessions: the console's logins, held server-side.
//
// A login checks an operator's token against the hub's Authority and keeps
// it here, under a random session id that the browser holds in an HttpOnly,
// SameSite=Strict cookie; the token never travels again, and never in a
// URL. Every request re-authenticates the kept token, so a token removed
// from the token file ends its sessions at once. Each session also has a
// random CSRF token that state-changing requests must echo in a header.
// Sessions expire after a fixed lifetime. Thread-safe.
#ifndef HUB_HUB_CONSOLE_CONSOLE_SESSIONS_H_
#define HUB_HUB_CONSOLE_CONSOLE_SESSIONS_H_

#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "hub/edge/auth.h"
#include "registry/clock.h"

namespace hub::console {

struct ConsoleSession {
  std::string id;    // 256 random bits, hex
  std::string csrf;  // 256 random bits, hex
  Principal principal;
};

class ConsoleSessions {
 public:
  // `authority` and `clock` must outlive the sessions. At most
  // `max_sessions` live at once (the oldest is dropped for a new one).
  ConsoleSessions(const Authority* authority, const Clock* clock,
                  absl::Duration lifetime = absl::Hours(12),
                  size_t max_sessions = 1000);

  // Whether logins need a token (the hub has a token file).
  bool tokens_required() const { return authority_->enabled(); }
  // Authenticates `token` (UNAUTHENTICATED when unknown or malformed) and
  // opens a session for its principal. Without a token file, any login
  // (the token ignored) is the anonymous admin, as on the gRPC API.
  absl::StatusOr<ConsoleSession> Login(const std::string& token);
  // The live session with this id, its principal authenticated afresh;
  // nullopt when unknown, expired or its token no longer authenticates
  // (then it is forgotten).
  std::optional<ConsoleSession> Find(const std::string& id);
  void Logout(const std::string& id);

 private:
  struct Entry {
    std::string token;
    std::string csrf;
    absl::Time expires;
    absl::Time created;
  };

  const Authority* const authority_;
  const Clock* const clock_;
  const absl::Duration lifetime_;
  const size_t max_sessions_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> sessions_ ABSL_GUARDED_BY(mu_);
};

// 32 random bytes (OpenSSL's RAND_bytes) as 64 hex digits.
std::string RandomHex32();

}  // namespace hub::console

#endif  // HUB_HUB_CONSOLE_CONSOLE_SESSIONS_H_
