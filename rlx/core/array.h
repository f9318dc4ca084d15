// rlx::Array: a lazy, immutable n-dimensional array.
//
// An Array is a cheap shared handle (copying it copies a pointer). It has a
// shape and a dtype, and either data or a pending Primitive with its input
// arrays. Ops build pending arrays and compute nothing; eval() (rlx/core/eval.h)
// runs the primitives a set of arrays needs, once each, and keeps the results.
// Once an array has data it drops its primitive and inputs, so the memory of
// intermediates is freed as soon as nothing else refers to them.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "rlx/core/buffer.h"
#include "rlx/core/dtype.h"
#include "rlx/core/shape.h"

namespace rlx {

class Array;

// The computation behind a pending array. Implementations are stateless or
// hold only attributes (axes, a shape, a function), never data.
class Primitive {
 public:
  virtual ~Primitive() = default;

  // The op's name, for messages ("add", "matmul", a custom op's name).
  virtual std::string_view name() const = 0;

  // Computes `output` from `inputs`, which are all evaluated. It must give
  // `output` its data, with output.allocate() then writes through
  // output.mutable_data(), or with output.share_data(input). It runs on the
  // thread that evaluates, may block, and may throw: the exception reaches
  // whoever evaluates or waits on the array.
  virtual void eval(std::span<const Array> inputs, Array& output) const = 0;

  // Batching (see rlx/core/custom.h, make_batched_custom): a primitive that can
  // compute several arrays in one call returns a non-empty key. eval()
  // defers such arrays and computes each run of same-key ones, in schedule
  // order, with one eval_batch() call on the first one's primitive.
  virtual std::string_view batch_key() const { return {}; }
  struct BatchItem {
    std::span<const Array> inputs;
    Array* output;
  };
  virtual void eval_batch(std::span<const BatchItem> items) const;

  // True when computing touches nothing but the inputs and the output: no
  // communication, no state shared with other computations. A compiled
  // graph runs such steps while an earlier step's collective is in flight;
  // any other step waits for it first. The built-in ops are local.
  virtual bool local() const { return false; }
};

namespace detail {
struct ArrayNode;
struct NodeAccess;
}  // namespace detail

class Array {
 public:
  // An empty handle, so arrays can sit in containers; anything but assignment
  // and valid() on it throws rlx::Error.
  Array() = default;

  // A pending array: `primitive` computes it from `inputs` at eval. This is
  // how ops (and custom primitives) make arrays; most code calls the ops.
  Array(Shape shape, Dtype dtype, std::shared_ptr<const Primitive> primitive,
        std::vector<Array> inputs);

  // Copies `values` (row-major) into a new array; the count must match `shape`.
  template <Element T>
  static Array from(std::span<const T> values, Shape shape) {
    return from_bytes(values.data(), values.size(), std::move(shape), dtype_of<T>);
  }
  template <Element T>
  static Array from(const std::vector<T>& values, Shape shape) {
    if constexpr (std::same_as<T, bool>) {  // vector<bool> is packed: unpack to one byte each
      const std::vector<std::uint8_t> bytes(values.begin(), values.end());
      return from_bytes(bytes.data(), bytes.size(), std::move(shape), Dtype::boolean);
    } else {
      return from(std::span<const T>(values), std::move(shape));
    }
  }
  template <Element T>
  static Array from(std::initializer_list<T> values, Shape shape) {
    return from(std::span<const T>(values.begin(), values.size()), std::move(shape));
  }

  // A 0-d array holding `value`.
  template <Element T>
  static Array scalar(T value) {
    return from(std::span<const T>(&value, 1), {});
  }

  // Copies numel(shape) elements of `dtype` from `data`.
  static Array from_bytes(const void* data, Shape shape, Dtype dtype);

  // Takes ownership of `data` without copying; `deleter(data)` runs when the
  // last array using it goes. `data` must be aligned for `dtype` and must not
  // change while arrays use it. Ownership passes even if this throws.
  static Array adopt(void* data, Shape shape, Dtype dtype, std::function<void(void*)> deleter);

  // Takes over a vector's storage without copying (not for vector<bool>, which is packed).
  template <Element T>
  requires(!std::same_as<T, bool>) static Array adopt(std::vector<T>&& values, Shape shape) {
    auto owner = std::make_shared<std::vector<T>>(std::move(values));
    return adopt_buffer(Buffer(owner, owner->data()), owner->size(), std::move(shape), dtype_of<T>);
  }

  bool valid() const { return node_ != nullptr; }
  const Shape& shape() const;
  std::int64_t dim(int axis) const;  // negative axes count from the end
  int ndim() const;
  std::int64_t size() const;  // number of elements
  std::size_t nbytes() const;
  Dtype dtype() const;

  // True once the array has data (eval finished it, or it was made from data).
  bool is_evaluated() const;

  // True when both handles refer to the same array.
  bool is(const Array& other) const { return node_ == other.node_; }

  // The elements, row-major. Evaluates the array first if needed (as eval(*this)
  // would, so it waits for an async_eval in flight and rethrows its error).
  // Throws rlx::Error if T is not the array's dtype.
  template <Element T>
  std::span<const T> data() const {
    check_dtype(dtype_of<T>);
    return {static_cast<const T*>(raw_data()), static_cast<std::size_t>(size())};
  }
  const void* raw_data() const;

  template <Element T>
  std::vector<T> to_vector() const {
    const auto values = data<T>();
    return {values.begin(), values.end()};
  }

  // The single element of a one-element array.
  template <Element T>
  T item() const {
    check_single_element();
    return data<T>()[0];
  }

  // --- For primitives computing `output` (see Primitive::eval). ---

  // Gives the array its uninitialised buffer of nbytes(): the one a compiled
  // graph's plan placed for it in its arena, else a fresh one.
  void allocate();
  // Makes the array use `other`'s data, which must have the same byte size.
  void share_data(const Array& other);
  // Writable elements of an array that has a buffer: an output being computed.
  template <Element T>
  std::span<T> mutable_data() {
    check_dtype(dtype_of<T>);
    return {static_cast<T*>(raw_mutable_data()), static_cast<std::size_t>(size())};
  }
  void* raw_mutable_data();

 private:
  friend struct detail::NodeAccess;

  explicit Array(std::shared_ptr<detail::ArrayNode> node);
  static Array from_bytes(const void* data, std::size_t count, Shape shape, Dtype dtype);
  static Array adopt_buffer(Buffer buffer, std::size_t count, Shape shape, Dtype dtype);
  detail::ArrayNode& node() const;
  void check_dtype(Dtype requested) const;
  void check_single_element() const;

  std::shared_ptr<detail::ArrayNode> node_;
};

}  // namespace rlx
