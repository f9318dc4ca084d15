// libFuzzer target: every host list rlx reads. The first byte picks the
// parser: Open MPI's hostfile, -H lists, MLX's JSON host list, the static
// JSON rank table of RLX_HOSTFILE, or rlxrun's whole reading of a hostfile
// through the shared bounded reader (rlx/transport/hostfile_reader.h), from a
// file: its nesting cap, and its size cap (read_through_a_file). Each either parses or throws its
// own documented error, never anything else.
#include <string>

#include <sys/mman.h>
#include <unistd.h>

#include "rlx/backends/tcp/static_hostfile.h"
#include "rlx/launcher/hostfile.h"
#include "rlx/transport/errors.h"
#include "rlx/transport/hostfile_reader.h"

namespace {

struct Memfd {
  int fd = ::memfd_create("fuzz_hostfile", MFD_CLOEXEC);
  ~Memfd() {
    if (fd >= 0) ::close(fd);
  }
};

// rlxrun's reading of `body` from a file; past the size cap when `body`
// starts with "\xff\xff" (rarely: 4 MiB per run would slow every other one;
// regressions/ holds such an input, replayed on every run).
void read_through_a_file(std::string_view body) {
  std::string content(body);
  if (body.starts_with("\xff\xff")) {
    while (content.size() <= rlx::hostfile::kMaxBytes) content += content;
  }
  const Memfd file;
  if (file.fd < 0 ||
      ::write(file.fd, content.data(), content.size()) != static_cast<ssize_t>(content.size())) {
    return;
  }
  (void)rlx::launcher::read_hostfile("/proc/self/fd/" + std::to_string(file.fd),
                                     std::chrono::seconds(1));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace rlx::launcher;
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    switch (data[0] % 5) {
      case 0:
        (void)place_ranks(parse_openmpi_hostfile(text, "fuzz"), 8, true);
        break;
      case 1:
        (void)place_ranks(parse_host_list(text), 8, false);
        break;
      case 2:
        (void)parse_mlx_hostfile(text, "fuzz");
        break;
      case 3:
        (void)rlx::tcp::parse_static_table(text, "fuzz");
        break;
      default:
        read_through_a_file(text);
    }
  } catch (const HostfileError&) {
  } catch (const rlx::CollectiveError&) {
  }
  return 0;
}
