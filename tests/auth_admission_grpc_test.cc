// The admission table (hub/edge/admission.h) walked against a real hub with
// tokens: every method of every service .proto file has exactly one row, and
// each row's rule holds on the wire. A call without a token is refused; an
// agent token acting for an agent it does not own, in a project outside its
// own, or calling an operator's or admin's method, is refused; an admin
// passes every rule that does not bind the call to an agent's owner. No
// call ends in UNKNOWN, INTERNAL or UNIMPLEMENTED.
#include <dirent.h>
#include <grpcpp/generic/generic_stub.h>

#include <set>
#include <string>
#include <vector>

#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "hub/edge/admission.h"
#include "tests/auth_grpc_fixture.h"

namespace hub::auth_grpc {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::MethodDescriptor;

constexpr char kNobodysAgent[] = "agent-nobody-owns";

// The only methods an agent token may call naming another project's role or
// an agent it does not own: they read nothing of a project or answer only
// from what the token may see. Written here, apart from the table, so that a
// row loosened by mistake fails the walk.
const std::set<std::string>& OpenToAnyPrincipal() {
  static const auto* open = new std::set<std::string>{
      "hub.v1.HubService/GetStatus",
      "hub.v1.HubService/EncodeRoleKey",
      "hub.v1.HubService/DecodeRoleKey",
      "hub.v1.PresenceService/GetAgent",
      "hub.v1.JobService/GetJob",
      "hub.v1.MessageService/ListDeadLetters",
      "hub.v1.MessageService/ListTrace",
  };
  return *open;
}

const MethodDescriptor* MethodOf(const MethodRule& rule) {
  const size_t slash = rule.method.rfind('/');
  return google::protobuf::DescriptorPool::generated_pool()->FindMethodByName(
      rule.method.substr(0, slash) + "." + rule.method.substr(slash + 1));
}

// Sets the string at `path` ("hello.agent_id") through message fields.
void SetStringAt(Message* message, const std::string& path,
                 const std::string& value) {
  const size_t dot = path.find('.');
  const FieldDescriptor* field = message->GetDescriptor()->FindFieldByName(
      dot == std::string::npos ? path : path.substr(0, dot));
  ASSERT_NE(field, nullptr) << path;
  if (dot == std::string::npos) {
    message->GetReflection()->SetString(message, field, value);
    return;
  }
  SetStringAt(message->GetReflection()->MutableMessage(message, field),
              path.substr(dot + 1), value);
}

// A request that names what `rule` reads: `project` and `agent`.
std::unique_ptr<Message> RequestFor(const MethodRule& rule,
                                    const std::string& project,
                                    const std::string& agent) {
  const Descriptor* type = MethodOf(rule)->input_type();
  std::unique_ptr<Message> request(
      google::protobuf::MessageFactory::generated_factory()
          ->GetPrototype(type)
          ->New());
  if (rule.project_from_role_key) {
    const FieldDescriptor* key = type->FindFieldByName("role_key");
    request->GetReflection()
        ->MutableMessage(request.get(), key)
        ->CopyFrom(Cto(project));
  }
  if (!rule.project_field.empty()) {
    SetStringAt(request.get(), rule.project_field, project);
  }
  if (!rule.agent_field.empty()) {
    SetStringAt(request.get(), rule.agent_field, agent);
  }
  // A presence stream's frames are numbered from 1.
  if (const FieldDescriptor* frame = type->FindFieldByName("frame_id")) {
    request->GetReflection()->SetInt64(request.get(), frame, 1);
  }
  return request;
}

struct Outcome {
  grpc::Status status;
  // A stream that answered with a message, then was cancelled by the test.
  bool streamed = false;
};

class AdmissionWalkTest : public AuthGrpcTest {
 protected:
  // Calls `rule`'s method with `request` as `token`, as any client can
  // without its stub: one request, then the answer or the first message of
  // a stream.
  Outcome Call(const MethodRule& rule, const std::string& token,
               const Message& request) {
    auto channel = grpc::CreateChannel(server_->address(),
                                       grpc::InsecureChannelCredentials());
    grpc::GenericStub stub(channel);
    grpc::CompletionQueue queue;
    auto context = As(token);
    std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call =
        stub.PrepareCall(context.get(), "/" + rule.method, &queue);
    auto step = [&queue] {
      void* tag = nullptr;
      bool ok = false;
      EXPECT_TRUE(queue.Next(&tag, &ok));
      return ok;
    };
    call->StartCall(nullptr);
    bool ok = step();
    const std::string bytes = request.SerializeAsString();
    grpc::Slice slice(bytes);
    grpc::ByteBuffer buffer(&slice, 1);
    if (ok) {
      call->Write(buffer, nullptr);
      ok = step();
    }
    if (ok) {
      call->WritesDone(nullptr);
      step();
    }
    grpc::ByteBuffer reply;
    call->Read(&reply, nullptr);
    Outcome outcome;
    const MethodDescriptor* method = MethodOf(rule);
    if (step() && method->server_streaming()) {
      outcome.streamed = true;
      context->TryCancel();
    }
    call->Finish(&outcome.status, nullptr);
    step();
    queue.Shutdown();
    void* tag = nullptr;
    bool drained = false;
    while (queue.Next(&tag, &drained)) {
    }
    return outcome;
  }

  static void ExpectAnswered(const MethodRule& rule, const Outcome& outcome) {
    const grpc::StatusCode code = outcome.status.error_code();
    EXPECT_NE(code, grpc::StatusCode::UNKNOWN) << rule.method;
    EXPECT_NE(code, grpc::StatusCode::INTERNAL) << rule.method;
    EXPECT_NE(code, grpc::StatusCode::UNIMPLEMENTED) << rule.method;
  }
};

TEST(AdmissionTableTest, EveryMethodOfEveryServiceFileHasExactlyOneRow) {
  std::set<std::string> rows;
  for (const MethodRule& rule : AdmissionRules()) {
    EXPECT_TRUE(rows.insert(rule.method).second) << "two rows: " << rule.method;
    EXPECT_NE(MethodOf(rule), nullptr) << "no such method: " << rule.method;
  }
  std::set<std::string> methods;
  DIR* dir = opendir("proto/hub/v1");
  ASSERT_NE(dir, nullptr) << "the .proto files are the test's data";
  int files = 0;
  while (dirent* entry = readdir(dir)) {
    const std::string name = entry->d_name;
    if (name.size() < 6 || name.substr(name.size() - 6) != ".proto") continue;
    ++files;
    const google::protobuf::FileDescriptor* file =
        google::protobuf::DescriptorPool::generated_pool()->FindFileByName(
            "hub/v1/" + name);
    ASSERT_NE(file, nullptr) << name << " is not linked into hubd";
    for (int s = 0; s < file->service_count(); ++s) {
      for (int m = 0; m < file->service(s)->method_count(); ++m) {
        const MethodDescriptor* method = file->service(s)->method(m);
        methods.insert(method->service()->full_name() + "/" + method->name());
      }
    }
  }
  closedir(dir);
  EXPECT_GT(files, 0);
  EXPECT_EQ(methods, rows);
}

TEST(AdmissionTableTest, ARowForAnUnknownMethodOrASharedRequestIsRefused) {
  std::vector<MethodRule> rules = AdmissionRules();
  rules.push_back(rules.front());
  EXPECT_FALSE(Admission::Create(nullptr, nullptr, rules).ok());
  MethodRule unknown;
  unknown.method = "hub.v1.HubService/NoSuchMethod";
  EXPECT_FALSE(Admission::Create(nullptr, nullptr, {unknown}).ok());
  EXPECT_TRUE(Admission::Create(nullptr, nullptr).ok());
}

TEST_F(AdmissionWalkTest, EveryMethodRefusesACallWithoutAToken) {
  Start(/*tls=*/false);
  for (const MethodRule& rule : AdmissionRules()) {
    Outcome outcome = Call(rule, "", *RequestFor(rule, kProject, "agent-a"));
    EXPECT_EQ(outcome.status.error_code(), grpc::StatusCode::UNAUTHENTICATED)
        << rule.method;
    EXPECT_EQ(Reason(outcome.status), "PRINCIPAL_REQUIRED") << rule.method;
  }
}

TEST_F(AdmissionWalkTest, EveryRowHoldsForAnAgentTokenActingOutsideItsRights) {
  Start(/*tls=*/false);
  int refused = 0;
  for (const MethodRule& rule : AdmissionRules()) {
    // Alice's token is an agent's, for kProject, and owns no agent yet.
    Outcome outcome =
        Call(rule, kAlice, *RequestFor(rule, kOtherProject, kNobodysAgent));
    ExpectAnswered(rule, outcome);
    if (OpenToAnyPrincipal().count(rule.method) == 0) {
      ++refused;
      EXPECT_EQ(outcome.status.error_code(),
                grpc::StatusCode::PERMISSION_DENIED)
          << rule.method << " (" << AccessName(rule.access)
          << "): " << outcome.status.error_message();
      const std::string reason = Reason(outcome.status);
      EXPECT_TRUE(reason == "PERMISSION_DENIED" ||
                  reason == "PROJECT_SCOPE_MISMATCH")
          << rule.method << ": " << reason;
    } else {
      EXPECT_NE(outcome.status.error_code(), grpc::StatusCode::UNAUTHENTICATED)
          << rule.method;
    }
  }
  EXPECT_EQ(refused, AdmissionRules().size() - OpenToAnyPrincipal().size());
}

TEST_F(AdmissionWalkTest, AnAdminPassesEveryRuleThatDoesNotNameAnOwner) {
  Start(/*tls=*/false);
  for (const MethodRule& rule : AdmissionRules()) {
    if (rule.access == Access::kAgentOwner ||
        rule.access == Access::kSenderOwner) {
      continue;
    }
    Outcome outcome =
        Call(rule, kAdmin, *RequestFor(rule, kOtherProject, kNobodysAgent));
    ExpectAnswered(rule, outcome);
    const grpc::StatusCode code = outcome.status.error_code();
    EXPECT_NE(code, grpc::StatusCode::UNAUTHENTICATED) << rule.method;
    EXPECT_NE(code, grpc::StatusCode::PERMISSION_DENIED)
        << rule.method << ": " << outcome.status.error_message();
  }
}

}  // namespace
}  // namespace hub::auth_grpc
