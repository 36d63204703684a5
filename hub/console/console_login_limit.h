// LoginLimiter: failed console logins per client address (a token guessed
// over and over from one place), in bounded memory.
//
// An address that failed `max_failures` times within `window` is refused
// (HTTP 429, Retry-After) until that window ends, whatever it sends, a
// right token included: so a guesser learns nothing from the answers while
// it is refused. A successful login forgets the address's failures. At most
// `max_addresses` addresses are tracked; a new one then takes the place of
// the one whose window ends first (ended windows first). Thread-safe.
#ifndef HUB_HUB_CONSOLE_CONSOLE_LOGIN_LIMIT_H_
#define HUB_HUB_CONSOLE_CONSOLE_LOGIN_LIMIT_H_

#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "registry/clock.h"

namespace hub::console {

struct LoginLimitOptions {
  int max_failures = 10;
  absl::Duration window = absl::Minutes(1);
  size_t max_addresses = 10000;
};

class LoginLimiter {
 public:
  // `clock` must outlive the limiter.
  LoginLimiter(const Clock* clock, LoginLimitOptions options = {});

  // How long `address` is still refused; zero when it may try.
  absl::Duration RetryAfter(const std::string& address);
  // A login from `address` failed (a token that is not the file's).
  void Failed(const std::string& address);
  // A login from `address` succeeded.
  void Succeeded(const std::string& address);
  size_t tracked() const;

 private:
  struct Entry {
    int failures = 0;
    absl::Time window_end;
  };
  void MakeRoom() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Clock* const clock_;
  const LoginLimitOptions options_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hub::console

#endif  // HUB_HUB_CONSOLE_CONSOLE_LOGIN_LIMIT_H_
