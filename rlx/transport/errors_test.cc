#include "rlx/transport/errors.h"

#include <cerrno>

#include <gtest/gtest.h>
#include <sys/resource.h>

namespace rlx {
namespace {

TEST(CollectiveError, MessageNamesRankPeerOperationSizesAndHint) {
  const CollectiveError error(ErrorKind::peer_lost,
                              {.rank = 1,
                               .world_size = 4,
                               .peer = 2,
                               .operation = "all_sum",
                               .sizes = describe_elements(1024, Dtype::f32)},
                              "connection reset", "rank 2's own output");
  EXPECT_STREQ(error.what(),
               "rlx rank 1 of 4: all_sum (1024 x f32 (4 KiB)) with peer rank 2: peer lost: "
               "connection reset. Check: rank 2's own output");
  EXPECT_EQ(error.kind(), ErrorKind::peer_lost);
  EXPECT_EQ(error.rank(), 1);
  EXPECT_EQ(error.peer(), 2);
  EXPECT_EQ(error.operation(), "all_sum");
}

TEST(CollectiveError, IsAnRlxErrorAndLeavesOutUnknownFields) {
  try {
    throw CollectiveError(ErrorKind::backend_unavailable, {.operation = "init"}, "not built");
  } catch (const Error& error) {
    EXPECT_STREQ(error.what(), "rlx: init: backend unavailable: not built");
  }
}

// A call that wakes to a failure recorded elsewhere names itself, but the
// failure stays blamed on the rank that caused it.
TEST(CollectiveError, SeenFromAnotherCallKeepsTheRankItBlames) {
  const CollectiveError cause(ErrorKind::peer_lost, {.rank = 0, .world_size = 4, .peer = 3},
                              "rank 3 has shut down its transport");
  const CollectiveError seen =
      cause.seen_from({.rank = 0, .world_size = 4, .peer = 1, .operation = "all_sum"});
  EXPECT_EQ(seen.peer(), 3);
  EXPECT_EQ(seen.operation(), "all_sum");
  const CollectiveError unblamed(ErrorKind::timeout, {.rank = 0}, "late");
  EXPECT_EQ(unblamed.seen_from({.peer = 2}).peer(), 2);
}

TEST(CollectiveError, EveryKindHasAName) {
  for (auto kind : {ErrorKind::timeout, ErrorKind::peer_lost, ErrorKind::protocol_violation,
                    ErrorKind::mismatch, ErrorKind::invalid_argument,
                    ErrorKind::backend_unavailable, ErrorKind::resource_exhausted}) {
    EXPECT_NE(name_of(kind), "error");
  }
}

TEST(FormatBytes, ReadsLikeAPerson) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(1023), "1023 B");
  EXPECT_EQ(format_bytes(4096), "4 KiB");
  EXPECT_EQ(format_bytes(1536 * 1024), "1.5 MiB");
  EXPECT_EQ(format_bytes(std::size_t{64} << 20), "64 MiB");
  EXPECT_EQ(describe_elements(3, Dtype::bf16), "3 x bf16 (6 B)");
}

TEST(OutOfDescriptors, IsResourceExhaustedNamingTheLimitAndWhatToDo) {
  EXPECT_TRUE(is_out_of_descriptors(EMFILE));
  EXPECT_TRUE(is_out_of_descriptors(ENFILE));
  EXPECT_FALSE(is_out_of_descriptors(ECONNREFUSED));
  rlimit files{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &files), 0);
  const CollectiveError error =
      out_of_descriptors({.rank = 1, .world_size = 2, .operation = "listen"}, "a socket", EMFILE);
  EXPECT_EQ(error.kind(), ErrorKind::resource_exhausted);
  EXPECT_NE(std::string(error.what())
                .find("cannot create a socket: Too many open files: this "
                      "process's limit of " +
                      std::to_string(files.rlim_cur) + " open files (ulimit -n) is reached"),
            std::string::npos)
      << error.what();
  EXPECT_NE(error.hint().find("raise it (ulimit -n"), std::string::npos);
  EXPECT_NE(std::string(out_of_descriptors({}, "x", ENFILE).what()).find("(fs.file-max)"),
            std::string::npos);
}

TEST(Excerpt, IsShortAndPrintable) {
  EXPECT_EQ(excerpt("a\x01"
                    "b\x7f"),
            "a\\x01b\\x7f");
  EXPECT_EQ(excerpt(std::string(100, 'x'), 4), "xxxx... (100 B in all)");
  EXPECT_EQ(excerpt("short"), "short");
}

}  // namespace
}  // namespace rlx
