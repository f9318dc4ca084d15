// Test helper: `call` must throw `Error` whose message holds `fragment`.
#pragma once

#include <string>

#include <gtest/gtest.h>

namespace rlx::testing {

template <class Error, class Call>
void expect_error_with(Call&& call, const std::string& fragment) {
  try {
    call();
    ADD_FAILURE() << "accepted; expected an error with: " << fragment;
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos) << error.what();
  }
}

}  // namespace rlx::testing
