#include "rlx/transport/tune_rules.h"

#include <gtest/gtest.h>

#include "rlx/transport/errors.h"

namespace rlx::launch_env {
namespace {

TEST(TuneRules, ReadsRangesPerCollectiveInTheOrderWritten) {
  const auto rules =
      parse_tune("all_gather:0-256k:recursive_doubling,256k-inf:ring;all_reduce:ring;");
  ASSERT_EQ(rules.size(), 3u);
  EXPECT_EQ(rules[0], (TuneRule{"all_gather", 0, 256 << 10, "recursive_doubling",
                                "all_gather:0-256k:recursive_doubling"}));
  EXPECT_EQ(rules[1],
            (TuneRule{"all_gather", 256 << 10, kNoUpperBound, "ring", "all_gather:256k-inf:ring"}));
  EXPECT_EQ(rules[2], (TuneRule{"all_reduce", 0, kNoUpperBound, "ring", "all_reduce:ring"}));
  EXPECT_EQ(parse_tune("broadcast:1-2M:binomial")[0].to_bytes, std::uint64_t{2} << 20);
  EXPECT_EQ(parse_tune("broadcast:0-3g:binomial")[0].to_bytes, std::uint64_t{3} << 30);
  EXPECT_TRUE(parse_tune("").empty());
  EXPECT_EQ(parse_tune("all_gather:ring#all_reduce:ring"),
            parse_tune("all_gather:ring;all_reduce:ring"));
}

std::string error_of(std::string_view text) {
  try {
    parse_tune(text);
  } catch (const CollectiveError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::invalid_argument) << text;
    return e.what();
  }
  ADD_FAILURE() << "accepted " << text;
  return {};
}

TEST(TuneRules, MalformedValuesNameThePartAndTheSyntax) {
  EXPECT_NE(error_of("ring").find("'ring' does not start with a collective's name"),
            std::string::npos);
  EXPECT_NE(error_of("all_gather:").find("does not end in an algorithm's name"), std::string::npos);
  EXPECT_NE(error_of("all_gather:10-x:ring").find("'10-x:ring' does not start with a size range"),
            std::string::npos);
  EXPECT_NE(error_of("all_gather:inf-10:ring").find("size range"), std::string::npos);
  EXPECT_NE(error_of("all_gather:8-8:ring").find("empty range"), std::string::npos);
  EXPECT_NE(error_of("all_gather:0-1k:ring,512-inf:direct").find("overlaps all_gather:0-1k:ring"),
            std::string::npos);
  EXPECT_NE(error_of("all_gather:ring;all_gather:direct").find("overlaps"), std::string::npos);
  EXPECT_NE(error_of("all_gather:99999999999999999999-inf:ring").find("size range"),
            std::string::npos);
  EXPECT_NE(error_of("all_gather:0-17179869184g:ring").find("size range"), std::string::npos);
  EXPECT_NE(error_of("All Gather:ring").find("collective's name"), std::string::npos);
  EXPECT_NE(error_of(std::string(5000, 'a')).find("longer than 4096"), std::string::npos);
  EXPECT_NE(error_of("all_gather").find("FROM-TO:ALGORITHM"), std::string::npos);
}

}  // namespace
}  // namespace rlx::launch_env
