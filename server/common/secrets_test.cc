#include "server/common/secrets.h"

#include <set>

#include "absl/strings/escaping.h"
#include "gtest/gtest.h"
#include "worker/common/status.h"

namespace quantd::server {
namespace {

TEST(SecretsTest, RandomHexHasTheAskedBitsAndDoesNotRepeat) {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    quantd::StatusOr<std::string> secret = RandomHex(16);
    ASSERT_TRUE(secret.ok()) << secret.status();
    ASSERT_EQ(secret->size(), 32u);
    for (char c : *secret) EXPECT_TRUE(std::isxdigit(c) && !std::isupper(c)) << *secret;
    seen.insert(*secret);
  }
  // 1000 draws of 128 bits: a repeat would mean a broken source.
  EXPECT_EQ(seen.size(), 1000u);
}

TEST(SecretsTest, Sha256DigestKnownVector) {
  EXPECT_EQ(absl::BytesToHexString(Sha256Digest("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Digest("").size(), 32u);
}

TEST(SecretsTest, ConstantTimeEquals) {
  EXPECT_TRUE(ConstantTimeEquals("", ""));
  EXPECT_TRUE(ConstantTimeEquals(Sha256Digest("a"), Sha256Digest("a")));
  EXPECT_FALSE(ConstantTimeEquals(Sha256Digest("a"), Sha256Digest("b")));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abcd"));
  EXPECT_FALSE(ConstantTimeEquals("", "a"));
}

}  // namespace
}  // namespace quantd::server
