// Arrays computed by your own CPU function at eval time.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "rlx/core/array.h"

namespace rlx {

// Fills `output` (already allocated with its shape and dtype; write it through
// output.mutable_data<T>()) from `inputs` (evaluated: read them with data<T>()).
// It runs on whichever thread evaluates the array, possibly the async_eval
// worker; it may block for a while (a collective waiting on other processes)
// and may throw, and the exception reaches whoever evaluates or waits.
using CustomCompute = std::function<void(std::span<const Array> inputs, Array& output)>;

// A pending array of `shape` and `dtype` that `compute` produces from `inputs`
// when it is evaluated, once. `name` appears in error messages.
Array make_custom(std::string name, Shape shape, Dtype dtype, std::vector<Array> inputs,
                  CustomCompute compute);

// The primitive make_custom() wraps `compute` in: allocates the output, then
// calls compute. Made once, it can serve any number of arrays (built with
// Array(shape, dtype, primitive, inputs)) without allocating one per array.
std::shared_ptr<const Primitive> make_custom_primitive(std::string name, CustomCompute compute);

// Like make_custom_primitive and make_custom, for a computation that reads
// only its inputs and writes only its output (Primitive::local): a compiled
// graph may run it while an earlier collective is in flight. The built-in
// ops are made this way; a compute function that communicates must not be.
std::shared_ptr<const Primitive> make_local_primitive(std::string name, CustomCompute compute);
Array make_local_custom(std::string name, Shape shape, Dtype dtype, std::vector<Array> inputs,
                        CustomCompute compute);

// Computes several arrays of one kind at once: every output is allocated
// before the call. A collective fuses many small all-reduces into one this way.
using BatchCompute = std::function<void(std::span<const Primitive::BatchItem> items)>;

// Like make_custom, but when one eval() needs several pending arrays with the
// same `batch_key` and none depends on another, they are computed together
// by one `compute` call over up to batch_bytes_cap() bytes of outputs (a
// bucket, like DDP's), in the order eval schedules them: that order is the
// same in every process evaluating the same graph. Arrays with different
// keys never share a call, and do not split each other's buckets: a key's
// bucket is computed when an array reads one of its arrays, at the cap, or
// at the end of eval (every open bucket, oldest first). The collective ops
// key by group, so a group's all-reduces fuse alike on all its ranks even
// when some of them interleave another group's ops.
Array make_batched_custom(std::string name, std::string batch_key, Shape shape, Dtype dtype,
                          std::vector<Array> inputs, BatchCompute compute);

// The most output bytes one batched call covers (default 25 MiB); 0 turns
// batching off, so every array gets a call of its own.
void set_batch_bytes_cap(std::size_t bytes);
std::size_t batch_bytes_cap();

}  // namespace rlx
