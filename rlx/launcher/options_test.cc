#include "rlx/launcher/options.h"

#include <cstdlib>

#include <gtest/gtest.h>

namespace rlx::launcher {
namespace {

void expect_usage_error(const std::vector<std::string>& args, const std::string& fragment) {
  try {
    parse_options(args);
    FAIL() << "accepted";
  } catch (const UsageError& error) {
    EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos) << error.what();
  }
}

TEST(RlxrunOptions, ParsesEveryFlagAndStopsAtTheProgram) {
  const Options o = parse_options({"-n",
                                   "4",
                                   "--backend=verbs",
                                   "--timeout",
                                   "2.5",
                                   "--env",
                                   "A=1",
                                   "-x",
                                   "B=x=y",
                                   "--cwd",
                                   "/tmp",
                                   "--no-tag-output",
                                   "--output-dir",
                                   "out",
                                   "--ifname",
                                   "eth1",
                                   "--timestamp-output",
                                   "./prog",
                                   "-n",
                                   "7"});
  EXPECT_EQ(o.num_ranks, 4);
  EXPECT_EQ(o.backend, "verbs");
  EXPECT_EQ(o.job_timeout, std::chrono::milliseconds(2500));
  ASSERT_EQ(o.env.size(), 2u);
  EXPECT_EQ(o.env[1], std::make_pair(std::string("B"), std::string("x=y")));
  EXPECT_EQ(o.cwd, "/tmp");
  EXPECT_FALSE(o.tag_output);
  EXPECT_TRUE(o.timestamp_output);
  EXPECT_EQ(o.output_dir, "out");
  EXPECT_EQ(o.ifname, "eth1");
  EXPECT_EQ(o.program, (std::vector<std::string>{"./prog", "-n", "7"}));
}

TEST(RlxrunOptions, DoubleDashEndsOptions) {
  const Options o = parse_options({"-n=2", "--", "--weird-program"});
  EXPECT_EQ(o.num_ranks, 2);
  EXPECT_EQ(o.program, (std::vector<std::string>{"--weird-program"}));
}

TEST(RlxrunOptions, RankCountsAsMpirunUsersWriteThem) {
  EXPECT_EQ(parse_options({"-n4", "p"}).num_ranks, 4);
  EXPECT_EQ(parse_options({"-np", "3", "p"}).num_ranks, 3);
  EXPECT_EQ(parse_options({"--np", "2", "p"}).num_ranks, 2);
  EXPECT_EQ(parse_options({"--np=5", "p"}).num_ranks, 5);
  // A host list without -n: every slot (plan_placement counts them).
  EXPECT_EQ(parse_options({"-H", "a:2,b", "p"}).num_ranks, 0);
  EXPECT_EQ(parse_options({"--hostfile", "hosts", "p"}).num_ranks, 0);
  expect_usage_error({"-nfour", "p"}, "unknown option '-nfour'");
}

TEST(RlxrunOptions, SwitchesTakeNoValue) {
  expect_usage_error({"-n", "2", "--tag-output=no", "p"}, "--tag-output takes no value");
  expect_usage_error({"-n", "2", "--oversubscribe=1", "p"}, "--oversubscribe takes no value");
  expect_usage_error({"--help=me"}, "--help takes no value");
}

TEST(RlxrunOptions, DashXPassesRlxrunsOwnVariableOn) {
  ::setenv("RLX_OPTIONS_TEST_VAR", "a b=c", 1);
  const Options o = parse_options({"-n", "2", "-x", "RLX_OPTIONS_TEST_VAR", "-x", "K=V", "p"});
  ASSERT_EQ(o.env.size(), 2u);
  EXPECT_EQ(o.env[0], std::make_pair(std::string("RLX_OPTIONS_TEST_VAR"), std::string("a b=c")));
  EXPECT_EQ(o.env[1], std::make_pair(std::string("K"), std::string("V")));
  ::unsetenv("RLX_OPTIONS_TEST_VAR");
  expect_usage_error({"-n", "2", "-x", "RLX_OPTIONS_TEST_VAR", "p"},
                     "RLX_OPTIONS_TEST_VAR is not set in rlxrun's environment");
  // --env is the explicit form: a bare name is an error there.
  ::setenv("RLX_OPTIONS_TEST_VAR", "1", 1);
  expect_usage_error({"-n", "2", "--env", "RLX_OPTIONS_TEST_VAR", "p"}, "expected NAME=VALUE");
  ::unsetenv("RLX_OPTIONS_TEST_VAR");
  ::setenv("RLX_RANK", "5", 1);
  expect_usage_error({"-n", "2", "-x", "RLX_RANK", "p"}, "set by rlxrun for each rank");
  ::unsetenv("RLX_RANK");
}

TEST(RlxrunOptions, HelpAndVersionNeedNothingElse) {
  EXPECT_TRUE(parse_options({"--help"}).show_help);
  EXPECT_TRUE(parse_options({"--version"}).show_version);
  EXPECT_NE(std::string(usage_text()).find("EXIT STATUS"), std::string::npos);
}

TEST(RlxrunOptions, BadCommandLinesSayWhatIsWrong) {
  ::unsetenv("SLURM_JOB_NODELIST");
  expect_usage_error({"./prog"}, "-n N is required");
  expect_usage_error({"-n", "2"}, "no program given");
  expect_usage_error({"-n", "zero", "p"}, "-n 'zero'");
  expect_usage_error({"-n", "0", "p"}, "-n '0'");
  expect_usage_error({"-n"}, "-n needs a value");
  expect_usage_error({"-n", "2", "--backend", "nccl", "p"}, "--backend 'nccl'");
  expect_usage_error({"-n", "2", "--timeout", "-1", "p"}, "--timeout '-1'");
  expect_usage_error({"-n", "2", "--env", "NOVALUE", "p"}, "NAME=VALUE");
  expect_usage_error({"-n", "2", "--env", "RLX_RANK=0", "p"}, "set by rlxrun for each rank");
  expect_usage_error({"-n", "2", "-x", "WORLD_SIZE=1", "p"}, "set by rlxrun for each rank");
  expect_usage_error({"-n", "2", "--frobnicate", "p"}, "unknown option '--frobnicate'");
}

}  // namespace
}  // namespace rlx::launcher
