#include "rlx/core/custom.h"

#include <atomic>
#include <string_view>
#include <utility>

#include "rlx/core/error.h"

namespace rlx {
namespace {

class CustomPrimitive final : public Primitive {
 public:
  CustomPrimitive(std::string name, CustomCompute compute, bool is_local)
      : name_(std::move(name)), compute_(std::move(compute)), local_(is_local) {}

  std::string_view name() const override { return name_; }
  bool local() const override { return local_; }

  void eval(std::span<const Array> inputs, Array& output) const override {
    output.allocate();
    compute_(inputs, output);
  }

 private:
  std::string name_;
  CustomCompute compute_;
  bool local_;
};

class BatchedPrimitive final : public Primitive {
 public:
  BatchedPrimitive(std::string name, std::string key, BatchCompute compute)
      : name_(std::move(name)), key_(std::move(key)), compute_(std::move(compute)) {}

  std::string_view name() const override { return name_; }
  std::string_view batch_key() const override { return key_; }

  void eval(std::span<const Array> inputs, Array& output) const override {
    const BatchItem item{inputs, &output};
    eval_batch({&item, 1});
  }

  void eval_batch(std::span<const BatchItem> items) const override {
    for (const BatchItem& item : items) item.output->allocate();
    compute_(items);
  }

 private:
  std::string name_, key_;
  BatchCompute compute_;
};

std::atomic<std::size_t> g_batch_bytes_cap{std::size_t{25} << 20};

}  // namespace

Array make_batched_custom(std::string name, std::string batch_key, Shape shape, Dtype dtype,
                          std::vector<Array> inputs, BatchCompute compute) {
  if (!compute) throw Error(name + ": make_batched_custom needs a compute function");
  if (batch_key.empty()) throw Error(name + ": make_batched_custom needs a non-empty batch key");
  auto primitive =
      std::make_shared<BatchedPrimitive>(std::move(name), std::move(batch_key), std::move(compute));
  return Array(std::move(shape), dtype, std::move(primitive), std::move(inputs));
}

void set_batch_bytes_cap(std::size_t bytes) { g_batch_bytes_cap.store(bytes); }
std::size_t batch_bytes_cap() { return g_batch_bytes_cap.load(); }

std::shared_ptr<const Primitive> make_custom_primitive(std::string name, CustomCompute compute) {
  if (!compute) throw Error(name + ": make_custom needs a compute function");
  return std::make_shared<CustomPrimitive>(std::move(name), std::move(compute), false);
}

std::shared_ptr<const Primitive> make_local_primitive(std::string name, CustomCompute compute) {
  if (!compute) throw Error(name + ": make_custom needs a compute function");
  return std::make_shared<CustomPrimitive>(std::move(name), std::move(compute), true);
}

Array make_local_custom(std::string name, Shape shape, Dtype dtype, std::vector<Array> inputs,
                        CustomCompute compute) {
  return Array(std::move(shape), dtype, make_local_primitive(std::move(name), std::move(compute)),
               std::move(inputs));
}

Array make_custom(std::string name, Shape shape, Dtype dtype, std::vector<Array> inputs,
                  CustomCompute compute) {
  return Array(std::move(shape), dtype, make_custom_primitive(std::move(name), std::move(compute)),
               std::move(inputs));
}

}  // namespace rlx
