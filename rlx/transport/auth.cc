#include "rlx/transport/auth.h"

#include <cerrno>
#include <memory>
#include <stdexcept>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/random.h>

namespace rlx::auth {
namespace {

// By default OpenSSL frees its tables from an atexit handler. That handler can
// run while a transport's io thread still answers a stranger's handshake (the
// transport is torn down later, with the statics), and the thread would then
// MAC with freed tables. The tables live as long as the process instead.
void keep_openssl_until_exit() {
  static const bool initialised = OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, nullptr) == 1;
  if (!initialised) throw std::runtime_error("OpenSSL: initialisation failed");
}

}  // namespace

Nonce fresh_nonce() {
  Nonce nonce;
  std::size_t filled = 0;
  while (filled < nonce.size()) {
    const ssize_t n = getrandom(nonce.data() + filled, nonce.size() - filled, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw std::runtime_error("getrandom failed");
    filled += static_cast<std::size_t>(n);
  }
  return nonce;
}

std::string fresh_token() {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string token;
  for (int half = 0; half < 2; ++half) {
    for (std::byte byte : fresh_nonce()) {
      token += kHex[std::to_integer<unsigned>(byte) >> 4];
      token += kHex[std::to_integer<unsigned>(byte) & 15];
    }
  }
  return token;
}

Mac mac(std::string_view token, std::span<const std::span<const std::byte>> parts) {
  keep_openssl_until_exit();
  std::unique_ptr<EVP_MAC, decltype(&EVP_MAC_free)> hmac(EVP_MAC_fetch(nullptr, "HMAC", nullptr),
                                                         EVP_MAC_free);
  if (!hmac) throw std::runtime_error("OpenSSL: HMAC is not available");
  std::unique_ptr<EVP_MAC_CTX, decltype(&EVP_MAC_CTX_free)> ctx(EVP_MAC_CTX_new(hmac.get()),
                                                                EVP_MAC_CTX_free);
  char digest[] = "SHA256";
  const OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string("digest", digest, 0),
                               OSSL_PARAM_construct_end()};
  // Without a job token (a static hostfile run with no RLX_JOB_TOKEN) the
  // handshake still checks the protocol, under a fixed public key.
  const std::string_view key_text = token.empty() ? std::string_view("rlx:no-job-token") : token;
  const auto* key = reinterpret_cast<const unsigned char*>(key_text.data());
  if (!ctx || EVP_MAC_init(ctx.get(), key, key_text.size(), params) != 1) {
    throw std::runtime_error("OpenSSL: HMAC init failed");
  }
  for (auto part : parts) {
    EVP_MAC_update(ctx.get(), reinterpret_cast<const unsigned char*>(part.data()), part.size());
  }
  Mac out;
  std::size_t length = 0;
  if (EVP_MAC_final(ctx.get(), reinterpret_cast<unsigned char*>(out.data()), &length, out.size()) !=
          1 ||
      length != out.size()) {
    throw std::runtime_error("OpenSSL: HMAC final failed");
  }
  return out;
}

bool equal(const Mac& a, std::span<const std::byte> b) {
  return b.size() == a.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace rlx::auth
