// The errors of the distributed layer: one exception type with a kind, whose
// message says which rank saw what, in which operation, with which peer and
// sizes, and what to check next.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "rlx/core/dtype.h"
#include "rlx/core/error.h"

namespace rlx {

enum class ErrorKind {
  timeout,              // a deadline passed (RLX_TIMEOUT_S)
  peer_lost,            // a peer closed, reset or died
  protocol_violation,   // bytes on the wire that are not what the protocol allows
  mismatch,             // ranks called different collectives, or with different sizes
  invalid_argument,     // a bad call or a malformed setting (environment, options)
  backend_unavailable,  // the requested transport was not built or cannot start here
  resource_exhausted,   // a memory cap was reached
};

std::string_view name_of(ErrorKind kind);  // "peer lost", for messages
std::string_view id_of(ErrorKind kind);    // "peer_lost": the C API's and Python's name

// Where an error happened. Fields that do not apply keep their defaults and
// are left out of the message.
struct ErrorSite {
  int rank = -1;
  int world_size = -1;
  int peer = -1;
  std::string operation;  // "all_sum", "recv_bytes", "connect", ...
  std::string sizes;      // "1024 x f32 (4 KiB)", "tag 7, 12 B", ...
};

class CollectiveError : public Error {
 public:
  // `detail` says what happened; `hint` (optional) what to check.
  CollectiveError(ErrorKind kind, ErrorSite site, std::string_view detail,
                  std::string_view hint = {});

  ErrorKind kind() const { return kind_; }
  const ErrorSite& site() const { return site_; }
  int rank() const { return site_.rank; }
  int peer() const { return site_.peer; }
  const std::string& operation() const { return site_.operation; }
  const std::string& detail() const { return detail_; }
  const std::string& hint() const { return hint_; }
  // The same failure reported where another operation met it: a collective
  // that wakes to a failure its transport recorded elsewhere names itself
  // and its sizes, and keeps the peer the original blamed (the peer of
  // `site` only when the original names none).
  CollectiveError seen_from(ErrorSite site) const;

 private:
  ErrorKind kind_;
  ErrorSite site_;
  std::string detail_;
  std::string hint_;
};

// True for EMFILE and ENFILE: no file descriptor is left, to this process
// (ulimit -n) or to the system (fs.file-max).
bool is_out_of_descriptors(int error_number);

// resource_exhausted for `what` ("a socket to connect to ...") that could
// not be made for lack of descriptors (`error_number`: EMFILE or ENFILE):
// names the limit that was reached, its value, and what to do. A limit
// reached mid-setup otherwise surfaced as a peer that "never connected".
CollectiveError out_of_descriptors(ErrorSite site, std::string_view what, int error_number);

// peer_lost for a call that found `peer` closed (its group closed, or its
// process returned from main): "rank 1 has shut down its transport" and
// `what` after it, with what to check.
CollectiveError peer_shut_down(ErrorSite site, int peer, std::string_view what = "");

// "4 KiB", "1.5 MiB", "12 B": sizes as people read them.
std::string format_bytes(std::size_t bytes);

// At most `limit` characters of `text`, control bytes escaped as \xNN, and
// the whole's length when it is cut: what a message quotes of input that
// anyone may have written (a hostfile, a setting), however long.
std::string excerpt(std::string_view text, std::size_t limit = 80);

// "1024 x f32 (4 KiB)".
std::string describe_elements(std::size_t count, Dtype dtype);

}  // namespace rlx
