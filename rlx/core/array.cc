#include "rlx/core/array.h"

#include <cstring>
#include <string>
#include <utility>

#include "rlx/core/array_node.h"
#include "rlx/core/error.h"
#include "rlx/core/eval.h"

namespace rlx {

void Primitive::eval_batch(std::span<const BatchItem> items) const {
  for (const BatchItem& item : items) eval(item.inputs, *item.output);
}
namespace detail {

ArrayNode::~ArrayNode() {
  // Inputs only this node holds are unlinked and destroyed here, in a loop,
  // each after its own inputs were taken the same way.
  std::vector<std::shared_ptr<ArrayNode>> orphans;
  auto take_inputs = [&orphans](std::vector<Array>& from) {
    for (Array& input : from) {
      if (NodeAccess::node(input).use_count() == 1) orphans.push_back(NodeAccess::release(input));
    }
    from.clear();
  };
  take_inputs(inputs);
  while (!orphans.empty()) {
    std::shared_ptr<ArrayNode> orphan = std::move(orphans.back());
    orphans.pop_back();
    take_inputs(orphan->inputs);
  }
}

}  // namespace detail

using detail::ArrayNode;
using detail::NodeState;

Array::Array(std::shared_ptr<ArrayNode> node) : node_(std::move(node)) {}

Array::Array(Shape shape, Dtype dtype, std::shared_ptr<const Primitive> primitive,
             std::vector<Array> inputs) {
  check_shape(primitive ? primitive->name() : "Array", shape);
  if (!primitive) throw Error("Array: a pending array needs a primitive");
  for (const Array& input : inputs) input.node();  // rejects empty handles
  node_ = std::make_shared<ArrayNode>(std::move(shape), dtype);
  node_->primitive = std::move(primitive);
  node_->inputs = std::move(inputs);
}

Array Array::adopt_buffer(Buffer buffer, std::size_t count, Shape shape, Dtype dtype) {
  check_shape("Array", shape);
  if (count != static_cast<std::size_t>(numel(shape))) {
    throw ShapeError("Array: " + std::to_string(count) + " values for shape " + to_string(shape));
  }
  auto node = std::make_shared<ArrayNode>(std::move(shape), dtype);
  node->buffer = std::move(buffer);
  node->state.store(NodeState::done, std::memory_order_release);
  return Array(std::move(node));
}

Array Array::from_bytes(const void* data, std::size_t count, Shape shape, Dtype dtype) {
  const std::size_t bytes = count * size_of(dtype);
  Buffer buffer = allocate_buffer(bytes);
  if (bytes > 0) std::memcpy(buffer.get(), data, bytes);
  return adopt_buffer(std::move(buffer), count, std::move(shape), dtype);
}

Array Array::from_bytes(const void* data, Shape shape, Dtype dtype) {
  check_shape("Array", shape);
  const auto count = static_cast<std::size_t>(numel(shape));
  return from_bytes(data, count, std::move(shape), dtype);
}

Array Array::adopt(void* data, Shape shape, Dtype dtype, std::function<void(void*)> deleter) {
  Buffer buffer(data, std::move(deleter));
  if (reinterpret_cast<std::uintptr_t>(data) % size_of(dtype) != 0) {
    throw Error("Array::adopt: buffer is not aligned for " + std::string(name_of(dtype)));
  }
  check_shape("Array", shape);
  const auto count = static_cast<std::size_t>(numel(shape));
  return adopt_buffer(std::move(buffer), count, std::move(shape), dtype);
}

ArrayNode& Array::node() const {
  if (!node_) throw Error("use of an empty rlx::Array");
  return *node_;
}

const Shape& Array::shape() const { return node().shape; }

std::int64_t Array::dim(int axis) const {
  return shape()[static_cast<std::size_t>(normalize_axis("dim", axis, ndim()))];
}

int Array::ndim() const { return static_cast<int>(shape().size()); }

std::int64_t Array::size() const { return numel(shape()); }

std::size_t Array::nbytes() const { return static_cast<std::size_t>(size()) * size_of(dtype()); }

Dtype Array::dtype() const { return node().dtype; }

bool Array::is_evaluated() const {
  return node().state.load(std::memory_order_acquire) == NodeState::done;
}

const void* Array::raw_data() const {
  if (!is_evaluated()) eval(*this);
  return node_->buffer.get();
}

void Array::allocate() {
  ArrayNode& n = node();
  if (!n.buffer) n.buffer = allocate_buffer(nbytes());
}

void Array::share_data(const Array& other) {
  if (other.nbytes() != nbytes()) {
    throw Error("share_data: " + std::to_string(other.nbytes()) + " bytes for an array of " +
                std::to_string(nbytes()));
  }
  node().buffer = other.node().buffer;
}

void* Array::raw_mutable_data() {
  ArrayNode& n = node();
  if (!n.buffer) {
    throw Error("mutable_data: the array has no buffer (only an output being computed has one)");
  }
  return n.buffer.get();
}

void Array::check_dtype(Dtype requested) const {
  if (requested != dtype()) {
    throw Error("Array: requested " + std::string(name_of(requested)) + " elements of a " +
                std::string(name_of(dtype())) + " array");
  }
}

void Array::check_single_element() const {
  if (size() != 1) {
    throw ShapeError("item: the array has shape " + to_string(shape()) + ", not one element");
  }
}

}  // namespace rlx
