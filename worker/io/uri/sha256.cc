#include "worker/io/uri/sha256.h"

#include <errno.h>
#include <openssl/evp.h>

#include <cstdio>
#include <cstring>

namespace quantd::io {

struct Sha256::Impl {
  EVP_MD_CTX* ctx = nullptr;
};

Sha256::Sha256() : impl_(new Impl) {
  impl_->ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(impl_->ctx, EVP_sha256(), nullptr);
}

Sha256::~Sha256() { EVP_MD_CTX_free(impl_->ctx); }

void Sha256::Update(const void* data, size_t n) { EVP_DigestUpdate(impl_->ctx, data, n); }

std::string Sha256::HexDigest() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(impl_->ctx, digest, &len);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < len; ++i) {
    hex.push_back(kHex[digest[i] >> 4]);
    hex.push_back(kHex[digest[i] & 15]);
  }
  return hex;
}

std::string Sha256Hex(std::string_view data) {
  Sha256 h;
  h.Update(data.data(), data.size());
  return h.HexDigest();
}

StatusOr<std::string> Sha256OfFile(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) {
    if (errno == ENOENT) return NotFoundError(path + " not found");
    return DataLossError("cannot open " + path + ": " + std::strerror(errno));
  }
  Sha256 h;
  std::vector<char> buf(1 << 20);
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), f)) > 0) h.Update(buf.data(), n);
  const bool failed = std::ferror(f);
  std::fclose(f);
  if (failed) return DataLossError("reading " + path + " failed");
  return h.HexDigest();
}

}  // namespace quantd::io
