#include "rlx/launcher/slurm_allocation.h"

#include <map>
#include <string>

#include <gtest/gtest.h>

#include "tests/support/expect_error.h"

namespace rlx::launcher {
namespace {

using Strings = std::vector<std::string>;

using testing::expect_error_with;

TEST(SlurmAllocation, ExpandsCompressedHostListsKeepingZeroPadding) {
  EXPECT_EQ(expand_host_list("node[01-03,07],gpu5", "L"),
            (Strings{"node01", "node02", "node03", "node07", "gpu5"}));
  EXPECT_EQ(expand_host_list("n[8-10]", "L"), (Strings{"n8", "n9", "n10"}));
  EXPECT_EQ(expand_host_list("n[08-10]", "L"), (Strings{"n08", "n09", "n10"}));
  EXPECT_EQ(expand_host_list("rack[1-2]-node[1,3]", "L"),
            (Strings{"rack1-node1", "rack1-node3", "rack2-node1", "rack2-node3"}));
  EXPECT_EQ(expand_host_list("single", "L"), (Strings{"single"}));
  expect_error_with<HostfileError>([] { expand_host_list("node[1-", "SLURM_JOB_NODELIST"); },
                                   "SLURM_JOB_NODELIST: unbalanced brackets");
  expect_error_with<HostfileError>([] { expand_host_list("node[3-1]", "L"); },
                                   "'3-1' is not a range");
  expect_error_with<HostfileError>([] { expand_host_list("a,,b", "L"); }, "an empty name");
}

TEST(SlurmAllocation, ExpandsTasksPerNode) {
  EXPECT_EQ(expand_tasks_per_node("2(x3),1", "T"), (std::vector<int>{2, 2, 2, 1}));
  EXPECT_EQ(expand_tasks_per_node("4", "T"), (std::vector<int>{4}));
  expect_error_with<HostfileError>([] { expand_tasks_per_node("2(x0)", "SLURM_TASKS_PER_NODE"); },
                                   "SLURM_TASKS_PER_NODE: '2(x0)'");
  expect_error_with<HostfileError>([] { expand_tasks_per_node("two", "T"); },
                                   "'two' is not N or N(xK)");
}

TEST(SlurmAllocation, ReadsTheAllocationFromTheEnvironment) {
  std::map<std::string, std::string> vars = {{"SLURM_JOB_NODELIST", "c[1-3]"},
                                             {"SLURM_TASKS_PER_NODE", "2(x2),4"}};
  const auto lookup = [&](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
  const auto hosts = slurm_allocation(lookup);
  ASSERT_TRUE(hosts);
  EXPECT_EQ(*hosts,
            (std::vector<HostSlots>{{"c1", 2, {}, {}}, {"c2", 2, {}, {}}, {"c3", 4, {}, {}}}));
  vars["SLURM_TASKS_PER_NODE"] = "2";
  expect_error_with<HostfileError>([&] { slurm_allocation(lookup); },
                                   "gives 1 hosts but SLURM_JOB_NODELIST lists 3");
  vars.clear();
  EXPECT_FALSE(slurm_allocation(lookup));
}

TEST(SlurmAllocation, StartsTheAgentAsOneTaskOfANewStepOnItsHost) {
  const Strings argv = srun_agent_argv("c2", "/opt/rlx/bin/rlxrun");
  EXPECT_EQ(argv.front(), "srun");
  EXPECT_NE(std::find(argv.begin(), argv.end(), "--nodelist=c2"), argv.end());
  EXPECT_EQ(argv[argv.size() - 2], "/opt/rlx/bin/rlxrun");
  EXPECT_EQ(argv.back(), "--remote-agent");
}

}  // namespace
}  // namespace rlx::launcher
