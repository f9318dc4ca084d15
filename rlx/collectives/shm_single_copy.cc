// Single copy among the ranks of one host: each rank posts where the buffer
// its peers read is (an address in its own process), and every reader
// copies from there straight into its output with process_vm_readv: one
// copy where the staging slots take two, and no slot to wait for. A rank
// whose buffer is read returns only once every reader said it is done.
#include <algorithm>
#include <cerrno>
#include <cstring>

#include "rlx/collectives/shm_collectives.h"
#include "rlx/transport/shm/single_copy.h"

namespace rlx {
namespace {

// What a rank posts in its call line for a single-copy call.
struct PostedBuffer {
  std::uint64_t address = 0;
  std::uint64_t bytes = 0;
};

// Reads are cut into pieces of this much: a two-process probe on the
// development machine read 64 MiB faster so than in one call.
constexpr std::size_t kReadPiece = std::size_t{1} << 20;

}  // namespace

template <class Reads>
void ShmCollectives::single_copy_call(const CollectiveCall& call, const void* buffer,
                                      std::size_t bytes, Reads&& reads) {
  const bool read_from = buffer != nullptr && bytes > 0;
  const PostedBuffer mine{reinterpret_cast<std::uintptr_t>(buffer), read_from ? bytes : 0};
  drain_deferred_checks();
  const std::uint64_t number = post_call(call, std::as_bytes(std::span(&mine, 1)));
  try {
    check_calls(call, number);
    reads(number);
    finish_reads(call, number, read_from);
  } catch (...) {
    // Set before the caller can touch its buffer again: a reader that finds
    // it after reading fails rather than return what it read.
    if (read_from) {
      node_.control(local_rank()).abandoned.store(number + 1);
      // Before any write of the caller's to the buffer, on every CPU model.
      std::atomic_thread_fence(std::memory_order_seq_cst);
    }
    throw;
  }
}

void ShmCollectives::read_posted(const CollectiveCall& call, std::uint64_t number, int peer,
                                 std::size_t offset, std::span<std::byte> into) {
  if (into.empty()) return;
  PostedBuffer posted;
  std::memcpy(&posted, node_.call_payload(peer, number, sizeof posted), sizeof posted);
  if (posted.address == 0 || posted.bytes < offset + into.size()) {
    fail_with(CollectiveError(ErrorKind::protocol_violation, site_of(call, peer),
                              "rank " + std::to_string(node_.world_rank(peer)) +
                                  " posted a buffer of " + std::to_string(posted.bytes) +
                                  " B where this rank reads " + std::to_string(into.size()) +
                                  " B at offset " + std::to_string(offset) +
                                  " (corrupt shared memory)"));
  }
  const std::int32_t pid = single_copy_.pids[static_cast<std::size_t>(peer)];
  for (std::size_t done = 0; done < into.size(); done += kReadPiece) {
    const std::size_t length = std::min(kReadPiece, into.size() - done);
    const int error =
        shm::read_peer_memory(pid, posted.address + offset + done, into.subspan(done, length));
    if (error != 0) fail_read(call, number, peer, error);
  }
}

void ShmCollectives::fail_read(const CollectiveCall& call, std::uint64_t number, int peer,
                               int error) {
  // A failure known already (a dead peer's connection) is the one every rank reports.
  latch_.rethrow_if_tripped(hooks_.site(call.describe(), -1, {}));
  // A peer that failed first may have freed the buffer under the read.
  if (node_.control(peer).abandoned.load() > number) fail_abandoned(call, peer);
  const std::string rank = std::to_string(node_.world_rank(peer));
  const std::string what = "reading rank " + rank + "'s buffer (single copy, process_vm_readv): " +
                           shm::describe_read_failure(error);
  if (error == ESRCH) {
    fail_with(CollectiveError(ErrorKind::peer_lost, site_of(call, peer), what,
                              "did rank " + rank + " die or get killed?"));
  }
  if (error == EPERM || error == EACCES) {
    fail_with(CollectiveError(
        ErrorKind::backend_unavailable, site_of(call, peer), what + ", though it could at set-up",
        "did this rank or rank " + rank +
            " change its user, turn dumpable off or install a seccomp filter after rlx::init? "
            "RLX_TUNE=<collective>:shared_memory keeps single copy off"));
  }
  if (error == ENOMEM) {
    fail_with(CollectiveError(ErrorKind::resource_exhausted, site_of(call, peer), what,
                              "the kernel could not pin the pages of the read"));
  }
  fail_with(CollectiveError(ErrorKind::protocol_violation, site_of(call, peer), what,
                            "an address rank " + rank +
                                " posted that is not its buffer (corrupt shared memory?), or "
                                "memory the kernel cannot read across processes"));
}

void ShmCollectives::finish_reads(const CollectiveCall& call, std::uint64_t number,
                                  bool read_from) {
  // A source that gave up on this call may have reused its buffer while
  // this rank read it: what was read is not trusted then.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  for (int peer = 0; peer < local_size(); ++peer) {
    if (node_.control(peer).abandoned.load() > number) fail_abandoned(call, peer);
  }
  const std::uint64_t ticket = take_ticket(call);
  publish(Phase::done, ticket);
  if (read_from) wait_for_all(Phase::done, ticket, call);
}

void ShmCollectives::all_gather_single_copy(const CollectiveCall& call, ConstElementSpan input,
                                            ElementSpan output) {
  const auto* in = static_cast<const std::byte*>(input.data);
  auto* out = static_cast<std::byte*>(output.data);
  const std::size_t block = input.bytes();
  const int me = local_rank(), n = local_size();
  single_copy_call(call, in, block, [&](std::uint64_t number) {
    std::byte* own = out + static_cast<std::size_t>(me) * block;
    if (block > 0 && own != in) std::memcpy(own, in, block);
    // Each rank starts with its next peer, so no source has every reader at once.
    for (int k = 1; k < n; ++k) {
      const int j = (me + k) % n;
      read_posted(call, number, j, 0, {out + static_cast<std::size_t>(j) * block, block});
    }
  });
}

void ShmCollectives::broadcast_single_copy(const CollectiveCall& call, ElementSpan data, int root) {
  auto* bytes = static_cast<std::byte*>(data.data);
  const bool is_root = local_rank() == root;
  single_copy_call(call, is_root ? bytes : nullptr, data.bytes(), [&](std::uint64_t number) {
    if (!is_root) read_posted(call, number, root, 0, {bytes, data.bytes()});
  });
}

void ShmCollectives::gather_single_copy(const CollectiveCall& call, ConstElementSpan input,
                                        ElementSpan output) {
  const auto* in = static_cast<const std::byte*>(input.data);
  const std::size_t block = input.bytes();
  const bool is_root = local_rank() == node_.local_of(call.root);
  auto* out = static_cast<std::byte*>(output.data);
  single_copy_call(call, is_root ? nullptr : in, block, [&](std::uint64_t number) {
    if (!is_root) return;
    for (int j = 0; j < local_size(); ++j) {
      std::byte* to = out + static_cast<std::size_t>(node_.world_rank(j)) * block;
      if (j != local_rank()) {
        read_posted(call, number, j, 0, {to, block});
      } else if (block > 0 && to != in) {
        std::memmove(to, in, block);
      }
    }
  });
}

void ShmCollectives::scatter_single_copy(const CollectiveCall& call, ConstElementSpan input,
                                         ElementSpan output) {
  const std::size_t block = output.bytes();
  const int root = node_.local_of(call.root);
  const bool is_root = local_rank() == root;
  const auto* in = static_cast<const std::byte*>(input.data);
  const std::size_t offset = static_cast<std::size_t>(node_.world_rank(local_rank())) * block;
  auto* out = static_cast<std::byte*>(output.data);
  const std::size_t all = block * static_cast<std::size_t>(local_size());
  single_copy_call(call, is_root ? in : nullptr, all, [&](std::uint64_t number) {
    if (!is_root) {
      read_posted(call, number, root, offset, {out, block});
    } else if (block > 0 && in + offset != out) {
      std::memmove(out, in + offset, block);
    }
  });
}

}  // namespace rlx
