#include "rlx/core/registry.h"

#include <string>

#include <gtest/gtest.h>

#include "rlx/core/custom.h"
#include "rlx/core/ops.h"
#include "rlx/core/reference_test.h"

namespace rlx {
namespace {

using testing::expect_error;

OpExtension unary_extension(std::string name, int num_inputs) {
  return {.name = std::move(name),
          .num_inputs = num_inputs,
          .infer_shape = [](std::span<const Shape> in, std::string_view) { return in[0]; }};
}

TEST(OpExtensionRegistry, FindsWhatWasRegistered) {
  register_op_extension(unary_extension("registry_test.find", 1));
  const auto found = find_op_extension("registry_test.find");
  EXPECT_EQ(found->name, "registry_test.find");
  const Shape in[] = {{2, 5}};
  EXPECT_EQ(found->infer_shape(in, ""), (Shape{2, 5}));
}

TEST(OpExtensionRegistry, RegisteringANameAgainReplacesItWithAWarning) {
  register_op_extension(unary_extension("registry_test.twice", 1));
  ::testing::internal::CaptureStderr();
  register_op_extension(unary_extension("registry_test.twice", 3));
  const std::string warning = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(warning.find("warning"), std::string::npos) << warning;
  EXPECT_NE(warning.find("'registry_test.twice'"), std::string::npos) << warning;
  EXPECT_EQ(find_op_extension("registry_test.twice")->num_inputs, 3);
}

TEST(OpExtensionRegistry, UnknownNamesAndIncompleteEntriesAreErrors) {
  expect_error<Error>([] { find_op_extension("registry_test.never"); },
                      "unknown op 'registry_test.never'");
  expect_error<Error>([] { register_op_extension({.name = "registry_test.no_shape"}); },
                      "'registry_test.no_shape' has no infer_shape");
}

TEST(ArrayKernelRegistry, KernelsComposeOpsWithTheirAttributes) {
  // attrs: the scale as text.
  register_array_kernel("registry_test.scale_add",
                        [](std::span<const Array> in, std::string_view attrs) {
                          return in[0] * std::stod(std::string(attrs)) + in[1];
                        });
  Array a = Array::from({1.0f, 2.0f}, {2});
  Array b = Array::from({10.0f, 20.0f}, {2});
  Array out = custom_op("registry_test.scale_add", {a, b}, "2.5");
  EXPECT_FALSE(out.is_evaluated());
  EXPECT_EQ(out.to_vector<float>(), (std::vector<float>{12.5f, 25.0f}));
}

TEST(ArrayKernelRegistry, KernelsCanRunTheirOwnFunctionAtEval) {
  register_array_kernel("registry_test.reverse", [](std::span<const Array> in, std::string_view) {
    return make_custom("registry_test.reverse", in[0].shape(), in[0].dtype(), {in[0]},
                       [](std::span<const Array> inputs, Array& output) {
                         const auto from = inputs[0].data<std::int32_t>();
                         std::copy(from.rbegin(), from.rend(),
                                   output.mutable_data<std::int32_t>().begin());
                       });
  });
  Array out = custom_op("registry_test.reverse", {Array::from<std::int32_t>({1, 2, 3}, {3})});
  EXPECT_EQ(out.to_vector<std::int32_t>(), (std::vector<std::int32_t>{3, 2, 1}));
}

TEST(ArrayKernelRegistry, RegisteringANameAgainReplacesItWithAWarning) {
  register_array_kernel("registry_test.kernel_twice",
                        [](std::span<const Array> in, std::string_view) { return in[0]; });
  ::testing::internal::CaptureStderr();
  register_array_kernel("registry_test.kernel_twice",
                        [](std::span<const Array> in, std::string_view) { return -in[0]; });
  const std::string warning = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(warning.find("warning: replacing the array kernel registered as "
                         "'registry_test.kernel_twice'"),
            std::string::npos)
      << warning;
  Array out = custom_op("registry_test.kernel_twice", {Array::from({4.0f}, {1})});
  EXPECT_EQ(out.item<float>(), -4.0f);
}

TEST(ArrayKernelRegistry, UnknownNamesAreErrors) {
  expect_error<Error>([] { custom_op("registry_test.missing", {}); },
                      "unknown op 'registry_test.missing'");
}

}  // namespace
}  // namespace rlx
