#include "rlx/launcher/binding.h"

#include <stdexcept>

#include <gtest/gtest.h>
#include <sched.h>

namespace rlx::launcher {
namespace {

// Two cores of two hardware threads each: CPUs 0 and 2 share a core, as
// Linux numbers siblings on many x86 machines.
const CpuTopology kTwoCoresFourThreads{{{0, 2}, {1, 3}}};

TEST(Binding, CoreGivesEachRankACoreWithAllItsThreads) {
  EXPECT_EQ(cpus_for_rank(BindTo::core, 0, 2, kTwoCoresFourThreads), (std::vector<int>{0, 2}));
  EXPECT_EQ(cpus_for_rank(BindTo::core, 1, 2, kTwoCoresFourThreads), (std::vector<int>{1, 3}));
}

TEST(Binding, HwthreadGivesEachRankOneThread) {
  EXPECT_EQ(cpus_for_rank(BindTo::hwthread, 1, 4, kTwoCoresFourThreads), std::vector<int>{2});
  EXPECT_EQ(cpus_for_rank(BindTo::hwthread, 3, 4, kTwoCoresFourThreads), std::vector<int>{3});
}

TEST(Binding, AutomaticBindsOnlyWhereRanksDoNotOutnumberCores) {
  EXPECT_EQ(cpus_for_rank(BindTo::automatic, 1, 2, kTwoCoresFourThreads), (std::vector<int>{1, 3}));
  EXPECT_TRUE(cpus_for_rank(BindTo::automatic, 1, 3, kTwoCoresFourThreads).empty());
  EXPECT_TRUE(cpus_for_rank(BindTo::none, 0, 1, kTwoCoresFourThreads).empty());
  EXPECT_TRUE(cpus_for_rank(BindTo::core, 0, 1, CpuTopology{}).empty());  // nothing known
}

TEST(Binding, AnExplicitPolicyWithTooFewCoresSaysWhatToDo) {
  try {
    cpus_for_rank(BindTo::core, 0, 3, kTwoCoresFourThreads);
    FAIL() << "bound 3 ranks to 2 cores";
  } catch (const std::runtime_error& error) {
    EXPECT_STREQ(error.what(),
                 "--bind-to core: 3 ranks on this host but 2 cores to bind them to "
                 "(give --bind-to none, or fewer ranks)");
  }
  EXPECT_THROW(cpus_for_rank(BindTo::hwthread, 0, 5, kTwoCoresFourThreads), std::runtime_error);
}

TEST(Binding, ThisHostsTopologyHoldsExactlyTheCpusThisProcessMayUse) {
  cpu_set_t allowed;
  ASSERT_EQ(sched_getaffinity(0, sizeof allowed, &allowed), 0);
  int cpus = 0;
  for (const auto& core : this_host_topology().cores) {
    EXPECT_FALSE(core.empty());
    for (int cpu : core) {
      EXPECT_TRUE(CPU_ISSET(cpu, &allowed)) << cpu;
      ++cpus;
    }
  }
  EXPECT_EQ(cpus, CPU_COUNT(&allowed));
  EXPECT_EQ(cpu_list({0, 2, 5}), "0,2,5");
}

}  // namespace
}  // namespace rlx::launcher
