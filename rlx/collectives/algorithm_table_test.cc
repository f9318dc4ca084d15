#include "rlx/collectives/algorithm_table.h"

#include <set>

#include <gtest/gtest.h>

#include "rlx/transport/errors.h"

namespace rlx {
namespace {

TEST(AlgorithmTable, EveryCollectiveHasATableInKindOrderWithDistinctNames) {
  ASSERT_EQ(all_tables().size(), static_cast<std::size_t>(CollectiveKind::scatter));
  for (int k = 1; k <= static_cast<int>(CollectiveKind::scatter); ++k) {
    const auto kind = static_cast<CollectiveKind>(k);
    const CollectiveTable& table = table_of(kind);
    EXPECT_EQ(table.collective, kind);
    ASSERT_FALSE(table.algorithms.empty()) << name_of(kind);
    std::set<std::string_view> names;
    for (const Algorithm& algorithm : table.algorithms) {
      EXPECT_TRUE(names.insert(algorithm.name).second) << name_of(kind) << " " << algorithm.name;
      EXPECT_EQ(find_algorithm(kind, algorithm.name), &algorithm);
      EXPECT_FALSE(algorithm.applies.empty());
    }
    EXPECT_EQ(find_algorithm(kind, "no_such_algorithm"), nullptr);
  }
}

// The network choice of `kind` for `bytes` (count in f32) at `ranks`.
std::string_view chosen(CollectiveKind kind, std::size_t bytes, int ranks,
                        const Tuning& tuning = Tuning{}) {
  const CollectiveCall call{kind, ReduceOp::sum, Dtype::f32, bytes / 4, 0};
  const CallSituation situation{.call = call, .ranks = ranks, .bytes = bytes};
  return choose_algorithm(situation, tuning).algorithm->name;
}

// Every collective's default names one of its own rows in every layout a
// group without a same-host path can have.
TEST(AlgorithmTable, EveryDefaultIsARowOfItsTable) {
  for (const CollectiveTable& table : all_tables()) {
    for (const int ranks : {2, 3, 4, 100}) {
      for (const std::size_t bytes : {std::size_t{0}, std::size_t{4}, std::size_t{64} << 20}) {
        const CollectiveCall call{table.collective, ReduceOp::sum, Dtype::f32, bytes / 4, 0};
        const CallSituation situation{.call = call, .ranks = ranks, .bytes = bytes};
        const Algorithm* chosen = table.by_default(situation, Tuning{}).algorithm;
        EXPECT_TRUE(chosen >= table.algorithms.data() &&
                    chosen < table.algorithms.data() + table.algorithms.size())
            << name_of(table.collective);
        EXPECT_TRUE(chosen->cannot_run(situation).empty()) << name_of(table.collective);
      }
    }
  }
}

TEST(AlgorithmTable, DefaultsFollowTheCrossoversAndThresholds) {
  EXPECT_EQ(chosen(CollectiveKind::all_reduce, 4, 4), "recursive_doubling");
  EXPECT_EQ(chosen(CollectiveKind::all_reduce, 64 << 20, 4), "ring");
  EXPECT_EQ(chosen(CollectiveKind::all_gather, 1024, 4), "recursive_doubling");
  EXPECT_EQ(chosen(CollectiveKind::all_gather, 1024, 3), "direct");
  EXPECT_EQ(chosen(CollectiveKind::all_gather, 4 << 20, 3), "ring");
  EXPECT_EQ(chosen(CollectiveKind::all_gather, 1024, 100), "ring");  // too many for one step
  EXPECT_EQ(chosen(CollectiveKind::all_gather, 1024, 64), "recursive_doubling");
  EXPECT_EQ(chosen(CollectiveKind::all_gather, 1 << 16, 64), "direct");
  EXPECT_EQ(chosen(CollectiveKind::all_gather, 1024, 65), "ring");
  EXPECT_EQ(chosen(CollectiveKind::all_to_all, 1024, 4), "direct");
  EXPECT_EQ(chosen(CollectiveKind::all_to_all, 1 << 20, 4), "pairwise");
  EXPECT_EQ(chosen(CollectiveKind::barrier, 0, 4), "dissemination");
  EXPECT_EQ(chosen(CollectiveKind::scatter, 1024, 4), "direct");
  EXPECT_EQ(chosen(CollectiveKind::broadcast, 1024, 4), "binomial");
}

Tuning forcing(const char* rules) {
  launch_env::LaunchEnv env;
  env.tune = launch_env::parse_tune(rules);
  return tuning_for(env);
}

TEST(AlgorithmTable, RlxTuneForcesWithinItsRangesOnly) {
  const Tuning tuning = forcing("all_gather:0-256k:ring,256k-inf:direct;all_to_all:pairwise");
  EXPECT_EQ(chosen(CollectiveKind::all_gather, 1024, 4, tuning), "ring");
  EXPECT_EQ(chosen(CollectiveKind::all_gather, 256 << 10, 4, tuning), "direct");
  EXPECT_EQ(chosen(CollectiveKind::all_to_all, 4, 4, tuning), "pairwise");
  EXPECT_EQ(chosen(CollectiveKind::all_reduce, 4, 4, tuning), "recursive_doubling");
  EXPECT_NE(forcing("all_reduce:ring").forced_fingerprint, tuning.forced_fingerprint);
  EXPECT_EQ(forcing("").forced_fingerprint, Tuning{}.forced_fingerprint);
}

std::string error_choosing(CollectiveKind kind, std::size_t bytes, int ranks, const char* rules) {
  try {
    chosen(kind, bytes, ranks, forcing(rules));
  } catch (const CollectiveError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::invalid_argument);
    return e.what();
  }
  ADD_FAILURE() << rules << " ran";
  return {};
}

TEST(AlgorithmTable, AForcedAlgorithmThatCannotRunIsRefusedSayingWhy) {
  const std::string odd =
      error_choosing(CollectiveKind::all_gather, 1024, 3, "all_gather:recursive_doubling");
  EXPECT_NE(odd.find("RLX_TUNE all_gather:recursive_doubling forces recursive_doubling, which "
                     "cannot run here: it needs a power-of-two group, not 3 ranks"),
            std::string::npos)
      << odd;
  EXPECT_NE(odd.find("all_gather of 256 x f32"), std::string::npos) << odd;
  const std::string tiny = error_choosing(CollectiveKind::all_reduce, 4, 4, "all_reduce:ring");
  EXPECT_NE(tiny.find("1 elements are fewer than 4 ranks"), std::string::npos) << tiny;
  const std::string shm =
      error_choosing(CollectiveKind::all_reduce, 4, 4, "all_reduce:shared_memory");
  EXPECT_NE(shm.find("needs every rank of the group on one host"), std::string::npos) << shm;
  const std::string many = error_choosing(CollectiveKind::all_to_all, 4, 100, "all_to_all:direct");
  EXPECT_NE(many.find("holds 64 peers, not 99"), std::string::npos) << many;
}

TEST(AlgorithmTable, TheOlderAllReduceSettingFallsBackWhereItCannotRun) {
  launch_env::LaunchEnv env;
  env.all_reduce_algorithm = launch_env::AllReduceAlgorithm::ring;
  const Tuning tuning = tuning_for(env);
  EXPECT_EQ(chosen(CollectiveKind::all_reduce, 4, 4, tuning), "recursive_doubling");
  EXPECT_EQ(chosen(CollectiveKind::all_reduce, 64, 4, tuning), "ring");
}

// RLX_TUNE's ranges are the whole call's bytes: a hierarchical step (whose
// rails' blocks may differ by an element) keeps its default, where the
// older setting still applies, falling back where it cannot run.
TEST(AlgorithmTable, HierarchicalStepsKeepTheirDefaultUnderRlxTune) {
  const CollectiveCall call{CollectiveKind::all_reduce, ReduceOp::sum, Dtype::f32, 1 << 20, 0};
  const CallSituation step{.call = call, .ranks = 4, .bytes = 4 << 20, .nested = true};
  EXPECT_EQ(choose_algorithm(step, forcing("all_reduce:recursive_doubling")).algorithm->name,
            "ring");
  launch_env::LaunchEnv env;
  env.all_reduce_algorithm = launch_env::AllReduceAlgorithm::recursive_doubling;
  EXPECT_EQ(choose_algorithm(step, tuning_for(env)).algorithm->name, "recursive_doubling");
}

TEST(AlgorithmTable, RanksAgreeOnWhatTheRulesMeanNotHowTheyAreWritten) {
  EXPECT_EQ(forcing("all_gather:0-256k:ring").forced_fingerprint,
            forcing("all_gather:0-262144:ring").forced_fingerprint);
  EXPECT_NE(forcing("all_gather:0-256k:ring").forced_fingerprint,
            forcing("all_gather:0-256k:direct").forced_fingerprint);
  EXPECT_NE(forcing("all_gather:0-256k:ring").forced_fingerprint,
            forcing("all_gather:0-255k:ring").forced_fingerprint);
}

std::string error_reading(const char* rules) {
  try {
    forcing(rules);
  } catch (const CollectiveError& e) {
    return e.what();
  }
  ADD_FAILURE() << rules << " was accepted";
  return {};
}

TEST(AlgorithmTable, UnknownNamesAreRefusedListingTheKnownOnes) {
  const std::string algorithm = error_reading("all_gather:0-1k:bruck");
  EXPECT_NE(algorithm.find("all_gather has no algorithm 'bruck'"), std::string::npos) << algorithm;
  EXPECT_NE(algorithm.find("recursive_doubling, direct, ring, shared_memory"), std::string::npos)
      << algorithm;
  const std::string collective = error_reading("allreduce:ring");
  EXPECT_NE(collective.find("'allreduce' is not a collective"), std::string::npos) << collective;
  EXPECT_NE(collective.find("all_reduce, all_gather, reduce_scatter"), std::string::npos)
      << collective;
}

TEST(ChoiceLog, SaysYesOncePerCollectiveAndSizeClass) {
  ChoiceLog log;
  EXPECT_TRUE(log.first(CollectiveKind::all_reduce, 4));
  EXPECT_FALSE(log.first(CollectiveKind::all_reduce, 7));  // 4..7: one class
  EXPECT_TRUE(log.first(CollectiveKind::all_reduce, 8));
  EXPECT_TRUE(log.first(CollectiveKind::all_gather, 4));
  EXPECT_TRUE(log.first(CollectiveKind::all_reduce, 0));
  EXPECT_FALSE(log.first(CollectiveKind::all_reduce, 0));
  EXPECT_TRUE(log.first(CollectiveKind::all_reduce, ~std::size_t{0}));
}

}  // namespace
}  // namespace rlx
