// The states of records/ as both engines store them: every value of each
// enum is written as its word and read back as itself, and the schema
// refuses any other word, so a row's word always parses
// (storage/record_rows.h's readers rely on it).
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "records/agent.h"
#include "records/message.h"
#include "records/role.h"
#include "storage/store.h"
#include "storage/store_test_fixture.h"

namespace hub::storage {
namespace {

using testing::CasFrom;
using testing::CtoReservation;
using testing::StoreTest;

constexpr int64_t kNow = 1'700'000'000'000;

class StoredWords : public StoreTest {};
HUB_STORE_TEST_SUITE(StoredWords);

TEST_P(StoredWords, EveryAgentStatusIsStoredAsItsWordAndReadBack) {
  AgentRegistration reg;
  reg.agent_id = "a1";
  reg.cli = "claude";
  reg.now_ms = kNow;
  absl::StatusOr<AgentRecord> agent = store().agents().RegisterAgent(reg);
  ASSERT_TRUE(agent.ok()) << agent.status();
  for (const auto& [status, word] : kAgentStatusWords) {
    absl::StatusOr<PresenceWrite> w =
        store().agents().SetAgentStatusForGeneration(
            "a1", agent->presence_generation, status);
    ASSERT_TRUE(w.ok()) << w.status();
    EXPECT_EQ(w->outcome, PresenceOutcome::kApplied) << word;
    EXPECT_EQ(store().agents().GetAgent("a1")->status, status);
    EXPECT_EQ(Query("SELECT status FROM agents WHERE agent_id = 'a1'"), word);
  }
  EXPECT_NE(Exec("UPDATE agents SET status = 'sleeping'"), "");
  EXPECT_EQ(store().agents().GetAgent("a1")->status, AgentStatus::kOffline);
}

TEST_P(StoredWords, EveryRoleStateIsStoredAsItsWordAndReadBack) {
  absl::StatusOr<RoleWrite> reserved =
      store().roles().ReserveRole(CtoReservation());
  ASSERT_TRUE(reserved.ok()) << reserved.status();
  RoleRecord row = *reserved->role;
  for (const auto& [state, word] : kRoleStateWords) {
    RoleCas cas = CasFrom(row);
    cas.patch.state = state;
    cas.patch.holder_agent_id = std::string("holder");  // active needs one
    absl::StatusOr<RoleWrite> w = store().roles().CompareAndSetRole(cas);
    ASSERT_TRUE(w.ok()) << w.status();
    ASSERT_EQ(w->outcome, RoleOutcome::kApplied) << word;
    row = *w->role;
    EXPECT_EQ(row.state, state);
    EXPECT_EQ(store().roles().GetRole(row.role_key_wire)->state, state);
    EXPECT_EQ(Query(absl::StrCat("SELECT state FROM role_registry WHERE "
                                 "role_key_wire = '",
                                 row.role_key_wire, "'")),
              word);
  }
  EXPECT_NE(Exec("UPDATE role_registry SET state = 'elected_probing'"), "");
  EXPECT_EQ(store().roles().GetRole(row.role_key_wire)->state,
            RoleState::kQuarantined);
}

TEST_P(StoredWords, EveryMessageStatusIsStoredAsItsWordAndReadBack) {
  for (const auto& [status, word] : kMessageStatusWords) {
    MessageRecord m;
    m.id = absl::StrCat("m-", word);
    m.type = "event";
    m.from_agent = "a";
    m.to_agent = "b";
    m.topic = "t";
    m.ttl_ms = 60'000;
    m.created_at_ms = kNow;
    m.expires_at_ms = kNow + 60'000;
    m.status = status;
    ASSERT_TRUE(store().messages().InsertMessage(m, {"b"}).ok()) << m.id;
    EXPECT_EQ(store().messages().GetMessage(m.id)->status, status);
    EXPECT_EQ(Query(absl::StrCat("SELECT status FROM messages WHERE id = '",
                                 m.id, "'")),
              word);
  }
  EXPECT_NE(Exec("UPDATE messages SET status = 'lost'"), "");
  EXPECT_EQ(store().messages().GetMessage("m-queued")->status,
            MessageStatus::kQueued);
}

}  // namespace
}  // namespace hub::storage
