#include "hub/store_identity.h"

#include "gtest/gtest.h"

namespace hub {
namespace {

TEST(SqliteStoreFingerprintTest, IsSqlitePrefixAndSha256HexOfThePath) {
  // Reference value: printf %s /tmp/x/hub.sqlite | sha256sum
  EXPECT_EQ(SqliteStoreFingerprint("/tmp/x/hub.sqlite"),
            "sqlite:"
            "93948959e91fc67d874695207c1365b12015b0cf12599d826d0c7f91e2a5dc19");
}

TEST(SqliteStoreFingerprintTest, DiffersForDifferentFiles) {
  EXPECT_NE(SqliteStoreFingerprint("/a/hub.sqlite"),
            SqliteStoreFingerprint("/b/hub.sqlite"));
}

TEST(AbsoluteDatabasePathTest, NormalizesRelativeAndDottedPaths) {
  auto path = AbsoluteDatabasePath("/srv/hub/./data/../hub.sqlite");
  ASSERT_TRUE(path.ok());
  EXPECT_EQ(*path, "/srv/hub/hub.sqlite");
  auto relative = AbsoluteDatabasePath("var/hub.sqlite");
  ASSERT_TRUE(relative.ok());
  EXPECT_EQ(relative->front(), '/');
  EXPECT_NE(relative->find("/var/hub.sqlite"), std::string::npos);
}

}  // namespace
}  // namespace hub
