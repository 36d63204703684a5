// HubServer: hubd's gRPC server, assembled once and shared by the binary and
// the in-process tests.
//
// It opens the store (migrating a triflux database in place), recovers
// presence, runs the registry's ticker, and serves the services, the health
// service (SERVING while up) and server reflection on one address. Shutdown
// is ordered: health goes NOT_SERVING, presence streams are fenced with
// HUB_SHUTTING_DOWN, in-flight unary calls get a grace to finish, leases are
// checkpointed, the store closes.
#ifndef HUB_HUB_SERVER_H_
#define HUB_HUB_SERVER_H_

#include <grpcpp/server.h>

#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "hub/blocking_pool.h"
#include "hub/cluster/change_hints.h"
#include "hub/cluster/membership_keeper.h"
#include "hub/cluster/message_router.h"
#include "hub/cluster/role_change_feed.h"
#include "hub/console/console_hints.h"
#include "hub/console/console_http.h"
#include "hub/console/console_model.h"
#include "hub/edge/admission.h"
#include "hub/edge/auth.h"
#include "hub/edge/call_gate.h"
#include "hub/edge/server_tls.h"
#include "hub/observability/hub_metrics.h"
#include "hub/observability/metrics_http.h"
#include "hub/services/admin_service.h"
#include "hub/services/hub_service.h"
#include "hub/services/job_service.h"
#include "hub/services/message_service.h"
#include "hub/services/presence_service.h"
#include "hub/services/reservation_service.h"
#include "hub/services/role_service.h"
#include "registry/activator.h"
#include "registry/claude_uds_adapter.h"
#include "registry/clock.h"
#include "registry/coordinator.h"
#include "registry/fleet_events.h"
#include "registry/job_changes.h"
#include "registry/job_notices.h"
#include "registry/jobs.h"
#include "registry/messaging.h"
#include "registry/presence.h"
#include "registry/reservation_end_fanout.h"
#include "registry/reservation_feed.h"
#include "registry/reservation_waits.h"
#include "registry/reservations.h"
#include "registry/role_change_fanout.h"
#include "registry/role_registry.h"
#include "storage/open_store.h"

namespace hub {

struct HubServerOptions {
  // host:port to listen on; port 0 picks a free port (see HubServer::port()).
  std::string listen = "127.0.0.1:27889";
  // A SQLite database file, created (with its directory) when missing;
  // while the server lives it holds "<db_path>.lock"
  // (storage/open_store.h) and a second server on the same file is
  // refused. Or a PostgreSQL database, `postgresql://...` (a libpq URI),
  // migrated on start and shareable by several hubs. Any other URL
  // (`scheme://...`, `file:...`) is refused.
  std::string db_path = "var/hub.sqlite";
  // What an acknowledged write survives (storage/open_store.h): SQLite's
  // synchronous FULL or NORMAL; PostgreSQL's synchronous_commit on or off.
  storage::Durability durability = storage::Durability::kPowerLoss;
  PresenceConfig presence;
  // HTTP/2 keepalive: the hub pings each connection this often and drops it
  // when a ping is not answered within the timeout, which ends its presence
  // streams (and starts their detach grace).
  absl::Duration keepalive_interval = absl::Seconds(5);
  absl::Duration keepalive_timeout = absl::Seconds(5);
  // HTTP/2 keepalive enforcement: a client may ping at most this often
  // while no call sends data; more frequent pings are strikes, and past
  // max_ping_strikes the connection is closed with GOAWAY
  // (ENHANCE_YOUR_CALM, "too_many_pings").
  absl::Duration min_client_ping_interval = absl::Seconds(1);
  int max_ping_strikes = 2;
  // Per-principal limits (request size, rate, streams, idle streams) and
  // who counts as a principal (unless set: LimitPrincipal, the token's
  // principal for a call with a valid token, else the peer host).
  CallLimits limits;
  PrincipalFn principal;
  // Message limits (payload size, pending per inbox, ...).
  MessagingConfig messaging;
  // Path reservation limits (docs/design/limits.md).
  ReservationLimits reservations;
  // Reservation changes kept in memory for WatchReservations' resume
  // (ReservationFeedOptions::kept_changes).
  int64_t reservation_changes_kept = 10'000;
  // Threads that wait for durable writes on behalf of unary calls: up to this
  // many writes can share one group commit.
  int write_threads = 64;
  // Threads on which Ask calls wait for their answer (up to 30 s each): at
  // most this many asks wait at once, the rest queue.
  int ask_threads = 16;
  // The activator: its settings and kill switches, and the threads its
  // probes and wakes run on.
  ActivatorOptions activator;
  int activator_threads = 8;
  // The claude-uds adapter's external command (triflux's `tfx-live`
  // interface). Without a command, claude-uds locators report
  // adapter_unavailable and only that adapter kind is disabled.
  ClaudeUdsAdapterOptions claude_uds;
  // How often the presence registry's Tick() runs (the activator's runs
  // every presence.sweep_interval).
  absl::Duration tick_interval = absl::Milliseconds(100);
  // Time source; nullptr means the real clock. Must outlive the server.
  const Clock* clock = nullptr;
  // Identity and authority (docs/design/auth.md): TLS (off when
  // tls.cert_file is empty), bearer tokens (off when auth.token_file is
  // empty: every caller is an anonymous admin). A non-loopback `listen`
  // needs both unless `insecure`.
  TlsOptions tls;
  AuthOptions auth;
  bool insecure = false;
  // host:port to serve Prometheus metrics on (GET /metrics); "" (default):
  // no metrics endpoint. Port 0 picks a free port (metrics_address()).
  // Served over TLS when `tls` is set; a non-loopback address needs TLS and
  // tokens as `listen` does, unless `insecure`.
  std::string metrics_listen;
  // The web console at / of the metrics listener (docs/design/console.md).
  bool console = true;
  // The seat among the hubs sharing a PostgreSQL database (unused on
  // SQLite: one hub per file).
  MembershipOptions membership;
};

class HubServer {
 public:
  // Opens the database and starts serving. Fails with a clear status when
  // the address cannot be bound (UNAVAILABLE, reason LISTEN_FAILED), db_path
  // is a URL (INVALID_ARGUMENT, DATABASE_URL_UNSUPPORTED), another process
  // holds the database (FAILED_PRECONDITION, DATABASE_LOCKED, naming it), the
  // database is unusable (the store's status, naming the file), the TLS or
  // token files are unusable (naming the file) or a non-loopback address
  // lacks TLS and tokens (FAILED_PRECONDITION, INSECURE_LISTEN_REFUSED).
  static absl::StatusOr<std::unique_ptr<HubServer>> Start(
      const HubServerOptions& options);

  ~HubServer();
  HubServer(const HubServer&) = delete;
  HubServer& operator=(const HubServer&) = delete;

  // The address actually bound, e.g. "127.0.0.1:41234".
  const std::string& address() const { return address_; }
  int port() const { return port_; }
  const HubIdentity& identity() const { return identity_; }
  PresenceRegistry* presence() { return presence_.get(); }
  RoleRegistry* roles() { return roles_.get(); }
  Activator* activator() { return activator_.get(); }
  Messaging* messaging() { return messaging_.get(); }
  CallGate* call_gate() { return gate_.get(); }
  Authority* authority() { return authority_.get(); }
  // The security part of the startup line (see SecuritySummary).
  const std::string& security() const { return security_; }
  // Re-reads the token file (SIGHUP); the old tokens stay on failure.
  absl::Status ReloadTokens() { return authority_->Reload(); }
  // Re-reads the TLS certificate, key and client CA (SIGHUP) for new
  // connections; the old ones stay on failure. OK without TLS.
  // The console's listener (--metrics_listen with TLS) re-reads its
  // certificate and key too.
  absl::Status ReloadTls() {
    absl::Status s = tls_ != nullptr ? tls_->Reload() : absl::OkStatus();
    if (metrics_http_ != nullptr) s.Update(metrics_http_->ReloadTls());
    return s;
  }
  // The TLS certificates served; null without TLS.
  ServerTls* tls() { return tls_.get(); }
  HubMetrics* metrics() { return metrics_.get(); }
  // The metrics endpoint's bound address; "" when it is off.
  std::string metrics_address() const {
    return metrics_http_ != nullptr ? metrics_http_->address() : "";
  }

  // Stops serving: in-flight calls get up to `grace` to finish, then are
  // cancelled. Idempotent; also done by the destructor.
  void Shutdown(absl::Duration grace = absl::Seconds(5));

 private:
  HubServer() = default;
  // Start's steps, in order. The database: opened, the hub's identity,
  // the token authority.
  absl::Status OpenDatabase(const HubServerOptions& options,
                            const Clock* clock);
  // Presence recovered, and over a shared database this hub's seat taken;
  // whether other hubs serve it.
  absl::StatusOr<bool> StartPresence(const HubServerOptions& options,
                                     const Clock* clock);
  // Roles recovered (unless other hubs serve), their registry, change feed
  // and fan-out, the activator; the recovered roles, ensured once serving.
  absl::StatusOr<storage::RecoveryResult> StartRoles(
      const HubServerOptions& options, const Clock* clock,
      bool other_hubs_live);
  // Path reservations, their feed, hints, waits and end fan-out; the
  // coordinator of what follows an agent that goes or arrives.
  absl::Status StartReservations(const HubServerOptions& options,
                                 const Clock* clock);
  // Messaging, cross-hub routing, the console, what follows the fleet's
  // events; messages that expired while the hub was down.
  absl::Status StartMessaging(const HubServerOptions& options,
                              const Clock* clock);
  // The gRPC services, the call gate and admission.
  absl::Status StartServices(const HubServerOptions& options,
                             const Clock* clock);
  // The listener, its interceptors and the services on it.
  absl::Status StartGrpc(const HubServerOptions& options,
                         std::shared_ptr<grpc::ServerCredentials> credentials);
  void RunTicker(absl::Duration interval, absl::Duration activator_interval);
  void EnsureRecoveredRoles(const std::vector<RoleRecord>& roles);
  // The role watch and scrape-time families of metrics_, and the HTTP
  // endpoint when `listen` is not empty.
  absl::Status StartMetrics(const HubServerOptions& options);
  // The console's model, fed by the registries' listeners and the logs.
  absl::Status StartConsole(const HubServerOptions& options,
                            const Clock* clock);
  // A role's candidates changed (written or removed): its console card.
  void CandidatesChanged(const std::string& wire);

  // Declared first: destroyed last, after everything that reports to it.
  std::unique_ptr<HubMetrics> metrics_;
  // The console (null when off): stopped in Shutdown, before what it reads.
  std::unique_ptr<console::ConsoleModel> console_model_;
  std::unique_ptr<console::ConsoleHttp> console_http_;
  // Hints to and from the consoles of the other hubs sharing the database
  // (null on a database this hub holds alone). After the model: destroyed
  // first.
  std::unique_ptr<console::ConsoleHints> console_hints_;
  int64_t log_observer_ = 0;
  HubIdentity identity_;
  std::string address_;
  int port_ = 0;
  // The database's note of its holder (SQLite's lock file; null on
  // PostgreSQL). Declared before store_: released only after the store has
  // closed.
  std::unique_ptr<storage::DatabaseHolderNote> db_holder_;
  std::unique_ptr<storage::Store> store_;
  std::unique_ptr<Authority> authority_;
  // Before server_: the certificates' private copy outlives the listener.
  std::unique_ptr<ServerTls> tls_;
  std::string security_;
  // What changed in the fleet, for the console, metrics, the log and the
  // router (registry/fleet_events.h). Before presence_ and messaging_,
  // which publish to it.
  FleetEvents events_;
  std::unique_ptr<PresenceRegistry> presence_;
  // After presence_ (it calls it): null unless hubs share the database.
  std::unique_ptr<MembershipKeeper> membership_;
  std::unique_ptr<BlockingPool> write_pool_;
  // Role changes from the store's change log (PostgreSQL), when it has
  // one. Declared before roles_, whose writes tell it; stopped in Shutdown
  // once no write is left.
  std::unique_ptr<RoleChangeFeed> role_feed_;
  std::unique_ptr<RoleRegistry> roles_;
  // Role changes for presence streams; its pool is declared after it, so
  // destroyed (drained) before it.
  std::unique_ptr<RoleChangeFanout> role_changes_;
  std::unique_ptr<BlockingPool> role_change_pool_;
  std::unique_ptr<PresenceStreamReach> reach_;
  std::unique_ptr<BlockingPool> activator_pool_;
  std::unique_ptr<Activator> activator_;
  // What follows an agent that goes or arrives (registry/coordinator.h).
  std::unique_ptr<Coordinator> coordinator_;
  std::unique_ptr<RoleServiceImpl> role_service_;
  std::unique_ptr<BlockingPool> ask_pool_;
  std::unique_ptr<Messaging> messaging_;
  // After messaging_ and presence_ (it calls both): null unless hubs share
  // the database.
  std::unique_ptr<MessageRouter> router_;
  std::unique_ptr<MessageServiceImpl> message_service_;
  std::unique_ptr<HubServiceImpl> hub_service_;
  std::unique_ptr<PresenceServiceImpl> presence_service_;
  std::unique_ptr<CallGate> gate_;
  std::unique_ptr<Admission> admission_;
  std::unique_ptr<AdminServiceImpl> admin_service_;
  // Before reservations_, whose writes kick them.
  std::unique_ptr<ReservationFeed> reservation_feed_;
  std::unique_ptr<ChangeHints> reservation_hints_;  // null on SQLite
  // Feeds metrics_'s hub_reservations_held.
  std::unique_ptr<ReservationFeed::Subscription> reservations_held_;
  // After the feed and presence_ (it uses both).
  std::unique_ptr<ReservationEndFanout> reservation_ends_;
  std::unique_ptr<ReservationBook> reservations_;
  // The store's jobs, telling events_ each committed change; before jobs_,
  // which writes through it.
  std::unique_ptr<JobChangeTap> job_changes_;
  std::unique_ptr<JobBook> jobs_;
  std::unique_ptr<JobNotices> job_notices_;
  // After reservations_ and the feed (it uses both).
  std::unique_ptr<ReservationWaits> reservation_waits_;
  std::unique_ptr<ReservationServiceImpl> reservation_service_;
  std::unique_ptr<JobServiceImpl> job_service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<RoleWatch> role_watch_;  // feeds metrics_
  std::unique_ptr<MetricsHttpServer> metrics_http_;
  // The ticker sleeps on ticker_wake_ until its next tick, the end of the
  // earliest detach grace, a grace that ends sooner starting, or shutdown.
  absl::Mutex ticker_mu_;
  absl::CondVar ticker_wake_;
  bool ticker_stop_ ABSL_GUARDED_BY(ticker_mu_) = false;
  bool grace_started_ ABSL_GUARDED_BY(ticker_mu_) = false;
  std::thread ticker_;
  bool shut_down_ = false;
};

}  // namespace hub

#endif  // HUB_HUB_SERVER_H_
