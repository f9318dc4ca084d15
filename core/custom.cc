#include "core/custom.h"

#include <string_view>
#include <utility>

#include "core/error.h"

namespace rlx {
namespace {

class CustomPrimitive final : public Primitive {
 public:
  CustomPrimitive(std::string name, CustomCompute compute)
      : name_(std::move(name)), compute_(std::move(compute)) {}

  std::string_view name() const override { return name_; }

  void eval(std::span<const Array> inputs, Array& output) const override {
    output.allocate();
    compute_(inputs, output);
  }

 private:
  std::string name_;
  CustomCompute compute_;
};

}  // namespace

std::shared_ptr<const Primitive> make_custom_primitive(std::string name, CustomCompute compute) {
  if (!compute) throw Error(name + ": make_custom needs a compute function");
  return std::make_shared<CustomPrimitive>(std::move(name), std::move(compute));
}

Array make_custom(std::string name, Shape shape, Dtype dtype, std::vector<Array> inputs,
                  CustomCompute compute) {
  return Array(std::move(shape), dtype, make_custom_primitive(std::move(name), std::move(compute)),
               std::move(inputs));
}

}  // namespace rlx
