#include "tests/error_contract_client.h"

#include <google/protobuf/stubs/common.h>
#include <grpcpp/client_context.h>
#include <grpcpp/completion_queue.h>
#include <grpcpp/support/byte_buffer.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "src/proto/grpc/reflection/v1alpha/reflection.grpc.pb.h"

namespace hub::testing {
namespace {

// One step of an async call on its own queue: whether the op succeeded.
bool Await(grpc::CompletionQueue* cq) {
  void* tag = nullptr;
  bool ok = false;
  return cq->Next(&tag, &ok) && ok;
}

bool Utf8(const std::string& s) {
  return google::protobuf::internal::IsStructurallyValidUTF8(s);
}

}  // namespace

std::string MethodPath(const google::protobuf::MethodDescriptor* method) {
  return absl::StrCat("/", method->service()->full_name(), "/", method->name());
}

CallOutcome GenericCaller::Call(
    const google::protobuf::MethodDescriptor* method,
    const std::vector<std::string>& frames, absl::Duration timeout) {
  CallOutcome outcome;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  grpc::CompletionQueue cq;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call =
      stub_.PrepareCall(&context, MethodPath(method), &cq);
  void* const tag = reinterpret_cast<void*>(1);
  call->StartCall(tag);
  if (Await(&cq)) {
    bool writing = true;
    for (const std::string& frame : frames) {
      grpc::Slice slice(frame);
      grpc::ByteBuffer buffer(&slice, 1);
      call->Write(buffer, tag);
      if (!(writing = Await(&cq))) break;
    }
    if (writing) {
      call->WritesDone(tag);
      Await(&cq);
    }
    while (true) {
      grpc::ByteBuffer response;
      call->Read(&response, tag);
      if (!Await(&cq)) break;
      ++outcome.responses;
    }
  }
  call->Finish(&outcome.status, tag);
  Await(&cq);
  cq.Shutdown();
  void* ignored_tag;
  bool ignored_ok;
  while (cq.Next(&ignored_tag, &ignored_ok)) {
  }
  return outcome;
}

std::string ContractViolation(const grpc::Status& status) {
  const grpc::StatusCode code = status.error_code();
  if (code == grpc::StatusCode::OK) return "";
  if (code == grpc::StatusCode::UNKNOWN || code == grpc::StatusCode::INTERNAL) {
    return absl::StrCat("code ", code);
  }
  if (!Utf8(status.error_message())) return "message is not UTF-8";
  if (status.error_details().empty()) return "no error details";
  if (status.error_details().size() > 2048) {
    return absl::StrCat("details of ", status.error_details().size(), " bytes");
  }
  google::rpc::Status details;
  if (!details.ParseFromString(status.error_details())) {
    return "details are not a google.rpc.Status";
  }
  if (details.code() != static_cast<int>(code)) return "details code differs";
  if (!Utf8(details.message())) return "details message is not UTF-8";
  int infos = 0;
  for (const auto& any : details.details()) {
    google::rpc::ErrorInfo info;
    if (!any.Is<google::rpc::ErrorInfo>()) continue;
    if (!any.UnpackTo(&info)) return "ErrorInfo does not parse";
    ++infos;
    if (info.domain() != "hub.v1") return "domain is not hub.v1";
    if (info.reason().empty()) return "empty reason";
    if (!Utf8(info.reason())) return "reason is not UTF-8";
    for (const auto& [key, value] : info.metadata()) {
      if (!Utf8(key) || !Utf8(value)) return "metadata is not UTF-8";
    }
  }
  if (infos != 1) return absl::StrCat(infos, " ErrorInfo details");
  return "";
}

std::string ReasonOfStatus(const grpc::Status& status) {
  google::rpc::Status details;
  if (!details.ParseFromString(status.error_details())) return "";
  for (const auto& any : details.details()) {
    google::rpc::ErrorInfo info;
    if (any.UnpackTo(&info)) return info.reason();
  }
  return "";
}

std::vector<std::pair<std::string, const google::protobuf::ServiceDescriptor*>>
ListHubServices(const std::shared_ptr<grpc::Channel>& channel) {
  namespace reflection = grpc::reflection::v1alpha;
  std::vector<
      std::pair<std::string, const google::protobuf::ServiceDescriptor*>>
      services;
  auto stub = reflection::ServerReflection::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
  auto stream = stub->ServerReflectionInfo(&context);
  reflection::ServerReflectionRequest request;
  request.set_list_services("");
  reflection::ServerReflectionResponse response;
  if (!stream->Write(request) || !stream->Read(&response)) return services;
  stream->WritesDone();
  for (const auto& service : response.list_services_response().service()) {
    if (!absl::StartsWith(service.name(), "hub.v1.")) continue;
    services.emplace_back(
        service.name(),
        google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
            service.name()));
  }
  while (stream->Read(&response)) {
  }
  stream->Finish().ok();
  return services;
}

}  // namespace hub::testing
