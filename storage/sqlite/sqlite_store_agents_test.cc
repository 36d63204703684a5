// Agents on SQLite only: what the file does when the store closes. The
// store contract is tested on both engines in store_agents_test.cc.
#include <unistd.h>

#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "status/status.h"
#include "storage/sqlite/sqlite_store.h"
#include "storage/test_util.h"

namespace hub::storage {
namespace {

using testing::FreshDbPath;
using testing::OpenOrDie;
using testing::RawDb;

constexpr int64_t kNow = 1'700'000'000'000;

AgentRegistration Reg(const std::string& id, int64_t now = kNow) {
  AgentRegistration r;
  r.agent_id = id;
  r.cli = "codex";
  r.now_ms = now;
  r.lease_ttl_ms = 30'000;
  return r;
}

TEST(AgentStore, ClosingTheStoreCheckpointsAndRemovesTheWal) {
  const std::string path = FreshDbPath();
  {
    auto store = OpenOrDie(path);
    ASSERT_TRUE(store->agents().RegisterAgent(Reg("a1")).ok());
    ASSERT_TRUE(
        store->agents().GetAgent("a1").ok());  // opens a reader connection
  }
  EXPECT_NE(access((path + "-wal").c_str(), F_OK), 0);
  auto reopened = OpenOrDie(path);
  EXPECT_EQ(reopened->agents().GetAgent("a1")->presence_generation, 1);
}

}  // namespace
}  // namespace hub::storage
