#include "rlx/transport/shm/host_identity.h"

#include <fstream>
#include <iterator>

#include <sys/stat.h>
#include <unistd.h>

namespace rlx::shm {
namespace {

// FNV-1a: a stable 64-bit digest (std::hash may differ between builds).
std::uint64_t digest(const std::string& text) {
  std::uint64_t hash = 0xcbf29ce484222325;
  for (const char c : text) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3;
  }
  return hash;
}

std::string boot_id() {
  std::ifstream file("/proc/sys/kernel/random/boot_id");
  return std::string(std::istreambuf_iterator<char>(file), {});
}

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

}  // namespace

HostIdentity this_host(const std::string& directory) {
  struct stat st {};
  const bool have_directory = ::stat(directory.c_str(), &st) == 0;
  const std::string name = host_name();
  const std::string identity =
      boot_id() + "\n" + name + "\n" +
      (have_directory ? std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino)
                      : std::string("no ") + directory) +
      "\n" + std::to_string(::geteuid());
  return {digest(identity), name};
}

}  // namespace rlx::shm
