#include "hub/console/console_sessions.h"

#include <openssl/rand.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace hub::console {

std::string RandomHex32() {
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) {
    // No randomness: no session may be guessable, so no session at all.
    std::fprintf(stderr, "hubd: console: RAND_bytes failed\n");
    std::abort();
  }
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(bytes), sizeof(bytes)));
}

ConsoleSessions::ConsoleSessions(const Authority* authority, const Clock* clock,
                                 absl::Duration lifetime, size_t max_sessions)
    : authority_(authority),
      clock_(clock),
      lifetime_(lifetime),
      max_sessions_(std::max<size_t>(1, max_sessions)) {}

absl::StatusOr<ConsoleSession> ConsoleSessions::Login(
    const std::string& token) {
  const std::string header = absl::StrCat("Bearer ", token);
  absl::StatusOr<Principal> principal =
      authority_->AuthenticateValues({header});
  if (!principal.ok()) return principal.status();
  ConsoleSession session;
  session.id = RandomHex32();
  session.csrf = RandomHex32();
  session.principal = *principal;
  const absl::Time now = clock_->Now();
  absl::MutexLock lock(&mu_);
  // Expired sessions go first; past the cap, the oldest.
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    if (it->second.expires <= now) {
      sessions_.erase(it++);
    } else {
      ++it;
    }
  }
  if (sessions_.size() >= max_sessions_) {
    auto oldest = std::min_element(sessions_.begin(), sessions_.end(),
                                   [](const auto& a, const auto& b) {
                                     return a.second.created < b.second.created;
                                   });
    sessions_.erase(oldest);
  }
  sessions_[session.id] = Entry{token, session.csrf, now + lifetime_, now};
  return session;
}

std::optional<ConsoleSession> ConsoleSessions::Find(const std::string& id) {
  if (id.empty()) return std::nullopt;
  Entry entry;
  {
    absl::MutexLock lock(&mu_);
    auto it = sessions_.find(id);
    if (it == sessions_.end()) return std::nullopt;
    if (it->second.expires <= clock_->Now()) {
      sessions_.erase(it);
      return std::nullopt;
    }
    entry = it->second;
  }
  const std::string header = absl::StrCat("Bearer ", entry.token);
  absl::StatusOr<Principal> principal =
      authority_->AuthenticateValues({header});
  if (!principal.ok()) {
    Logout(id);
    return std::nullopt;
  }
  return ConsoleSession{id, entry.csrf, *principal};
}

void ConsoleSessions::Logout(const std::string& id) {
  absl::MutexLock lock(&mu_);
  sessions_.erase(id);
}

}  // namespace hub::console
