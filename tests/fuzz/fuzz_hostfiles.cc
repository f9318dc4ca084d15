// libFuzzer target: every host list rlx reads. The first byte picks the
// parser: Open MPI's hostfile, -H lists, MLX's JSON host list, and the
// static JSON rank table of RLX_HOSTFILE. Each either parses or throws its
// own documented error, never anything else.
#include <string>

#include "backends/tcp/static_hostfile.h"
#include "launcher/hostfile.h"
#include "transport/errors.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace rlx::launcher;
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    switch (data[0] % 4) {
      case 0:
        (void)place_ranks(parse_openmpi_hostfile(text, "fuzz"), 8, true);
        break;
      case 1:
        (void)place_ranks(parse_host_list(text), 8, false);
        break;
      case 2:
        (void)parse_mlx_hostfile(text, "fuzz");
        break;
      default:
        (void)rlx::tcp::parse_static_table(text, "fuzz");
    }
  } catch (const HostfileError&) {
  } catch (const rlx::CollectiveError&) {
  }
  return 0;
}
