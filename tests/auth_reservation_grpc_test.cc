// Path reservations with tokens: an agent token reserves, renews and
// releases only as agents it owns and only in its projects; checks and
// lists stay in the token's projects; forcing a release needs operator
// rights on the reservation's project.
#include <algorithm>
#include <string>
#include <vector>

#include "tests/auth_grpc_fixture.h"

namespace hub::auth_grpc {
namespace {

class AuthReservationTest : public AuthGrpcTest {
 protected:
  grpc::Status Reserve(const std::string& token, const std::string& agent,
                       const std::string& project = kProject,
                       hub::v1::Reservation* out = nullptr) {
    hub::v1::ReserveRequest request;
    request.set_project_id(project);
    request.set_agent_id(agent);
    request.add_patterns("src");
    hub::v1::ReserveResponse response;
    grpc::Status s =
        reservations_->Reserve(As(token).get(), request, &response);
    if (out != nullptr) *out = response.reservation();
    return s;
  }
  grpc::Status Force(const std::string& token, const std::string& id) {
    hub::v1::ForceReleaseReservationRequest request;
    request.set_reservation_id(id);
    hub::v1::ForceReleaseReservationResponse response;
    return reservations_->ForceReleaseReservation(As(token).get(), request,
                                                  &response);
  }
};

TEST_F(AuthReservationTest,
       AnAgentTokenReservesOnlyAsItsOwnAgentInItsProjects) {
  Start(/*tls=*/false);
  ASSERT_TRUE(Register(kAlice, "alice-1").ok());
  ASSERT_TRUE(Register(kBob, "bob-1").ok());
  EXPECT_EQ(Reason(Reserve(kBob, "alice-1")), "PERMISSION_DENIED");
  EXPECT_EQ(Reason(Reserve(kAlice, "alice-1", kOtherProject)),
            "PROJECT_SCOPE_MISMATCH");
  EXPECT_EQ(Reserve("", "alice-1").error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  hub::v1::Reservation r;
  ASSERT_TRUE(Reserve(kAlice, "alice-1", kProject, &r).ok());

  hub::v1::ReleaseReservationRequest release;
  release.set_reservation_id(r.reservation_id());
  release.set_agent_id("alice-1");
  hub::v1::ReleaseReservationResponse released;
  EXPECT_EQ(Reason(reservations_->ReleaseReservation(As(kBob).get(), release,
                                                     &released)),
            "PERMISSION_DENIED");

  hub::v1::CheckReservationsRequest check;
  check.set_project_id(kOtherProject);
  check.add_patterns("src");
  hub::v1::CheckReservationsResponse checked;
  EXPECT_EQ(Reason(reservations_->CheckReservations(As(kAlice).get(), check,
                                                    &checked)),
            "PROJECT_SCOPE_MISMATCH");
  hub::v1::ListReservationsRequest elsewhere;
  elsewhere.set_project_id(kOtherProject);
  hub::v1::ListReservationsResponse listed;
  EXPECT_EQ(Reason(reservations_->ListReservations(As(kAlice).get(), elsewhere,
                                                   &listed)),
            "PROJECT_SCOPE_MISMATCH");
  hub::v1::ListReservationsRequest here;
  here.set_project_id(kProject);
  ASSERT_TRUE(
      reservations_->ListReservations(As(kBob).get(), here, &listed).ok());
  EXPECT_EQ(listed.reservations_size(), 1);
}

TEST_F(AuthReservationTest,
       AListingThatNamesNoProjectLeavesTheOtherProjectsOutSilently) {
  Start(/*tls=*/false);
  ASSERT_TRUE(Register(kAlice, "alice-1").ok());
  ASSERT_TRUE(Register(kCarol, "carol-1", kOtherProject).ok());
  hub::v1::Reservation mine;
  hub::v1::Reservation theirs;
  ASSERT_TRUE(Reserve(kAlice, "alice-1", kProject, &mine).ok());
  ASSERT_TRUE(Reserve(kCarol, "carol-1", kOtherProject, &theirs).ok());
  auto ids = [this](const std::string& token,
                    const hub::v1::ListReservationsRequest& request) {
    std::vector<std::string> out;
    hub::v1::ListReservationsRequest page = request;
    page.set_page_size(1);  // the scope applies before paging
    for (;;) {
      hub::v1::ListReservationsResponse listed;
      grpc::Status s =
          reservations_->ListReservations(As(token).get(), page, &listed);
      EXPECT_TRUE(s.ok()) << s.error_message();
      for (const hub::v1::Reservation& r : listed.reservations()) {
        out.push_back(r.reservation_id());
      }
      if (!s.ok() || listed.next_page_token().empty()) return out;
      page.set_page_token(listed.next_page_token());
    }
  };
  const hub::v1::ListReservationsRequest everywhere;
  EXPECT_EQ(ids(kAlice, everywhere),
            std::vector<std::string>{mine.reservation_id()});
  EXPECT_EQ(ids(kCarol, everywhere),
            std::vector<std::string>{theirs.reservation_id()});
  hub::v1::ListReservationsRequest carols = everywhere;
  carols.set_agent_id("carol-1");
  EXPECT_TRUE(ids(kAlice, carols).empty());
  std::vector<std::string> all = {mine.reservation_id(),
                                  theirs.reservation_id()};
  std::sort(all.begin(), all.end());
  EXPECT_EQ(ids(kOps, everywhere), all);
}

TEST_F(AuthReservationTest, ForcingAReleaseNeedsOperatorRightsOnItsProject) {
  Start(/*tls=*/false);
  ASSERT_TRUE(Register(kAlice, "alice-1").ok());
  hub::v1::Reservation r;
  ASSERT_TRUE(Reserve(kAlice, "alice-1", kProject, &r).ok());
  EXPECT_EQ(Force(kAlice, r.reservation_id()).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Force(kOtherOps, r.reservation_id()).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(Force(kOps, r.reservation_id()).ok());
  EXPECT_EQ(Reason(Force(kOps, r.reservation_id())), "RESERVATION_NOT_FOUND");
}

}  // namespace
}  // namespace hub::auth_grpc
