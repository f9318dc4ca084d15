// Collectives of a job that spans hosts with several ranks on some: inside
// each host through shared memory, across hosts over the network between
// one or more ranks per host.
//
// Which of them runs, and when the flat network all-reduce does instead, is
// algorithm_table.h's choice.
#pragma once

#include "rlx/collectives/links.h"
#include "rlx/collectives/same_host.h"
#include "rlx/collectives/tuning.h"

namespace rlx {

// When every host has the same number L of ranks: a reduce-scatter inside
// each host, then L concurrent all-reduces across hosts, one per block, among
// the ranks with the same index on every host (each host's network traffic
// is spread over its L ranks), then an all-gather inside each host.
// The steps across hosts choose by host.job_tuning(), alike on every rank.
void all_reduce_by_rails(Links& links, SameHost& host, const CollectiveCall& call,
                         ElementSpan data);
// One leader per host: an all-reduce inside the host, among the leaders,
// then a broadcast inside the host.
void all_reduce_by_leaders(Links& links, SameHost& host, const CollectiveCall& call,
                           ElementSpan data);
// Inside each host, among one leader per host, inside each host again.
void hierarchical_barrier(Links& links, SameHost& host, const CollectiveCall& call);

}  // namespace rlx
