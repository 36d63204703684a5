#include "hub/server.h"

#include <grpc/grpc.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>
#include <pthread.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <system_error>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "hub/console/fleet_rows.h"
#include "hub/observability/log.h"
#include "hub/observability/rpc_observer.h"
#include "hub/services/malformed_request.h"
#include "hub/version.h"
#include "registry/claude_uds_adapter.h"
#include "registry/tmux_adapter.h"
#include "registry/uuid.h"
#include "status/status.h"

namespace hub {
namespace {

// "host:port" with the port replaced by `port`.
std::string WithPort(absl::string_view listen, int port) {
  const size_t colon = listen.rfind(':');
  return absl::StrCat(listen.substr(0, colon), ":", port);
}

// Shared by the store (activation ids), the hub identity and the
// registries; it lives as long as the process.
UuidV7Generator* Ids() {
  static UuidV7Generator* ids = new UuidV7Generator(RealClock::Default());
  return ids;
}

}  // namespace

absl::StatusOr<std::unique_ptr<HubServer>> HubServer::Start(
    const HubServerOptions& options) {
  const Clock* clock =
      options.clock != nullptr ? options.clock : RealClock::Default();
  if (options.listen.rfind(':') == std::string::npos) {
    return InvalidArgumentError(
        "LISTEN_ADDRESS_INVALID",
        absl::StrCat("listen address must be host:port, got '", options.listen,
                     "'"));
  }
  if (absl::Status s = storage::CheckDatabaseName(options.db_path); !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckListenExposure(
          options.listen, !options.tls.cert_file.empty(),
          !options.auth.token_file.empty(), options.insecure);
      !s.ok()) {
    return s;
  }
  // The HTTP listener serves the console: off loopback, the same rule.
  if (!options.metrics_listen.empty()) {
    if (absl::Status s = CheckListenExposure(
            options.metrics_listen, !options.tls.cert_file.empty(),
            !options.auth.token_file.empty(), options.insecure);
        !s.ok()) {
      return WithMetadata(s, "flag", "metrics_listen");
    }
  }
  // Checked before anything is opened; the certificates are served from a
  // reloadable private copy (hub/edge/server_tls.h).
  std::unique_ptr<ServerTls> tls;
  std::shared_ptr<grpc::ServerCredentials> credentials =
      grpc::InsecureServerCredentials();
  if (absl::StatusOr<TlsFiles> files = ReadTlsFiles(options.tls); !files.ok()) {
    return files.status();
  } else if (!files->cert_pem.empty()) {
    absl::StatusOr<std::unique_ptr<ServerTls>> created =
        ServerTls::Create(options.tls);
    if (!created.ok()) return created.status();
    tls = std::move(*created);
    credentials = tls->credentials();
  }
  std::unique_ptr<HubServer> server(new HubServer());
  server->metrics_ = std::make_unique<HubMetrics>();
  server->tls_ = std::move(tls);
  if (absl::Status s = server->OpenDatabase(options, clock); !s.ok()) return s;
  absl::StatusOr<bool> other_hubs_live = server->StartPresence(options, clock);
  if (!other_hubs_live.ok()) return other_hubs_live.status();
  absl::StatusOr<storage::RecoveryResult> recovered =
      server->StartRoles(options, clock, *other_hubs_live);
  if (!recovered.ok()) return recovered.status();
  if (absl::Status s = server->StartReservations(options, clock); !s.ok()) {
    return s;
  }
  if (absl::Status s = server->StartMessaging(options, clock); !s.ok()) {
    return s;
  }
  if (absl::Status s = server->StartServices(options, clock); !s.ok()) {
    return s;
  }
  if (absl::Status s = server->StartGrpc(options, credentials); !s.ok()) {
    return s;
  }
  if (absl::Status s = server->StartMetrics(options); !s.ok()) {
    return s;
  }
  server->server_->GetHealthCheckService()->SetServingStatus(true);
  HubServer* raw = server.get();
  server->presence_->SetGraceWakeup([raw] {
    absl::MutexLock lock(&raw->ticker_mu_);
    raw->grace_started_ = true;
    raw->ticker_wake_.Signal();
  });
  server->ticker_ =
      std::thread([raw, interval = options.tick_interval,
                   activator_interval = options.presence.sweep_interval] {
        pthread_setname_np(pthread_self(), "hub-ticker");  // top -H, perf
        raw->RunTicker(interval, activator_interval);
      });
  server->EnsureRecoveredRoles(recovered->roles);
  return server;
}

absl::Status HubServer::OpenDatabase(const HubServerOptions& options,
                                     const Clock* clock) {
  HubMetrics* metrics = metrics_.get();
  UuidV7Generator* ids = Ids();
  const std::string hub_instance_id = ids->Next();
  storage::OpenStoreOptions open;
  open.database = options.db_path;
  open.durability = options.durability;
  open.hub_id = hub_instance_id;
  open.program = "hubd";
  open.address = options.listen;  // the bound port once it is known
  // A stalled transaction ends well within the seat's lease.
  open.idle_in_transaction_timeout = options.membership.lease / 2;
  open.new_id = [ids] { return ids->Next(); };
  open.now_ms = [clock] { return UnixMillis(clock->Now()); };
  open.on_group_committed = [metrics](int ops, absl::Duration took) {
    metrics->OnGroupCommitted(ops, took);
  };
  absl::StatusOr<storage::OpenedStore> opened = storage::OpenStore(open);
  if (!opened.ok()) return opened.status();
  db_holder_ = std::move(opened->holder);
  store_ = std::move(opened->store);
  const storage::StoreInfo info = store_->Info();
  identity_ = HubIdentity{hub_instance_id, info.store_type, info.db_path,
                          info.fingerprint, clock->Now()};
  absl::StatusOr<std::unique_ptr<Authority>> authority =
      Authority::Create(options.auth, &store_->agents());
  if (!authority.ok()) return authority.status();
  authority_ = std::move(*authority);
  security_ =
      SecuritySummary(options.listen, options.tls,
                      !options.auth.token_file.empty(), options.insecure);
  return absl::OkStatus();
}

absl::StatusOr<bool> HubServer::StartPresence(const HubServerOptions& options,
                                              const Clock* clock) {
  const std::string& hub_instance_id = identity_.hub_instance_id;
  presence_ = std::make_unique<PresenceRegistry>(
      &store_->agents(), store_->membership(), clock, options.presence,
      identity_.hub_instance_id, identity_.store_fingerprint);
  presence_->SetEvents(&events_);
  if (absl::Status s = presence_->Recover(); !s.ok()) return s;

  // Hubs sharing the database: take a seat before anything is written for
  // presence (every such write is fenced by it), and learn whether other
  // hubs are serving.
  bool other_hubs_live = false;
  if (storage::Membership* membership = store_->membership();
      membership != nullptr) {
    membership_ = std::make_unique<MembershipKeeper>(
        membership, presence_.get(), options.membership);
    if (absl::Status s = membership_->Start(options.listen); !s.ok()) {
      return s;
    }
    absl::StatusOr<std::vector<HubMember>> hubs = membership->ListHubs();
    if (!hubs.ok()) return hubs.status();
    for (const HubMember& h : *hubs) {
      if (h.hub_id != hub_instance_id && h.state == HubState::kLive &&
          h.lease_expires_ms > h.now_ms) {
        other_hubs_live = true;
      }
    }
    MembershipKeeper* keeper = membership_.get();
    presence_->SetAuthorityCheck([keeper] { return keeper->Serving().ok(); });
  }
  return other_hubs_live;
}

absl::StatusOr<storage::RecoveryResult> HubServer::StartRoles(
    const HubServerOptions& options, const Clock* clock, bool other_hubs_live) {
  HubMetrics* metrics = metrics_.get();
  UuidV7Generator* ids = Ids();
  const std::string& hub_instance_id = identity_.hub_instance_id;
  // Roles: recovery never restores `active` (TRIFLUX-HUB 5.7); every
  // recovered role is ensured again once the server runs. Not while other
  // hubs serve the database: their roles are theirs, not recovering, and a
  // dead hub's holders fail over through the takeover of its agents.
  absl::StatusOr<storage::RecoveryResult> recovered =
      other_hubs_live
          ? absl::StatusOr<storage::RecoveryResult>(storage::RecoveryResult{})
          : store_->roles().RecoverRoles(UnixMillis(clock->Now()));
  if (!recovered.ok()) return recovered.status();
  // Candidate exclusions follow the activator's policy (backoff, jitter,
  // quarantine).
  RoleRegistryOptions role_options;
  role_options.policy = options.activator.config;
  // Every decision of the transition kernel is counted; a refusal is logged.
  role_options.on_transition = [metrics](const RoleTransitionNote& note) {
    metrics->OnRoleTransition(note);
  };
  // A written candidate row is a candidate event: a role that waits for a
  // holder is ensured again (the activator exists by the time a call can
  // write one).
  role_options.on_candidate_written = [this](const std::string& wire,
                                             const std::string& agent_id) {
    // The role's card lists its candidates (the console exists before the
    // first call can write one): drawn again here, and on the other hubs.
    CandidatesChanged(wire);
    Activator* activator = activator_.get();
    activator_pool_->Schedule([activator, wire, agent_id] {
      activator->OnCandidateChanged(wire, agent_id);
    });
  };
  role_options.on_candidate_removed = [this](const std::string& wire,
                                             const std::string&) {
    CandidatesChanged(wire);
  };
  // A database several hubs share has a role change log: every hub's
  // changes reach this hub's watchers from it, in commit order, and this
  // hub's own writes only wake its follower and hint the other hubs.
  if (store_->roles().HasRoleChangeLog()) {
    RoleChangeFeedOptions feed_options;
    feed_options.signals = store_->signals();
    feed_options.hub_instance_id = hub_instance_id;
    role_feed_ = std::make_unique<RoleChangeFeed>(&store_->roles(),
                                                  std::move(feed_options));
    RoleChangeFeed* feed = role_feed_.get();
    role_options.publication = RolePublication::kChangeLog;
    role_options.on_role_committed = [feed] { feed->Committed(); };
  }
  roles_ =
      std::make_unique<RoleRegistry>(&store_->roles(), clock, role_options);
  if (role_feed_ != nullptr) {
    if (absl::Status s = role_feed_->Start(roles_.get()); !s.ok()) {
      return s;
    }
  }
  // Role changes reach the presence streams of their holders and candidates
  // from one thread of their own: in publication order, never on a writer's
  // thread.
  role_change_pool_ = std::make_unique<BlockingPool>(1);
  BlockingPool* role_change_pool = role_change_pool_.get();
  role_changes_ = std::make_unique<RoleChangeFanout>(
      roles_.get(), presence_.get(), &store_->roles(), ids,
      [role_change_pool](std::function<void()> work) {
        role_change_pool->Schedule(std::move(work));
      });
  if (absl::Status s = role_changes_->Start(); !s.ok()) return s;
  // Hubs sharing the database: a candidate held by another hub is reached
  // through it (the activator hands the flight over with a hint).
  reach_ = std::make_unique<PresenceStreamReach>(
      presence_.get(), store_->membership(), [this](const std::string& hub_id) {
        if (router_ != nullptr) router_->HandOverFlight(hub_id);
      });
  activator_pool_ = std::make_unique<BlockingPool>(options.activator_threads);
  ActivatorOptions activator_options = options.activator;
  BlockingPool* activator_pool = activator_pool_.get();
  // What a role's activation and a scope's closing do to its messages
  // (registry/coordinator.h).
  ConnectRolesToMessaging(activator_options,
                          [this] { return messaging_.get(); });
  activator_options.executor = [activator_pool](std::function<void()> work) {
    activator_pool->Schedule(std::move(work));
  };
  activator_ = std::make_unique<Activator>(
      roles_.get(), presence_.get(), reach_.get(), clock, activator_options);
  activator_->AddAdapter(std::make_unique<TmuxAdapter>());
  activator_->AddAdapter(
      std::make_unique<ClaudeUdsAdapter>(options.claude_uds));
  return recovered;
}

absl::Status HubServer::StartReservations(const HubServerOptions& options,
                                          const Clock* clock) {
  HubMetrics* metrics = metrics_.get();
  UuidV7Generator* ids = Ids();
  const std::string& hub_instance_id = identity_.hub_instance_id;
  Activator* activator = activator_.get();
  BlockingPool* activator_pool = activator_pool_.get();
  reservations_ = std::make_unique<ReservationBook>(
      &store_->reservations(), clock, options.reservations);
  ReservationBook* reservations = reservations_.get();
  reservations->SetObserver([metrics](ReservationEvent event, int64_t n) {
    metrics->OnReservations(event, n);
  });
  // Reservation changes reach watchers from the store's change log, every
  // hub's (reservations.md, "Watching"): this hub's commits kick its feed
  // at once; over a shared database they also hint the other hubs.
  ReservationFeedOptions feed_options;
  feed_options.kept_changes = options.reservation_changes_kept;
  feed_options.on_error = [](const absl::Status& status) {
    log::Warn("reservation_changes_unread",
              {{"reason", ReasonOf(status)}, {"message", status.message()}});
  };
  reservation_feed_ = std::make_unique<ReservationFeed>(
      &store_->reservations(), clock, std::move(feed_options));
  ReservationFeed* reservation_feed = reservation_feed_.get();
  if (store_->signals() != nullptr) {  // hubs may share it
    ChangeHintsOptions hints;
    hints.signals = store_->signals();
    hints.hub_instance_id = hub_instance_id;
    hints.channel = kReservationChangesChannel;
    hints.what = "reservation_change";
    reservation_hints_ = std::make_unique<ChangeHints>(hints);
  }
  ChangeHints* reservation_hints = reservation_hints_.get();
  reservations->SetOnCommitted([reservation_feed, reservation_hints] {
    reservation_feed->Kick();
    if (reservation_hints != nullptr) reservation_hints->Committed();
  });
  if (absl::Status s = reservation_feed->Start(); !s.ok()) return s;
  // hub_reservations_held follows every project's changes.
  {
    absl::StatusOr<std::unique_ptr<ReservationFeed::Subscription>> held =
        reservation_feed->Subscribe(
            {},
            [metrics](const storage::ReservationSnapshot& snapshot) {
              metrics->SeedReservations(snapshot);
            },
            [metrics](const storage::ReservationChange& change) {
              metrics->OnReservationChange(change);
            });
    if (!held.ok()) return held.status();
    reservations_held_ = std::move(*held);
  }
  // A holder whose reservation ends without its release is told on its
  // presence stream.
  reservation_ends_ = std::make_unique<ReservationEndFanout>(
      reservation_feed, presence_.get(), ids);
  if (absl::Status s = reservation_ends_->Start(); !s.ok()) return s;
  reservation_waits_ =
      std::make_unique<ReservationWaits>(reservations, reservation_feed, clock);
  reservation_waits_->SetObserver([metrics](const std::string& outcome) {
    metrics->reservation_waits->Add({outcome}, 1);
  });
  reservation_waits_->SetAttemptObserver(
      [metrics] { metrics->reservation_wait_attempts->Add({}, 1); });
  if (absl::Status s = reservation_waits_->Start(); !s.ok()) return s;
  if (reservation_hints != nullptr) {
    reservation_hints->Start([reservation_feed] { reservation_feed->Kick(); });
  }
  // Each committed job change is a fleet event (the console's jobs view).
  job_changes_ = std::make_unique<JobChangeTap>(
      &store_->jobs(), [events = &events_](const JobRecord& job) {
        events->Publish(JobChanged{job.job_id, job.project_id});
      });
  jobs_ = std::make_unique<JobBook>(job_changes_.get(), clock,
                                    [ids] { return ids->Next(); });
  // An agent that goes loses its job attempts, its roles and its
  // reservations; one that arrives is a candidate event
  // (registry/coordinator.h).
  coordinator_ = std::make_unique<Coordinator>(
      presence_.get(), activator, reservations, jobs_.get(),
      [activator_pool](std::function<void()> reaction) {
        activator_pool->Schedule(std::move(reaction));
      });
  coordinator_->Start();
  return absl::OkStatus();
}

absl::Status HubServer::StartMessaging(const HubServerOptions& options,
                                       const Clock* clock) {
  HubMetrics* metrics = metrics_.get();
  UuidV7Generator* ids = Ids();
  const std::string& hub_instance_id = identity_.hub_instance_id;
  Activator* activator = activator_.get();
  BlockingPool* activator_pool = activator_pool_.get();
  write_pool_ = std::make_unique<BlockingPool>(options.write_threads);
  ask_pool_ = std::make_unique<BlockingPool>(options.ask_threads);
  messaging_ = std::make_unique<Messaging>(&store_->messages(), presence_.get(),
                                           roles_.get(), activator, ids, clock,
                                           options.messaging);
  messaging_->SetEvents(&events_);
  // A job's changes reach its worker and supervisor as messages, sent off
  // the thread that made the change (docs/design/jobs.md, "Notices").
  job_notices_ = std::make_unique<JobNotices>(
      [messaging = messaging_.get()] { return messaging; });
  jobs_->SetObserver([notices = job_notices_.get(), pool = write_pool_.get()](
                         const JobRecord& job, JobEvent event,
                         const std::optional<JobLateResult>& late) {
    pool->Schedule(
        [notices, job, event, late] { notices->Send(job, event, late); });
  });
  // Hubs sharing the database: messages published here for agents attached
  // elsewhere are hinted to their hubs, and those published elsewhere for
  // agents attached here are pushed from here.
  if (storage::Membership* membership = store_->membership();
      membership != nullptr) {
    MessageRouterOptions router_options;
    router_options.signals = store_->signals();
    router_options.hub_instance_id = hub_instance_id;
    router_ = std::make_unique<MessageRouter>(&store_->messages(), membership,
                                              presence_.get(), messaging_.get(),
                                              clock, router_options);
    MessageRouter* router = router_.get();
    events_.Subscribe([router](const FleetEvent& event) {
      if (const auto* unpushed = std::get_if<MessagesUnpushed>(&event)) {
        router->Unpushed(unpushed->agent_ids);
      }
    });
    router->SetFlightListener([activator, activator_pool] {
      activator_pool->Schedule(
          [activator] { activator->ContinueHandedFlights(); });
    });
    router->Start();
  }
  if (absl::Status s = StartConsole(options, clock); !s.ok()) {
    return s;
  }
  events_.Subscribe([metrics](const FleetEvent& event) {
    if (const auto* dead = std::get_if<MessageDeadLettered>(&event)) {
      metrics->OnDeadLetter(dead->message, dead->transition);
    } else if (const auto* redriven = std::get_if<MessageRedriven>(&event)) {
      const MessageRecord& m = redriven->message;
      log::Info("message_redriven",
                {{"message_id", m.id},
                 {"from", m.from_agent},
                 {"to", m.to_agent},
                 {"role", m.role_key_wire.value_or("")},
                 {"by", redriven->by},
                 {"dead_letter_reason", redriven->dead_letter_reason},
                 {"recipients", absl::StrCat(redriven->recipients.size())},
                 {"pushed", absl::StrCat(redriven->pushed.size())}});
    }
  });
  // Messages that expired while the hub was down are dead-lettered first.
  if (absl::StatusOr<int> swept = messaging_->SweepExpired(); !swept.ok()) {
    return swept.status();
  }
  return absl::OkStatus();
}

absl::Status HubServer::StartServices(const HubServerOptions& options,
                                      const Clock* clock) {
  HubMetrics* metrics = metrics_.get();
  Activator* activator = activator_.get();
  ReservationFeed* reservation_feed = reservation_feed_.get();
  hub_service_ = std::make_unique<HubServiceImpl>(
      identity_, clock, presence_.get(), roles_.get());
  PresenceServiceOptions presence_options;
  presence_options.detach_grace = options.presence.detach_grace;
  presence_options.keepalive_interval = options.keepalive_interval;
  message_service_ = std::make_unique<MessageServiceImpl>(
      messaging_.get(), write_pool_.get(), ask_pool_.get());
  presence_service_ = std::make_unique<PresenceServiceImpl>(
      presence_.get(), clock, write_pool_.get(), presence_options,
      identity_.hub_instance_id, identity_.store_fingerprint);
  presence_service_->SetActivator(activator);
  presence_service_->SetMessaging(messaging_.get());
  presence_service_->SetMetrics(metrics);
  role_service_ =
      std::make_unique<RoleServiceImpl>(roles_.get(), clock, write_pool_.get());
  role_service_->SetActivator(activator);
  presence_service_->SetAuthority(authority_.get());
  role_service_->SetPresence(presence_.get());

  // Limits follow the token's principal once calls carry one, the peer host
  // otherwise (LimitPrincipal).
  const Authority* authority_for_limits = authority_.get();
  gate_ = std::make_unique<CallGate>(
      options.limits,
      options.principal
          ? options.principal
          : PrincipalFn([authority_for_limits](
                            const grpc::CallbackServerContext& context) {
              return LimitPrincipal(authority_for_limits, context);
            }));
  if (membership_ != nullptr) {
    MembershipKeeper* keeper = membership_.get();
    gate_->SetServingCheck([keeper] { return keeper->Serving(); });
  }
  absl::StatusOr<std::unique_ptr<Admission>> admission =
      Admission::Create(authority_.get(), gate_.get());
  if (!admission.ok()) return admission.status();
  admission_ = *std::move(admission);
  hub_service_->SetAdmission(admission_.get());
  presence_service_->SetAdmission(admission_.get());
  role_service_->SetAdmission(admission_.get());
  message_service_->SetAdmission(admission_.get());
  reservation_service_ = std::make_unique<ReservationServiceImpl>(
      reservations_.get(), write_pool_.get());
  reservation_service_->SetAdmission(admission_.get());
  reservation_service_->SetFeed(reservation_feed);
  reservation_service_->SetWaits(reservation_waits_.get());
  job_service_ =
      std::make_unique<JobServiceImpl>(jobs_.get(), write_pool_.get());
  job_service_->SetAdmission(admission_.get());
  return absl::OkStatus();
}

absl::Status HubServer::StartGrpc(
    const HubServerOptions& options,
    std::shared_ptr<grpc::ServerCredentials> credentials) {
  HubMetrics* metrics = metrics_.get();
  // Both are process-wide switches read when a builder is created.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();

  grpc::ServerBuilder builder;
  // gRPC sets SO_REUSEPORT by default, which would let a second hubd share
  // the port silently. One hub per address: turn it off.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // A presence stream is the liveness signal, so dead peers must be found
  // fast: ping every connection, even idle ones, and let clients ping too.
  builder.AddChannelArgument(
      GRPC_ARG_KEEPALIVE_TIME_MS,
      static_cast<int>(absl::ToInt64Milliseconds(options.keepalive_interval)));
  builder.AddChannelArgument(
      GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
      static_cast<int>(absl::ToInt64Milliseconds(options.keepalive_timeout)));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  builder.AddChannelArgument(
      GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
      static_cast<int>(
          absl::ToInt64Milliseconds(options.min_client_ping_interval)));
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES,
                             options.max_ping_strikes);
  // gRPC refuses messages above twice the hub's own request limit before
  // parsing them; between the two the hub answers with its reason code.
  if (options.limits.max_request_bytes > 0) {
    builder.SetMaxReceiveMessageSize(static_cast<int>(std::min<int64_t>(
        2 * options.limits.max_request_bytes, int64_t{1} << 30)));
  }
  builder.AddListeningPort(options.listen, credentials, &port_);
  std::vector<
      std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
      interceptors;
  // First, so that the observer counts the status it rewrites.
  interceptors.push_back(std::make_unique<MalformedRequestFactory>());
  interceptors.push_back(std::make_unique<RpcObserverFactory>(metrics));
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  builder.RegisterService(hub_service_.get());
  builder.RegisterService(presence_service_.get());
  builder.RegisterService(role_service_.get());
  builder.RegisterService(message_service_.get());
  builder.RegisterService(reservation_service_.get());
  builder.RegisterService(job_service_.get());
  admin_service_ = std::make_unique<AdminServiceImpl>(
      store_.get(), write_pool_.get(), admission_.get());
  builder.RegisterService(admin_service_.get());
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port_ == 0) {
    server_.reset();
    return UnavailableError("LISTEN_FAILED",
                            absl::StrCat("cannot listen on ", options.listen,
                                         " (address in use or not available)"));
  }
  address_ = WithPort(options.listen, port_);
  if (db_holder_ != nullptr) {  // SQLite: a lock file names this hub
    // A refused second hub names the address clients actually reach.
    if (absl::Status s = db_holder_->SetAddress(address_); !s.ok()) {
      log::Warn("database_lock_holder_not_recorded",
                {{"message", s.message()}});
    }
  }
  return absl::OkStatus();
}

void HubServer::RunTicker(absl::Duration interval,
                          absl::Duration activator_interval) {
  absl::Time next_tick = absl::Now() + interval;
  absl::Time next_activator_tick = absl::Now() + activator_interval;
  while (true) {
    absl::Duration wait = next_tick - absl::Now();
    // A detach grace that ends before the next tick wakes the ticker then:
    // a holder's failover starts when its grace ends, not up to a tick
    // later (docs/design/presence.md, "Streams").
    if (std::optional<absl::Duration> grace = presence_->TimeToNextGraceEnd();
        grace.has_value() && *grace < wait) {
      wait = std::max(*grace, absl::Milliseconds(1));
    }
    {
      absl::MutexLock lock(&ticker_mu_);
      const absl::Time until = absl::Now() + wait;
      while (!ticker_stop_ && !grace_started_ &&
             !ticker_wake_.WaitWithDeadline(&ticker_mu_, until)) {
      }
      if (ticker_stop_) return;
      if (grace_started_) {  // a grace that ends sooner: sleep again
        grace_started_ = false;
        continue;
      }
    }
    if (membership_ != nullptr) membership_->Check();
    presence_->Tick();
    if (absl::Now() < next_tick) continue;  // woken for a grace only
    messaging_->Tick();
    reservations_->Sweep();  // at most every 5 s
    jobs_->Sweep();          // a read, and a write only when one is due
    // A hub that lost its seat decides nothing for roles until it is back.
    if (absl::Now() >= next_activator_tick &&
        (membership_ == nullptr || membership_->Serving().ok())) {
      activator_->Tick();
      next_activator_tick = absl::Now() + activator_interval;
    }
    next_tick = absl::Now() + interval;
  }
}

void HubServer::EnsureRecoveredRoles(const std::vector<RoleRecord>& roles) {
  for (const RoleRecord& role : roles) {
    Activator* activator = activator_.get();
    const std::string wire = role.role_key_wire;
    const int64_t epoch = role.epoch;
    activator_pool_->Schedule([activator, wire, epoch] {
      EnsureRequest request;
      request.role.wire = wire;
      request.trigger = "restart_recovery";
      request.cause_id = absl::StrCat("restart:", wire, ":", epoch);
      // A failure on one role is contained: the others and the hub go on.
      absl::StatusOr<EnsureReceipt> receipt = activator->Ensure(request);
      if (!receipt.ok()) {
        log::Warn("role_recovery_degraded",
                  {{"role", wire},
                   {"reason", ReasonOf(receipt.status())},
                   {"message", receipt.status().message()}});
      }
    });
  }
}

void HubServer::CandidatesChanged(const std::string& wire) {
  // The role's card lists its candidates (the console exists before the
  // first call can write one): drawn again here, and on the other hubs.
  if (console_model_ != nullptr) console_model_->RoleChanged(wire);
  if (console_hints_ != nullptr) console_hints_->RoleChanged(wire);
}

absl::Status HubServer::StartConsole(const HubServerOptions& options,
                                     const Clock* clock) {
  const bool console_on = options.console && !options.metrics_listen.empty();
  storage::Membership* membership = store_->membership();
  if (!console_on && membership == nullptr) return absl::OkStatus();
  console::ConsoleModel* console = nullptr;
  if (console_on) {
    console::ConsoleSources sources;
    sources.presence = presence_.get();
    sources.roles = roles_.get();
    sources.activator = activator_.get();
    sources.messaging = messaging_.get();
    sources.store = store_.get();
    sources.reservations = reservations_.get();
    sources.reservation_feed = reservation_feed_.get();
    sources.clock = clock;
    sources.hub_instance_id = identity_.hub_instance_id;
    console_model_ = std::make_unique<console::ConsoleModel>(sources);
    console = console_model_.get();
  }
  // Sharing the database: this hub's agent and message changes are hinted
  // to the other hubs' consoles (whether or not it has one), and theirs to
  // this one's.
  if (membership != nullptr) {
    console::ConsoleHintsOptions hints;
    hints.signals = store_->signals();
    hints.hub_instance_id = identity_.hub_instance_id;
    hints.on_send_failed = [](const absl::Status& status) {
      log::Warn("console_hints_unsent",
                {{"reason", ReasonOf(status)}, {"message", status.message()}});
    };
    hints.on_caught_up = [] { log::Info("console_hints_reset_sent", {}); };
    console_hints_ = std::make_unique<console::ConsoleHints>(console, hints);
  }
  if (console != nullptr) {
    events_.Subscribe([console](const FleetEvent& event) {
      console::ShowFleetEvent(event, *console);
    });
  }
  if (console::ConsoleHints* hints = console_hints_.get(); hints != nullptr) {
    events_.Subscribe([hints](const FleetEvent& event) {
      console::ShowFleetEvent(event, *hints);
    });
  }
  if (console == nullptr) return absl::OkStatus();
  log_observer_ = log::AddObserver(
      [console](log::Level level, absl::string_view event,
                const std::vector<std::pair<std::string, std::string>>& f) {
        console->LogEvent(log::LevelName(level), event, f);
      });
  if (absl::Status s = console_model_->Start(); !s.ok()) return s;
  console::ConsoleHttpOptions http;
  http.tls = !options.tls.cert_file.empty();
  console_http_ = std::make_unique<console::ConsoleHttp>(
      console, activator_.get(), authority_.get(), clock, http);
  return absl::OkStatus();
}

absl::Status HubServer::StartMetrics(const HubServerOptions& options) {
  const std::string& listen = options.metrics_listen;
  HubMetrics* metrics = metrics_.get();
  PresenceRegistry* presence = presence_.get();
  storage::Store* store = store_.get();
  // Every committed role change, from the rows as they are now on.
  absl::StatusOr<RoleWatchStart> watch = roles_->Watch(
      RoleWatchFilter{},
      [metrics](const RoleEvent& event) { metrics->OnRoleEvent(event); });
  if (!watch.ok()) return watch.status();
  role_watch_ = std::move(watch->watch);
  metrics->SeedRoles(watch->snapshot);

  MetricRegistry& registry = metrics->registry();
  registry.AddCallback(
      "hub_build_info", "Always 1; the labels name the running hub.", "gauge",
      {"version", "hub_instance_id"}, [id = identity_.hub_instance_id] {
        return std::vector<MetricSample>{{{kHubVersion, id}, 1}};
      });
  registry.AddCallback(
      "hub_start_time_seconds", "When this hub started, in Unix seconds.",
      "gauge", {}, [started = identity_.started_at] {
        return std::vector<MetricSample>{
            {{}, absl::ToDoubleSeconds(started - absl::UnixEpoch())}};
      });
  registry.AddCallback("hub_agents", "Registered agents by presence status.",
                       "gauge", {"status"}, [presence] {
                         const PresenceCounts c = presence->Counts();
                         return std::vector<MetricSample>{
                             {{"online"}, static_cast<double>(c.online)},
                             {{"stale"}, static_cast<double>(c.stale)},
                             {{"offline"}, static_cast<double>(c.offline)}};
                       });
  registry.AddCallback(
      "hub_presence_streams_attached",
      "Agents with a presence stream attached now.", "gauge", {}, [presence] {
        return std::vector<MetricSample>{
            {{}, static_cast<double>(presence->Counts().open_streams)}};
      });
  registry.AddCallback("hub_roles", "Roles by state.", "gauge", {"state"},
                       [metrics] { return metrics->RolesByState(); });
  registry.AddCallback(
      "hub_reservations_held",
      "Live path reservations by project, over every hub sharing the "
      "database (kept from the change feed; one whose TTL passed counts "
      "until the sweep ends it).",
      "gauge", {"project_id"},
      [metrics] { return metrics->ReservationsHeld(); });
  registry.AddCallback(
      "hub_store_writes_total",
      "Write operations committed (or failed) through the group commit.",
      "counter", {}, [store] {
        return std::vector<MetricSample>{
            {{}, static_cast<double>(store->write_stats().ops)}};
      });
  Messaging* messaging = messaging_.get();
  registry.AddCallback(
      "hub_message_ack_requests_total",
      "Acknowledgements (Ack calls and message_ack frames) that went to a "
      "write.",
      "counter", {}, [messaging] {
        return std::vector<MetricSample>{
            {{}, static_cast<double>(messaging->acks().requests())}};
      });
  registry.AddCallback(
      "hub_message_ack_writes_total",
      "Writes that carried them: an agent's acknowledgements that come while "
      "two of its earlier ones are written go together, as one write.",
      "counter", {}, [messaging] {
        return std::vector<MetricSample>{
            {{}, static_cast<double>(messaging->acks().writes())}};
      });
  registry.AddCallback(
      "hub_store_commit_groups_total", "Group commits (transactions) run.",
      "counter", {}, [store] {
        return std::vector<MetricSample>{
            {{}, static_cast<double>(store->write_stats().groups)}};
      });
  registry.AddCallback(
      "hub_store_commit_replays_total",
      "Group commits run a second time, a savepoint per operation, because an "
      "operation failed after writing.",
      "counter", {}, [store] {
        return std::vector<MetricSample>{
            {{}, static_cast<double>(store->write_stats().replays)}};
      });
  registry.AddCallback(
      "hub_store_lock_retries_total",
      "Operations run again in a later group because the database refused "
      "them, or their group's COMMIT, for a lock conflict (a deadlock or a "
      "serialization failure with another hub's transaction).",
      "counter", {}, [store] {
        return std::vector<MetricSample>{
            {{}, static_cast<double>(store->write_stats().lock_retries)}};
      });
  if (listen.empty()) return absl::OkStatus();
  HttpServeOptions serve;
  serve.tls_cert_file = options.tls.cert_file;
  serve.tls_key_file = options.tls.key_file;
  if (console_http_ != nullptr) {
    console::ConsoleHttp* console = console_http_.get();
    serve.install = [console](httplib::Server* http) {
      console->Install(http);
    };
    serve.threads = console->threads_needed();
  }
  absl::StatusOr<std::unique_ptr<MetricsHttpServer>> http =
      MetricsHttpServer::Start(listen, &registry, serve);
  if (!http.ok()) return http.status();
  metrics_http_ = std::move(*http);
  return absl::OkStatus();
}

HubServer::~HubServer() { Shutdown(absl::ZeroDuration()); }

void HubServer::Shutdown(absl::Duration grace) {
  if (shut_down_) return;
  shut_down_ = true;
  if (log_observer_ != 0) log::RemoveObserver(log_observer_);
  log_observer_ = 0;
  // No hint from other hubs reaches the console from now on.
  if (console_hints_ != nullptr) console_hints_->Stop();
  // Open event streams end now rather than at their next keepalive.
  if (console_model_ != nullptr) console_model_->feed()->Close();
  metrics_http_.reset();  // no scrape reads what is torn down below
  if (console_model_ != nullptr) console_model_->Stop();
  if (server_ != nullptr) {
    server_->GetHealthCheckService()->Shutdown();
    role_service_->Shutdown();
    reservation_service_->Shutdown();
    // Waiting reserves answer HUB_SHUTTING_DOWN now and leave their queues.
    reservation_waits_->Stop();
    messaging_->Shutdown();  // waiting asks answer now
    presence_->Shutdown();
    server_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
    server_->Wait();
  }
  if (router_ != nullptr) router_->Stop();
  // Its seat given up: the other hubs take over what it held at once.
  if (membership_ != nullptr) membership_->Stop(/*leave=*/true);
  if (role_watch_ != nullptr) role_watch_->Cancel();
  if (role_changes_ != nullptr) role_changes_->Stop();
  role_change_pool_.reset();  // pushes what it holds (to ended streams)
  if (ticker_.joinable()) {
    presence_->SetGraceWakeup(nullptr);
    {
      absl::MutexLock lock(&ticker_mu_);
      ticker_stop_ = true;
      ticker_wake_.Signal();
    }
    ticker_.join();
  }
  activator_pool_.reset();  // finishes the flights it holds
  ask_pool_.reset();
  write_pool_.reset();  // finishes the writes it holds
  // Every role write is done; nothing is watching any more.
  if (role_feed_ != nullptr) role_feed_->Stop();
  if (reservation_waits_ != nullptr) reservation_waits_->Stop();
  if (reservation_hints_ != nullptr) reservation_hints_->Stop();
  if (reservation_feed_ != nullptr) reservation_feed_->Stop();
  if (store_ != nullptr) {
    const storage::WriteStats stats = store_->write_stats();
    log::Info("store_closing", {{"writes", stats.ops},
                                {"groups", stats.groups},
                                {"replays", stats.replays},
                                {"lock_retries", stats.lock_retries},
                                {"led_groups", stats.led_groups},
                                {"leader_stalls", stats.leader_stalls}});
  }
}

}  // namespace hub
