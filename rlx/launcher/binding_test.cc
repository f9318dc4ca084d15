#include "rlx/launcher/binding.h"

#include <stdexcept>

#include <gtest/gtest.h>
#include <sched.h>

#include "rlx/launcher/job.h"
#include "rlx/launcher/options.h"

namespace rlx::launcher {
namespace {

// Two cores of two hardware threads each: CPUs 0 and 2 share a core, as
// Linux numbers siblings on many x86 machines.
const CpuTopology kTwoCoresFourThreads{.cores = {{0, 2}, {1, 3}}, .packages = {{0, 1, 2, 3}}};
// Two packages of two single-thread cores.
const CpuTopology kTwoPackages{.cores = {{0}, {1}, {2}, {3}}, .packages = {{0, 1}, {2, 3}}};

TEST(Binding, CoreGivesEachRankACoreWithAllItsThreads) {
  EXPECT_EQ(cpus_for_rank(BindTo::core, 0, 2, kTwoCoresFourThreads), (std::vector<int>{0, 2}));
  EXPECT_EQ(cpus_for_rank(BindTo::core, 1, 2, kTwoCoresFourThreads), (std::vector<int>{1, 3}));
}

TEST(Binding, HwthreadFillsEveryCoreBeforeSharingOne) {
  EXPECT_EQ(cpus_for_rank(BindTo::hwthread, 0, 4, kTwoCoresFourThreads), std::vector<int>{0});
  EXPECT_EQ(cpus_for_rank(BindTo::hwthread, 1, 4, kTwoCoresFourThreads), std::vector<int>{1});
  EXPECT_EQ(cpus_for_rank(BindTo::hwthread, 2, 4, kTwoCoresFourThreads), std::vector<int>{2});
  EXPECT_EQ(cpus_for_rank(BindTo::hwthread, 3, 4, kTwoCoresFourThreads), std::vector<int>{3});
}

TEST(Binding, PackageGivesRanksInBlocks) {
  EXPECT_EQ(cpus_for_rank(BindTo::package, 0, 4, kTwoPackages), (std::vector<int>{0, 1}));
  EXPECT_EQ(cpus_for_rank(BindTo::package, 1, 4, kTwoPackages), (std::vector<int>{0, 1}));
  EXPECT_EQ(cpus_for_rank(BindTo::package, 2, 4, kTwoPackages), (std::vector<int>{2, 3}));
  EXPECT_EQ(cpus_for_rank(BindTo::package, 2, 3, kTwoPackages), (std::vector<int>{2, 3}));
}

TEST(Binding, AutomaticDoesWhatMpirunDoes) {
  // A core each for up to 2 ranks.
  EXPECT_EQ(cpus_for_rank(BindTo::automatic, 1, 2, kTwoCoresFourThreads), (std::vector<int>{1, 3}));
  EXPECT_EQ(automatic_policy(2, kTwoPackages), BindTo::core);
  // More: a package each where there are several, nothing where there is one.
  EXPECT_EQ(automatic_policy(3, kTwoPackages), BindTo::package);
  EXPECT_EQ(automatic_policy(3, kTwoCoresFourThreads), BindTo::none);
  // More ranks than cores: nothing.
  EXPECT_EQ(automatic_policy(5, kTwoPackages), BindTo::none);
  EXPECT_TRUE(cpus_for_rank(BindTo::automatic, 1, 3, kTwoCoresFourThreads).empty());
  EXPECT_TRUE(cpus_for_rank(BindTo::none, 0, 1, kTwoCoresFourThreads).empty());
  EXPECT_TRUE(cpus_for_rank(BindTo::automatic, 0, 1, CpuTopology{}).empty());  // nothing known
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
  EXPECT_THROW(cpus_for_rank(BindTo::core, 0, 1, CpuTopology{}), std::runtime_error);
}

TEST(Binding, ThisHostsTopologyHoldsExactlyTheCpusThisProcessMayUse) {
  cpu_set_t allowed;
  ASSERT_EQ(sched_getaffinity(0, sizeof allowed, &allowed), 0);
  const CpuTopology topology = this_host_topology();
  for (const auto* groups : {&topology.cores, &topology.packages}) {
    int cpus = 0;
    for (const auto& group : *groups) {
      EXPECT_FALSE(group.empty());
      for (int cpu : group) {
        EXPECT_TRUE(CPU_ISSET(cpu, &allowed)) << cpu;
        ++cpus;
      }
    }
    EXPECT_EQ(cpus, CPU_COUNT(&allowed));
  }
  EXPECT_EQ(cpu_list({0, 2, 5}), "0,2,5");
}

// "-H localhost,localhost" names this machine twice: its two ranks are
// each entry's local rank 0, but bind as this machine's ranks 0 and 1 (so
// --bind-to core needs two cores, and says so on a machine with one).
TEST(Binding, OneMachineNamedTwiceBindsEachRankToItsOwnCore) {
  Options unbound = parse_options({"-H", "localhost,localhost", "--bind-to", "none", "p"});
  const auto slots = plan_placement(unbound);
  ASSERT_EQ(slots.size(), 2u);
  EXPECT_EQ(slots[0].local_rank, slots[1].local_rank);
  EXPECT_EQ(slots[1].binding_slot, 1);
  EXPECT_EQ(slots[1].binding_slots, 2);

  Options bound = parse_options({"-H", "localhost,localhost", "--bind-to", "core", "p"});
  if (this_host_topology().cores.size() < 2) {
    EXPECT_THROW(plan_placement(bound), std::runtime_error);
    return;
  }
  const auto placed = plan_placement(bound);
  ASSERT_EQ(placed.size(), 2u);
  EXPECT_FALSE(placed[0].cpus.empty());
  EXPECT_NE(placed[0].cpus, placed[1].cpus);
}

}  // namespace
}  // namespace rlx::launcher
