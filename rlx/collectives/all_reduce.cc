#include "rlx/collectives/algorithm_table.h"
#include "rlx/collectives/algorithms.h"

namespace rlx {

void all_reduce(Links& links, const CollectiveCall& call, ElementSpan data, const Tuning& tuning) {
  const CallSituation situation{.call = call,
                                .rank = links.rank(),
                                .ranks = links.world_size(),
                                .bytes = data.bytes(),
                                .nested = true};
  AlgorithmContext context{links, nullptr, tuning};
  run_chosen(context, situation, {.output = data});
}

}  // namespace rlx
