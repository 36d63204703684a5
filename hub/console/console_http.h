// ConsoleHttp: the console's HTTP surface on hubd's HTTP listener (the one
// serving /metrics): the page and its assets, the JSON views, the login, the
// Server-Sent Events stream of changes and the operator actions
// (docs/design/console.md).
//
// Responsible for sessions and CSRF, for scoping every view and change to
// the session's projects, for the same authority checks as the gRPC API on
// actions, and for the security headers every response carries (a strict
// Content-Security-Policy: scripts and styles from this origin only, no
// inline code, no eval). Not responsible for listening or TLS
// (MetricsHttpServer) nor for what the views hold (ConsoleModel).
#ifndef HUB_HUB_CONSOLE_CONSOLE_HTTP_H_
#define HUB_HUB_CONSOLE_CONSOLE_HTTP_H_

#include <atomic>
#include <string>

#include "absl/time/time.h"
#include "hub/console/console_login_limit.h"
#include "hub/console/console_model.h"
#include "hub/console/console_sessions.h"
#include "hub/edge/auth.h"
#include "nlohmann/json.hpp"
#include "registry/activator.h"
#include "registry/role_key.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace hub::console {

struct ConsoleHttpOptions {
  // The listener serves TLS: session cookies are Secure.
  bool tls = false;
  absl::Duration session_lifetime = absl::Hours(12);
  // Event streams open at once; more are refused (503) until one ends.
  int max_event_streams = 8;
  // A comment line on an idle event stream this often, so that proxies and
  // the browser see it alive.
  absl::Duration stream_keepalive = absl::Seconds(15);
  // How often an open event stream checks that its session still stands
  // (logged out, expired, its token removed from the token file: the
  // stream ends).
  absl::Duration session_check_interval = absl::Seconds(1);
  // Failed token logins allowed per client address (then 429 with
  // Retry-After until the window ends).
  LoginLimitOptions login_limit;
};

class ConsoleHttp {
 public:
  // Everything must outlive the console (and the HTTP server it is
  // installed on).
  ConsoleHttp(ConsoleModel* model, Activator* activator,
              const Authority* authority, const Clock* clock,
              ConsoleHttpOptions options);
  ConsoleHttp(const ConsoleHttp&) = delete;
  ConsoleHttp& operator=(const ConsoleHttp&) = delete;

  // Adds the console's routes and headers to `server`.
  void Install(httplib::Server* server);
  // Worker threads the server needs for the console: every event stream
  // holds one while it is open.
  int threads_needed() const { return options_.max_event_streams + 4; }

 private:
  std::optional<ConsoleSession> SessionOf(const httplib::Request& request);
  bool HostAllowed(const httplib::Request& request) const;
  // The session of a state-changing request: its CSRF header, its origin
  // and its JSON body checked. Writes the refusal into `response`.
  std::optional<ConsoleSession> WriteSession(const httplib::Request& request,
                                             httplib::Response& response);
  void Session(const httplib::Request& request, httplib::Response& response);
  void Login(const httplib::Request& request, httplib::Response& response);
  void Logout(const httplib::Request& request, httplib::Response& response);
  void View(const httplib::Request& request, httplib::Response& response,
            const std::string& which);
  void Stream(const httplib::Request& request, httplib::Response& response);
  // An operator action on one role: the session (with its CSRF token), the
  // body's "wire", and the gRPC call's authority (an operator or admin
  // token of the role's project). Writes the refusal into `response`.
  struct RoleAction {
    nlohmann::json body;
    std::string wire;
    RoleKey key;
    std::string principal;  // "anonymous" without tokens
  };
  std::optional<RoleAction> OperatorOnRole(const httplib::Request& request,
                                           httplib::Response& response,
                                           absl::string_view what);
  void Ensure(const httplib::Request& request, httplib::Response& response);
  void CloseScope(const httplib::Request& request, httplib::Response& response);
  // An operator action on the thing the body's "id" names: the session
  // (with its CSRF token) and an operator or admin token. Writes the refusal
  // into `response`.
  struct IdAction {
    std::string id;
    Principal principal;
    std::string by;  // the principal's name, "anonymous" without tokens
  };
  std::optional<IdAction> OperatorOnId(const httplib::Request& request,
                                       httplib::Response& response,
                                       absl::string_view what,
                                       absl::string_view id_of);
  // RedriveDeadLetter of the body's "id", by an operator or admin session,
  // within its projects (Messaging's scope rule, as the gRPC call).
  void Redrive(const httplib::Request& request, httplib::Response& response);
  // ForceReleaseReservation of the body's "id", by an operator or admin
  // session whose projects hold the reservation's.
  void ReleaseReservation(const httplib::Request& request,
                          httplib::Response& response);
  std::string Cookie(const std::string& value, bool expire) const;

  ConsoleModel* const model_;
  Activator* const activator_;
  const Clock* const clock_;
  const ConsoleHttpOptions options_;
  ConsoleSessions sessions_;
  LoginLimiter login_limiter_;
  std::atomic<int> open_streams_{0};
};

}  // namespace hub::console

#endif  // HUB_HUB_CONSOLE_CONSOLE_HTTP_H_
