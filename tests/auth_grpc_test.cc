// Identity and authority through gRPC against an in-process HubServer: TLS
// and mutual TLS handshakes with a throw-away PKI (tests/make_test_pki.sh),
// bearer-token failures and their reasons, principal-bound agents, operator
// rights, the activation ACK's principal check, token hot reload and the
// non-loopback rule.
#include <functional>
#include <vector>

#include "tests/auth_grpc_fixture.h"

namespace hub::auth_grpc {
namespace {

TEST_F(AuthGrpcTest, TlsHandshakeSucceedsWithTheRightCaAndFailsWithAWrongOne) {
  Start(/*tls=*/true);
  Connect(Tls("ca"));
  grpc::Status ok = Status(kAlice);
  EXPECT_TRUE(ok.ok()) << ok.error_message();
  Connect(Tls("other_ca"));
  EXPECT_EQ(Status(kAlice).error_code(), grpc::StatusCode::UNAVAILABLE);
  Connect(grpc::InsecureChannelCredentials());
  EXPECT_EQ(Status(kAlice).error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(AuthGrpcTest, ReloadedCertificatesServeNewConnections) {
  // The hub serves copies that are then replaced in place.
  const std::string dir = TmpDir() + "/rotate";
  auto install = [&](const std::string& cert, const std::string& key,
                     const std::string& ca) {
    std::ofstream(dir + "/server.pem", std::ios::trunc) << Pki(cert);
    std::ofstream(dir + "/server.key", std::ios::trunc) << Pki(key);
    std::ofstream(dir + "/ca.pem", std::ios::trunc) << Pki(ca);
  };
  ASSERT_EQ(std::system(("mkdir -p '" + dir + "'").c_str()), 0);
  install("server.pem", "server.key", "ca.pem");
  Start(/*tls=*/true, /*mtls=*/true, dir);
  Connect(Tls("ca", "client"));
  ASSERT_TRUE(Status(kAlice).ok());
  Connect(Tls("other_ca", "other_client"));
  EXPECT_EQ(Status(kAlice).error_code(), grpc::StatusCode::UNAVAILABLE);

  // A server certificate and a client CA of another authority.
  install("other_server.pem", "other_server.key", "other_ca.pem");
  absl::Status reloaded = server_->ReloadTls();
  ASSERT_TRUE(reloaded.ok()) << reloaded;
  EXPECT_EQ(server_->tls()->generation(), 2);
  // gRPC's watcher picks the new set up within its refresh interval.
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  grpc::Status now;
  do {
    Connect(Tls("other_ca", "other_client"));
    now = Status(kAlice);
    if (!now.ok()) absl::SleepFor(absl::Milliseconds(100));
  } while (!now.ok() && absl::Now() < deadline);
  EXPECT_TRUE(now.ok()) << now.error_message();
  Connect(Tls("ca", "client"));
  EXPECT_EQ(Status(kAlice).error_code(), grpc::StatusCode::UNAVAILABLE);

  // A key that is not the certificate's is refused; the set in force stays.
  install("other_server.pem", "server.key", "other_ca.pem");
  absl::Status refused = server_->ReloadTls();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("is not the key of"), std::string::npos);
  EXPECT_EQ(server_->tls()->generation(), 2);
  absl::SleepFor(absl::Seconds(ServerTls::kRefreshSeconds) +
                 absl::Milliseconds(300));
  Connect(Tls("other_ca", "other_client"));
  grpc::Status still = Status(kAlice);
  EXPECT_TRUE(still.ok()) << still.error_message();
}

TEST_F(AuthGrpcTest, MutualTlsRequiresAClientCertificateFromTheClientCa) {
  Start(/*tls=*/true, /*mtls=*/true);
  Connect(Tls("ca"));
  EXPECT_EQ(Status(kAlice).error_code(), grpc::StatusCode::UNAVAILABLE);
  Connect(Tls("ca", "other_client"));
  EXPECT_EQ(Status(kAlice).error_code(), grpc::StatusCode::UNAVAILABLE);
  Connect(Tls("ca", "client"));
  grpc::Status ok = Status(kAlice);
  EXPECT_TRUE(ok.ok()) << ok.error_message();
  // TLS does not replace the token.
  EXPECT_EQ(Status("").error_code(), grpc::StatusCode::UNAUTHENTICATED);
}

TEST_F(AuthGrpcTest, EachAuthenticationFailureHasItsStatusAndReason) {
  Start(/*tls=*/false);
  grpc::Status none = Status("");
  EXPECT_EQ(none.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Reason(none), "PRINCIPAL_REQUIRED");
  grpc::Status unknown = Status("no-such-token-0000000");
  EXPECT_EQ(unknown.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Reason(unknown), "UNAUTHENTICATED");
  auto basic = As("");
  basic->AddMetadata("authorization", "Basic YWxpY2U6cHc=");
  hub::v1::GetStatusResponse response;
  grpc::Status malformed =
      hub_->GetStatus(basic.get(), hub::v1::GetStatusRequest(), &response);
  EXPECT_EQ(malformed.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Reason(malformed), "UNAUTHENTICATED");
  EXPECT_TRUE(Status(kAlice).ok());

  // Streams too: the presence stream and WatchRoles end at once.
  Stream stream = Attach("", "agent-a", 1);
  EXPECT_FALSE(stream.attached);
  EXPECT_EQ(stream.status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Reason(stream.status), "PRINCIPAL_REQUIRED");
  auto watch_context = As("bad-token-000000000000");
  auto watch =
      roles_->WatchRoles(watch_context.get(), hub::v1::WatchRolesRequest());
  hub::v1::WatchRolesResponse change;
  while (watch->Read(&change)) {
  }
  grpc::Status watched = watch->Finish();
  EXPECT_EQ(watched.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Reason(watched), "UNAUTHENTICATED");
}

TEST_F(AuthGrpcTest, APrincipalActsOnlyAsTheAgentsItOwns) {
  Start(/*tls=*/false);
  int64_t generation = 0;
  ASSERT_TRUE(Register(kAlice, "agent-a", kProject, &generation).ok());
  ASSERT_TRUE(Register(kBob, "agent-b").ok());

  grpc::Status steal = Register(kBob, "agent-a");
  EXPECT_EQ(steal.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Reason(steal), "PERMISSION_DENIED");
  EXPECT_EQ(testing::ErrorInfoOf(steal).metadata().at("agent_id"), "agent-a");
  grpc::Status beat = Heartbeat(kBob, "agent-a");
  EXPECT_EQ(beat.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(Heartbeat(kAlice, "agent-a").ok());
  // Even an operator does not own what it did not register.
  EXPECT_EQ(Heartbeat(kOps, "agent-a").error_code(),
            grpc::StatusCode::PERMISSION_DENIED);

  Stream foreign = Attach(kBob, "agent-a", generation);
  EXPECT_FALSE(foreign.attached);
  EXPECT_EQ(foreign.status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  Stream own = Attach(kAlice, "agent-a", generation);
  EXPECT_TRUE(own.attached);
  own.context->TryCancel();

  hub::v1::AckRequest ack;
  ack.set_agent_id("agent-a");
  ack.add_message_ids("msg-1");
  hub::v1::AckResponse acked;
  EXPECT_EQ(messages_->Ack(As(kBob).get(), ack, &acked).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  hub::v1::PublishRequest publish;
  publish.set_from_agent_id("agent-a");
  publish.set_to("agent-b");
  publish.mutable_payload();
  hub::v1::PublishResponse published;
  EXPECT_EQ(
      messages_->Publish(As(kBob).get(), publish, &published).error_code(),
      grpc::StatusCode::PERMISSION_DENIED);

  hub::v1::DeregisterRequest deregister;
  deregister.set_agent_id("agent-a");
  hub::v1::DeregisterResponse gone;
  EXPECT_EQ(
      presence_->Deregister(As(kBob).get(), deregister, &gone).error_code(),
      grpc::StatusCode::PERMISSION_DENIED);
  // Ownership survives a deregistration: re-registering stays Alice's.
  grpc::Status removed =
      presence_->Deregister(As(kAdmin).get(), deregister, &gone);
  EXPECT_TRUE(removed.ok()) << removed.error_message();
  EXPECT_EQ(Register(kBob, "agent-a").error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(Register(kAlice, "agent-a").ok());
}

TEST_F(AuthGrpcTest, RegistrationIsLimitedToTheTokensProjects) {
  Start(/*tls=*/false);
  grpc::Status foreign = Register(kCarol, "agent-c", kProject);
  EXPECT_EQ(foreign.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Reason(foreign), "PROJECT_SCOPE_MISMATCH");
  EXPECT_TRUE(Register(kCarol, "agent-c", kOtherProject).ok());
  // The refused attempt claimed nothing: Alice can still take the id.
  grpc::Status refused = Register(kCarol, "agent-x", kProject);
  EXPECT_EQ(Reason(refused), "PROJECT_SCOPE_MISMATCH");
  EXPECT_TRUE(Register(kAlice, "agent-x", kProject).ok());
}

TEST_F(AuthGrpcTest, ARefusedRegistrationClaimsNoAgentId) {
  Start(/*tls=*/false);
  auto valid = [] {
    hub::v1::RegisterAgentRequest request;
    request.set_agent_id("agent-free");
    request.set_cli(hub::v1::AGENT_CLI_CLAUDE);
    request.set_project_id(kProject);
    return request;
  };
  struct Refusal {
    const char* what;
    grpc::StatusCode code;
    std::function<void(hub::v1::RegisterAgentRequest*)> spoil;
  };
  const std::vector<Refusal> refusals = {
      {"a 5 s heartbeat ttl", grpc::StatusCode::INVALID_ARGUMENT,
       [](hub::v1::RegisterAgentRequest* r) {
         r->mutable_heartbeat_ttl()->set_seconds(5);
       }},
      {"no cli", grpc::StatusCode::INVALID_ARGUMENT,
       [](hub::v1::RegisterAgentRequest* r) {
         r->set_cli(hub::v1::AGENT_CLI_UNSPECIFIED);
       }},
      {"a bad topic", grpc::StatusCode::INVALID_ARGUMENT,
       [](hub::v1::RegisterAgentRequest* r) { r->add_topics("bad topic!"); }},
      {"a bad session id", grpc::StatusCode::INVALID_ARGUMENT,
       [](hub::v1::RegisterAgentRequest* r) {
         r->set_session_id(std::string(300, 'x'));
       }},
      {"65 topics", grpc::StatusCode::RESOURCE_EXHAUSTED,
       [](hub::v1::RegisterAgentRequest* r) {
         for (int i = 0; i < 65; ++i) r->add_topics(absl::StrCat("t", i));
       }},
  };
  for (const Refusal& refusal : refusals) {
    hub::v1::RegisterAgentRequest request = valid();
    refusal.spoil(&request);
    hub::v1::RegisterAgentResponse response;
    grpc::Status s =
        presence_->RegisterAgent(As(kAlice).get(), request, &response);
    EXPECT_EQ(s.error_code(), refusal.code) << refusal.what;
  }
  // Nothing was written, the claim included: another principal takes the
  // id, durably its own from then on.
  hub::v1::GetAgentRequest get;
  get.set_agent_id("agent-free");
  hub::v1::GetAgentResponse agent;
  EXPECT_EQ(presence_->GetAgent(As(kAdmin).get(), get, &agent).error_code(),
            grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(Register(kBob, "agent-free").ok());
  EXPECT_EQ(Register(kAlice, "agent-free").error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
}

TEST_F(AuthGrpcTest, OnlyAnAdminMayBackUpTheStore) {
  Start(/*tls=*/false);
  auto backup = [&](const std::string& token) {
    auto context = As(token);
    auto reader =
        admin_->BackupStore(context.get(), hub::v1::BackupStoreRequest());
    hub::v1::BackupStoreResponse chunk;
    int64_t chunks = 0;
    while (reader->Read(&chunk)) ++chunks;
    grpc::Status s = reader->Finish();
    return std::make_pair(s, chunks);
  };
  for (const char* token : {kAlice, kOps}) {
    auto [s, chunks] = backup(token);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
    EXPECT_EQ(Reason(s), "PERMISSION_DENIED");
    EXPECT_EQ(chunks, 0);
  }
  auto [s, chunks] = backup(kAdmin);
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_GT(chunks, 0);
}

TEST_F(AuthGrpcTest, ClosingALeadScopeNeedsAnOperatorOfItsProject) {
  Start(/*tls=*/false);
  hub::v1::CloseRoleScopeRequest close;
  close.mutable_role_key()->set_project_id(kProject);
  close.mutable_role_key()->set_kind(hub::v1::ROLE_KIND_LEAD);
  close.mutable_role_key()->set_scope_id("scp_CCCCCCCCCCCCCCCCCCCCCC");
  close.set_reason("done");
  hub::v1::CloseRoleScopeResponse closed;
  grpc::Status s = roles_->CloseRoleScope(As("").get(), close, &closed);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Reason(s), "PRINCIPAL_REQUIRED");
  s = roles_->CloseRoleScope(As(kAlice).get(), close, &closed);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Reason(s), "PERMISSION_DENIED");
  s = roles_->CloseRoleScope(As(kOtherOps).get(), close, &closed);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Reason(s), "PROJECT_SCOPE_MISMATCH");
  // None of the refused calls closed it: an operator of the project does,
  // and the record names its principal.
  s = roles_->CloseRoleScope(As(kOps).get(), close, &closed);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_FALSE(closed.already_closed());
  EXPECT_EQ(closed.closed().closed_by(), "ops");
  s = roles_->CloseRoleScope(As(kAdmin).get(), close, &closed);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(closed.already_closed());
  EXPECT_EQ(closed.closed().closed_by(), "ops");
}

TEST_F(AuthGrpcTest, OperatorOnlyRpcsRefuseAgentTokens) {
  Start(/*tls=*/false);
  ASSERT_TRUE(Register(kAlice, "agent-a").ok());
  hub::v1::ReserveRoleRequest reserve;
  *reserve.mutable_role_key() = Cto();
  hub::v1::ReserveRoleResponse reserved;
  grpc::Status s = roles_->ReserveRole(As(kAlice).get(), reserve, &reserved);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Reason(s), "PERMISSION_DENIED");

  hub::v1::CompareAndSetRoleRequest cas;
  *cas.mutable_role_key() = Cto();
  hub::v1::CompareAndSetRoleResponse cased;
  EXPECT_EQ(
      roles_->CompareAndSetRole(As(kAlice).get(), cas, &cased).error_code(),
      grpc::StatusCode::PERMISSION_DENIED);

  // An agent's own candidacy and elections asked for it are allowed
  // (auth_candidacy_grpc_test.cc); reporting probes is not.
  hub::v1::ReportCandidateProbeRequest probe;
  *probe.mutable_role_key() = Cto();
  probe.set_agent_id("agent-a");
  hub::v1::ReportCandidateProbeResponse probed;
  EXPECT_EQ(roles_->ReportCandidateProbe(As(kAlice).get(), probe, &probed)
                .error_code(),
            grpc::StatusCode::PERMISSION_DENIED);

  // An operator of another project is refused by project, not by kind.
  grpc::Status elsewhere =
      roles_->ReserveRole(As(kOtherOps).get(), reserve, &reserved);
  EXPECT_EQ(elsewhere.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Reason(elsewhere), "PROJECT_SCOPE_MISMATCH");

  // Operators and admins may; reads need only a token.
  s = roles_->ReserveRole(As(kOps).get(), reserve, &reserved);
  EXPECT_TRUE(s.ok()) << s.error_message();
  hub::v1::UpsertRoleCandidateRequest upsert;
  *upsert.mutable_role_key() = Cto();
  upsert.set_agent_id("agent-a");
  hub::v1::UpsertRoleCandidateResponse upserted;
  s = roles_->UpsertRoleCandidate(As(kAdmin).get(), upsert, &upserted);
  EXPECT_TRUE(s.ok()) << s.error_message();
  hub::v1::GetRoleRequest get;
  *get.mutable_role_key() = Cto();
  hub::v1::GetRoleResponse got;
  EXPECT_TRUE(roles_->GetRole(As(kAlice).get(), get, &got).ok());
}

TEST_F(AuthGrpcTest, AnActivationAckIsAcceptedOnlyFromTheHoldersPrincipal) {
  Start(/*tls=*/false);
  int64_t generation = 0;
  ASSERT_TRUE(Register(kAlice, "agent-a", kProject, &generation).ok());
  Stream alice = Attach(kAlice, "agent-a", generation);
  ASSERT_TRUE(alice.attached);
  hub::v1::UpsertRoleCandidateRequest upsert;
  *upsert.mutable_role_key() = Cto();
  upsert.set_agent_id("agent-a");
  hub::v1::UpsertRoleCandidateResponse upserted;
  ASSERT_TRUE(
      roles_->UpsertRoleCandidate(As(kOps).get(), upsert, &upserted).ok());
  hub::v1::EnsureRoleRequest ensure;
  *ensure.mutable_role_key() = Cto();
  ensure.set_trigger(hub::v1::ENSURE_ROLE_TRIGGER_MANUAL);
  ensure.set_cause_id("test");
  hub::v1::EnsureRoleResponse ensured;
  grpc::Status s = roles_->EnsureRole(As(kOps).get(), ensure, &ensured);
  ASSERT_TRUE(s.ok()) << s.error_message();

  AttachResponse frame;
  hub::v1::RoleActivation activation;
  while (alice.stream->Read(&frame)) {
    if (frame.event().has_role_probe()) {  // ready to take the role
      AttachRequest reply;
      reply.mutable_probe_reply()->set_probe_id(
          frame.event().role_probe().probe_id());
      reply.mutable_probe_reply()->set_ready(true);
      ASSERT_TRUE(alice.stream->Write(reply));
    }
    if (frame.event().has_role_activation()) {
      activation = frame.event().role_activation();
      break;
    }
  }
  ASSERT_EQ(activation.holder_agent_id(), "agent-a");
  ASSERT_TRUE(Register(kBob, "agent-b").ok());
  hub::v1::AckRoleActivationRequest ack;
  ack.set_agent_id("agent-a");
  hub::v1::RoleActivationAck* body = ack.mutable_ack();
  body->set_schema("tfx.role-activation-ack.v1");
  body->set_activation_id(activation.activation_id());
  body->set_role_key_wire(activation.role_key_wire());
  body->set_epoch(activation.epoch());
  body->set_activation_seq(activation.activation_seq());
  body->set_holder_agent_id("agent-a");
  body->set_reachable(true);
  body->mutable_charter_ack()->set_role_key_wire(activation.role_key_wire());
  body->mutable_charter_ack()->set_epoch(activation.epoch());
  body->mutable_charter_ack()->set_charter_version(
      activation.charter_version());
  hub::v1::AckRoleActivationResponse acked;

  // Bob names Alice's agent: refused before the activator sees it.
  s = roles_->AckRoleActivation(As(kBob).get(), ack, &acked);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Reason(s), "PERMISSION_DENIED");
  // Even an operator or admin cannot ACK for the holder.
  EXPECT_EQ(
      roles_->AckRoleActivation(As(kAdmin).get(), ack, &acked).error_code(),
      grpc::StatusCode::PERMISSION_DENIED);
  // Bob as his own agent passes the principal check and meets the holder
  // check.
  ack.set_agent_id("agent-b");
  s = roles_->AckRoleActivation(As(kBob).get(), ack, &acked);
  EXPECT_EQ(Reason(s), "HOLDER_MISMATCH");
  // The holder's own principal is accepted.
  ack.set_agent_id("agent-a");
  s = roles_->AckRoleActivation(As(kAlice).get(), ack, &acked);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(acked.result().role().state(), hub::v1::ROLE_STATE_ACTIVE);
  alice.context->TryCancel();
}

TEST_F(AuthGrpcTest, TokenFileChangesApplyWithoutARestart) {
  Start(/*tls=*/false);
  ASSERT_TRUE(Status(kAdmin).ok());
  const int64_t loads = server_->authority()->loads();
  // The admin token is removed; the file watcher picks the change up.
  std::ofstream(token_file_, std::ios::trunc) << TokenFileJson(false);
  const absl::Time give_up = absl::Now() + absl::Seconds(20);
  while (server_->authority()->loads() == loads && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  grpc::Status gone = Status(kAdmin);
  EXPECT_EQ(gone.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Reason(gone), "UNAUTHENTICATED");
  EXPECT_TRUE(Status(kAlice).ok());
  // A broken file keeps the tokens in force; an explicit reload reports it.
  std::ofstream(token_file_, std::ios::trunc) << R"({"tokens": [)";
  EXPECT_FALSE(server_->ReloadTokens().ok());
  EXPECT_TRUE(Status(kAlice).ok());
  std::ofstream(token_file_, std::ios::trunc) << TokenFileJson(true);
  EXPECT_TRUE(server_->ReloadTokens().ok());
  EXPECT_TRUE(Status(kAdmin).ok());
}

TEST_F(AuthGrpcTest, ANonLoopbackAddressNeedsTlsAndTokensOrInsecure) {
  HubServerOptions options;
  options.listen = "0.0.0.0:0";
  options.db_path = testing::FreshTestDbPath();
  auto refused = HubServer::Start(options);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ReasonOf(refused.status()), "INSECURE_LISTEN_REFUSED");
  options.insecure = true;
  auto allowed = HubServer::Start(options);
  ASSERT_TRUE(allowed.ok()) << allowed.status();
  EXPECT_NE((*allowed)->security().find("INSECURE"), std::string::npos);
}

TEST_F(AuthGrpcTest, AKeyThatIsNotTheCertificatesIsRefusedAtStart) {
  HubServerOptions options;
  options.listen = "127.0.0.1:0";
  options.db_path = testing::FreshTestDbPath();
  options.tls.cert_file = *pki_ + "/server.pem";
  options.tls.key_file = *pki_ + "/client.key";
  auto refused = HubServer::Start(options);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("client.key is not the key of"),
            std::string::npos)
      << refused.status();
  options.tls.key_file = *pki_ + "/server.key";
  options.tls.client_ca_file = *pki_ + "/missing.pem";
  refused = HubServer::Start(options);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("missing.pem"), std::string::npos);
}

TEST_F(AuthGrpcTest, WithoutATokenFileLoopbackCallersAreAnonymousAdmins) {
  server_ = testing::StartTestHub(testing::FreshTestDbPath());
  ASSERT_NE(server_, nullptr);
  EXPECT_NE(server_->security().find("loopback only"), std::string::npos);
  Connect(grpc::InsecureChannelCredentials());
  EXPECT_TRUE(Status("").ok());
  hub::v1::ReserveRoleRequest reserve;
  *reserve.mutable_role_key() = Cto();
  hub::v1::ReserveRoleResponse reserved;
  EXPECT_TRUE(roles_->ReserveRole(As("").get(), reserve, &reserved).ok());
}

}  // namespace
}  // namespace hub::auth_grpc
