#include "hub/services/message_service.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "hub/edge/call_gate.h"
#include "hub/services/error_mapping.h"
#include "hub/services/message_mapping.h"
#include "hub/services/proto_time.h"
#include "hub/services/role_mapping.h"
#include "status/status.h"

namespace hub {
namespace {

hub::v1::AskState AskStateProto(AskState state) {
  switch (state) {
    case AskState::kAnswered:
      return hub::v1::ASK_STATE_ANSWERED;
    case AskState::kDelivered:
      return hub::v1::ASK_STATE_DELIVERED;
    case AskState::kQueued:
      return hub::v1::ASK_STATE_QUEUED;
  }
  return hub::v1::ASK_STATE_UNSPECIFIED;
}

}  // namespace

MessageServiceImpl::MessageServiceImpl(Messaging* messaging,
                                       BlockingPool* write_pool,
                                       BlockingPool* ask_pool)
    : messaging_(messaging), write_pool_(write_pool), ask_pool_(ask_pool) {}

grpc::ServerUnaryReactor* MessageServiceImpl::Publish(
    grpc::CallbackServerContext* context,
    const hub::v1::PublishRequest* request,
    hub::v1::PublishResponse* response) {
  absl::StatusOr<Principal> principal =
      admission_->AdmitCall(*context, *request);
  if (!principal.ok()) return FinishUnary(context, principal.status());
  absl::StatusOr<PublishInput> input = ToPublishInput(*request);
  if (!input.ok()) return FinishUnary(context, input.status());
  input->scope = ScopeOf(*principal);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  // No thread waits for the group commit: the answer leaves from the
  // store's completion thread once the message is durable.
  messaging_->PublishAsync(
      *input,
      [reactor, response](absl::StatusOr<PublishResult> result) {
        if (!result.ok()) {
          reactor->Finish(ToGrpcStatus(result.status()));
          return;
        }
        FillPublishResponse(*result, response);
        reactor->Finish(grpc::Status::OK);
      },
      [this](std::function<void()> task) {
        write_pool_->Schedule(std::move(task));
      });
  return reactor;
}

grpc::ServerUnaryReactor* MessageServiceImpl::Ack(
    grpc::CallbackServerContext* context, const hub::v1::AckRequest* request,
    hub::v1::AckResponse* response) {
  if (absl::StatusOr<Principal> principal =
          admission_->AdmitCall(*context, *request);
      !principal.ok()) {
    return FinishUnary(context, principal.status());
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  std::vector<std::string> ids(request->message_ids().begin(),
                               request->message_ids().end());
  std::optional<int64_t> generation;
  if (request->has_presence_generation()) {
    generation = request->presence_generation();
  }
  // Validation answers here; the write answers from the store's thread.
  messaging_->AckAsync(request->agent_id(), ids, generation,
                       [reactor, response](absl::StatusOr<AckResult> result) {
                         if (!result.ok()) {
                           reactor->Finish(ToGrpcStatus(result.status()));
                           return;
                         }
                         *response->mutable_result() =
                             ToAckResultProto(*result);
                         reactor->Finish(grpc::Status::OK);
                       });
  return reactor;
}

grpc::ServerUnaryReactor* MessageServiceImpl::ListPending(
    grpc::CallbackServerContext* context,
    const hub::v1::ListPendingRequest* request,
    hub::v1::ListPendingResponse* response) {
  // Reading an inbox marks deliveries: only as the agent's own principal.
  if (absl::StatusOr<Principal> principal =
          admission_->AdmitCall(*context, *request);
      !principal.ok()) {
    return FinishUnary(context, principal.status());
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  // Not a peek: marking deliveries is a durable write.
  write_pool_->Schedule([this, reactor, request, response] {
    PendingQuery query;
    query.agent_id = request->agent_id();
    query.topic = request->topic();
    query.page_size = request->page_size();
    query.page_token = request->page_token();
    query.peek = request->peek();
    if (request->has_presence_generation()) {
      query.presence_generation = request->presence_generation();
    }
    absl::StatusOr<PendingPage> page = messaging_->ListPending(query);
    if (!page.ok()) {
      reactor->Finish(ToGrpcStatus(page.status()));
      return;
    }
    for (const MessageDelivery& d : page->deliveries) {
      *response->add_deliveries() = ToDeliveryProto(d);
    }
    response->set_next_page_token(page->next_page_token);
    *response->mutable_server_time() =
        ToProtoTimestamp(absl::FromUnixMillis(page->server_time_ms));
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

grpc::ServerUnaryReactor* MessageServiceImpl::ListDeadLetters(
    grpc::CallbackServerContext* context,
    const hub::v1::ListDeadLettersRequest* request,
    hub::v1::ListDeadLettersResponse* response) {
  absl::StatusOr<Principal> principal =
      admission_->AdmitCall(*context, *request);
  if (!principal.ok()) return FinishUnary(context, principal.status());
  DeadLetterQuery query;
  query.reason = request->reason();
  query.from_agent_id = request->from_agent_id();
  query.page_size = request->page_size();
  query.page_token = request->page_token();
  query.scope = ScopeOf(*principal);
  absl::StatusOr<DeadLetterPage> page = messaging_->ListDeadLetters(query);
  if (!page.ok()) return FinishUnary(context, page.status());
  for (const DeadLetterView& d : page->dead_letters) {
    *response->add_dead_letters() = ToDeadLetterProto(d);
  }
  response->set_next_page_token(page->next_page_token);
  return FinishUnary(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* MessageServiceImpl::Ask(
    grpc::CallbackServerContext* context, const hub::v1::AskRequest* request,
    hub::v1::AskResponse* response) {
  absl::StatusOr<Principal> principal =
      admission_->AdmitCall(*context, *request);
  if (!principal.ok()) return FinishUnary(context, principal.status());
  absl::StatusOr<PublishInput> input = ToPublishInput(*request);
  if (!input.ok()) return FinishUnary(context, input.status());
  input->scope = ScopeOf(*principal);
  absl::Duration wait = absl::Seconds(30);
  if (request->has_await_timeout()) {
    if (absl::Status s =
            CheckProtoDuration(request->await_timeout(), "await_timeout");
        !s.ok()) {
      return FinishUnary(context, s);
    }
    wait = FromProtoDuration(request->await_timeout());
    if (wait < absl::ZeroDuration() || wait > absl::Seconds(30)) {
      return FinishUnary(
          context,
          WithMetadata(InvalidArgumentError("REQUEST_INVALID",
                                            "await_timeout must be 0 .. 30 s"),
                       "field", "await_timeout"));
    }
  }
  // When the call's deadline comes first, the wait ends early enough for
  // the answer to reach the caller before it: a tenth of the time left (at
  // least 50 ms, at most 1 s) before the deadline, which counts the time
  // the ask waits for a thread and for its request's durable write too. A
  // fixed 50 ms was less than one busy machine's scheduling delay.
  std::optional<absl::Time> answer_by;
  const absl::Time deadline = absl::FromChrono(context->deadline());
  if (deadline != absl::InfiniteFuture()) {
    const absl::Duration left = deadline - absl::Now();
    answer_by = deadline -
                std::clamp(left / 10, absl::Milliseconds(50), absl::Seconds(1));
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  ask_pool_->Schedule(
      [this, reactor, response, wait, answer_by, in = std::move(*input)] {
        absl::Duration waited = wait;
        if (answer_by.has_value()) {
          waited = std::max(absl::ZeroDuration(),
                            std::min(waited, *answer_by - absl::Now()));
        }
        absl::StatusOr<AskResult> result = messaging_->Ask(in, waited);
        if (!result.ok()) {
          reactor->Finish(ToGrpcStatus(result.status()));
          return;
        }
        const MessageRecord& m = result->request.message;
        response->set_state(AskStateProto(result->state));
        response->set_request_message_id(m.id);
        response->set_correlation_id(m.correlation_id);
        response->set_trace_id(m.trace_id);
        if (result->response.has_value()) {
          *response->mutable_response() = ToMessageProto(*result->response);
        }
        response->set_recipient_count(result->request.recipient_count);
        *response->mutable_expires_at() =
            ToProtoTimestamp(absl::FromUnixMillis(m.expires_at_ms));
        if (result->request.activation.has_value()) {
          *response->mutable_activation() =
              ToReceiptProto(*result->request.activation);
        }
        reactor->Finish(grpc::Status::OK);
      });
  return reactor;
}

grpc::ServerUnaryReactor* MessageServiceImpl::ListTrace(
    grpc::CallbackServerContext* context,
    const hub::v1::ListTraceRequest* request,
    hub::v1::ListTraceResponse* response) {
  absl::StatusOr<Principal> principal =
      admission_->AdmitCall(*context, *request);
  if (!principal.ok()) return FinishUnary(context, principal.status());
  absl::StatusOr<TracePage> page =
      messaging_->ListTrace(request->trace_id(), request->page_size(),
                            request->page_token(), ScopeOf(*principal));
  if (!page.ok()) return FinishUnary(context, page.status());
  for (const MessageRecord& m : page->messages) {
    *response->add_messages() = ToMessageProto(m);
  }
  response->set_next_page_token(page->next_page_token);
  return FinishUnary(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* MessageServiceImpl::RedriveDeadLetter(
    grpc::CallbackServerContext* context,
    const hub::v1::RedriveDeadLetterRequest* request,
    hub::v1::RedriveDeadLetterResponse* response) {
  // Operators and admins; the message's projects are checked against the
  // token's once it is read (Messaging::RedriveDeadLetter).
  absl::StatusOr<Principal> principal =
      admission_->AdmitCall(*context, *request);
  if (!principal.ok()) return FinishUnary(context, principal.status());
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  // The write and the pushes after it block: on the write pool.
  write_pool_->Schedule(
      [this, reactor, request, response, principal = *std::move(principal)] {
        absl::StatusOr<RedriveOutcome> outcome = messaging_->RedriveDeadLetter(
            request->message_id(), ScopeOf(principal),
            principal.anonymous ? "anonymous" : principal.name);
        if (!outcome.ok()) {
          reactor->Finish(ToGrpcStatus(outcome.status()));
          return;
        }
        FillRedriveResponse(*outcome, response);
        reactor->Finish(grpc::Status::OK);
      });
  return reactor;
}

}  // namespace hub
