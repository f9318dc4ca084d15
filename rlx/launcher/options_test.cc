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
  expect_usage_error({"-nfour", "p"}, "-n 'four'");
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

TEST(RlxrunOptions, MapAndBindAsMpirunSpellsThem) {
  ::unsetenv("RLX_BIND_TO");  // the test presets set it
  const Options defaults = parse_options({"-n", "2", "p"});
  EXPECT_EQ(defaults.bind_to, BindTo::automatic);
  EXPECT_EQ(defaults.map_by, MapBy::slot);
  const Options o = parse_options({"-n", "2", "--bind-to", "core", "--map-by=node", "p"});
  EXPECT_EQ(o.bind_to, BindTo::core);
  EXPECT_EQ(o.map_by, MapBy::node);
  EXPECT_EQ(parse_options({"-n", "2", "--bind-to=hwthread", "p"}).bind_to, BindTo::hwthread);
  EXPECT_EQ(parse_options({"-n", "2", "--bind-to", "none", "p"}).bind_to, BindTo::none);
  expect_usage_error({"-n", "2", "--bind-to", "sockets", "p"},
                     "--bind-to 'sockets': expected core, hwthread, package (or socket) or none");
  expect_usage_error({"-n", "2", "--map-by", "ppr:2:node", "p"}, "--map-by 'ppr:2:node'");
  expect_usage_error({"-n", "2", "--bind-to"}, "--bind-to needs a value");
}

TEST(RlxrunOptions, TheProgramsOwnWordsAreNeverRlxrunsOptions) {
  const Options o = parse_options({"-np", "2", "-x", "A=1", "python3", "-x", "--help", "--"});
  EXPECT_EQ(o.program, (std::vector<std::string>{"python3", "-x", "--help", "--"}));
  EXPECT_FALSE(o.show_help);
  expect_usage_error({"-n", "1", "-", "a"}, "unknown option '-'");
  EXPECT_EQ(parse_options({"-n", "1", "--", "-n", "3"}).program,
            (std::vector<std::string>{"-n", "3"}));
  expect_usage_error({"-n", "1", "--hostf", "h", "p"}, "unknown option '--hostf'");  // no guessing
  // Values that are also flags' names are values.
  const Options named = parse_options({"--hostfile", "hostfile", "--cwd", "np", "-x", "n=1", "p"});
  EXPECT_EQ(named.hostfile, "hostfile");
  EXPECT_EQ(named.cwd, "np");
  EXPECT_EQ(named.program, std::vector<std::string>{"p"});
  EXPECT_EQ(parse_options({"-n", "1", "backend"}).program, std::vector<std::string>{"backend"});
}

TEST(RlxrunOptions, EqualsAfterAShortFlagAsAfterALongOne) {
  EXPECT_EQ(parse_options({"-n=2", "p"}).num_ranks, 2);
  EXPECT_EQ(parse_options({"-n", "1", "-x=A=1", "p"}).env.front(),
            std::make_pair(std::string("A"), std::string("1")));
  EXPECT_EQ(parse_options({"-H=a:2", "p"}).host_list, "a:2");
  expect_usage_error({"-n", "=4", "p"}, "-n '=4'");  // '=' only when attached
}

TEST(RlxrunOptions, MistypedFlagsAreErrorsNotValues) {
  expect_usage_error({"---n", "2", "p"}, "unknown option '---n'");
  expect_usage_error({"-n", "1", "-"}, "unknown option '-'");
  EXPECT_EQ(parse_options({"-n", "1", "--", "-"}).program, std::vector<std::string>{"-"});
  expect_usage_error({"-np4", "p"}, "unknown option '-np4'");
  expect_usage_error({"-n", "1", "--output-dir", "--dry-run", "p"},
                     "--output-dir needs a value, not the option --dry-run");
  expect_usage_error({"-n", "1", "--cwd", "-np", "p"}, "not the option -np");
  expect_usage_error({"-n", "1", "--cwd=", "p"}, "--cwd needs a value after '='");
  expect_usage_error({"-n", "1", "--tag-output=", "p"}, "--tag-output takes no value");
  expect_usage_error({"-n", "1", "--program=", "p"}, "unknown option '--program'");
  EXPECT_EQ(parse_options({"-n", "1", "--cwd", "-5", "p"}).cwd, "-5");  // not a flag
}

TEST(RlxrunOptions, RlxBindToSetsTheDefaultBinding) {
  ::setenv("RLX_BIND_TO", "none", 1);
  EXPECT_EQ(parse_options({"-n", "1", "p"}).bind_to, BindTo::none);
  EXPECT_EQ(parse_options({"-n", "1", "--bind-to", "core", "p"}).bind_to, BindTo::core);
  ::setenv("RLX_BIND_TO", "socket", 1);
  EXPECT_EQ(parse_options({"-n", "1", "p"}).bind_to, BindTo::package);
  ::setenv("RLX_BIND_TO", "cores", 1);
  expect_usage_error({"-n", "1", "p"}, "RLX_BIND_TO 'cores'");
  ::unsetenv("RLX_BIND_TO");
}

TEST(RlxrunOptions, ErrorsNameShortFlagsAsTyped) {
  for (const char* flag : {"-n", "-x"}) {
    try {
      parse_options({flag});
      FAIL() << flag << " without a value was accepted";
    } catch (const UsageError& error) {
      EXPECT_EQ(std::string(error.what()), std::string(flag) + " needs a value");
    }
  }
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
