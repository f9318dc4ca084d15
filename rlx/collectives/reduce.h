// Elementwise reduction kernels: the arithmetic of every all-reduce.
#pragma once

#include "rlx/transport/transport.h"

namespace rlx {

// accumulator[i] = op(accumulator[i], operand[i]) for every element.
//
// Both spans must have the same dtype and count (checked). Integers wrap on
// overflow (two's complement, as MPI does); 16-bit floats are computed in
// float and rounded once per call; bool reduces as or (sum, max) or and
// (prod, min). The loops are written so the compiler vectorises them.
void reduce_into(ElementSpan accumulator, ConstElementSpan operand, ReduceOp op);

// out[i] = op(a[i], b[i]): the same arithmetic without a copy first. `out`
// may be `a` or `b`, but must not overlap either only in part.
void reduce_to(ElementSpan out, ConstElementSpan a, ConstElementSpan b, ReduceOp op);

}  // namespace rlx
