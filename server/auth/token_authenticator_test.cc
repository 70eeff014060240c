#include "server/auth/token_authenticator.h"

#include "gtest/gtest.h"
#include "server/common/errors.h"
#include "worker/common/status.h"

namespace quantd::server {
namespace {

TEST(Sha256HexTest, KnownVectors) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(TokenAuthenticatorTest, MapsTokensToTenantsAndRoles) {
  std::string file = absl::StrCat("# tokens\n", Sha256Hex("acme-secret"), "  acme  submitter\n",
                                  "\n", Sha256Hex("ops-secret"), "\tops\tadmin  # operators\n",
                                  Sha256Hex("worker-secret"), " - worker\n");
  auto auth = TokenAuthenticator::FromText(file);
  ASSERT_TRUE(auth.ok()) << auth.status();
  EXPECT_EQ((*auth)->size(), 3);

  auto acme = (*auth)->AuthenticateHeader("Bearer acme-secret");
  ASSERT_TRUE(acme.ok());
  EXPECT_EQ(acme->tenant, "acme");
  EXPECT_EQ(acme->role, Role::kSubmitter);
  auto ops = (*auth)->AuthenticateHeader("bearer   ops-secret ");
  ASSERT_TRUE(ops.ok());
  EXPECT_EQ(ops->role, Role::kAdmin);
  auto worker = (*auth)->AuthenticateHeader("Bearer worker-secret");
  ASSERT_TRUE(worker.ok());
  EXPECT_EQ(worker->role, Role::kWorker);
  EXPECT_EQ(worker->tenant, "");
  // Each credential has its own identity (leases are bound to it), never
  // the anonymous one; the token itself appears nowhere.
  EXPECT_EQ(worker->identity, "sha256:" + Sha256Hex("worker-secret"));
  EXPECT_EQ(acme->identity, "sha256:" + Sha256Hex("acme-secret"));
  EXPECT_FALSE(ops->IsAnonymous());
  EXPECT_FALSE(ops->MayWork());  // an admin token is not a worker credential
  EXPECT_TRUE(worker->MayWork());

  auto missing = (*auth)->AuthenticateHeader(std::nullopt);
  EXPECT_EQ(missing.status().code(), quantd::StatusCode::kUnauthenticated);
  EXPECT_EQ(missing.status().reason(), "MISSING_CREDENTIALS");
  EXPECT_EQ((*auth)->AuthenticateHeader("Basic abc").status().reason(), "MISSING_CREDENTIALS");
  auto wrong = (*auth)->AuthenticateHeader("Bearer acme-secreT");
  EXPECT_EQ(wrong.status().code(), quantd::StatusCode::kUnauthenticated);
  EXPECT_EQ(wrong.status().reason(), "INVALID_TOKEN");
  EXPECT_EQ((*auth)->AuthenticateHeader("Bearer ").status().reason(), "MISSING_CREDENTIALS");

  (*auth)->AddToken("generated", Caller{"", Role::kWorker});
  EXPECT_EQ((*auth)->AuthenticateHeader("Bearer generated")->role, Role::kWorker);
  EXPECT_EQ((*auth)->AuthenticateHeader("Bearer generated")->identity,
            "sha256:" + Sha256Hex("generated"));
}

TEST(TokenAuthenticatorTest, MalformedFilesNameTheLine) {
  const std::string hash = Sha256Hex("x");
  struct Case {
    std::string text;
    std::string message_part;
  } cases[] = {
      {hash + " acme", "line 1: needs three fields"},
      {"\nnot-a-hash acme admin", "line 2: the first field is not a 64-digit SHA-256 hex"},
      {hash + " acme root", "line 1: unknown role \"root\""},
      {hash + " - submitter", "line 1: submitter and admin tokens need a tenant"},
      {hash + " a admin\n" + hash + " b admin", "line 2: the same token hash appears twice"},
      {hash + " .. submitter", "line 1: tenant \"..\" is not 1 to 128 characters"},
      {"\n" + hash + " a/b admin", "line 2: tenant \"a/b\" is not"},
      {hash + " " + std::string(129, 'a') + " submitter", "line 1: tenant \""},
  };
  for (const Case& c : cases) {
    auto auth = TokenAuthenticator::FromText(c.text);
    EXPECT_EQ(auth.status().code(), quantd::StatusCode::kInvalidArgument) << c.text;
    EXPECT_NE(std::string(auth.status().message()).find(c.message_part), std::string::npos)
        << auth.status();
  }
  // A worker's tenant field is ignored, so any word is accepted there.
  EXPECT_TRUE(TokenAuthenticator::FromText(hash + " ../x worker").ok());
  EXPECT_TRUE(TokenAuthenticator::FromText(hash + " team_a-1.prod submitter").ok());
  EXPECT_EQ(TokenAuthenticator::FromFile("/nonexistent/tokens").status().code(),
            quantd::StatusCode::kNotFound);
}

}  // namespace
}  // namespace quantd::server
