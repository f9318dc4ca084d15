// Boost.Asio, included the one way rlx includes it.
#pragma once

// Boost 1.74's asio/awaitable.hpp uses std::exchange without including
// <utility>; GCC 12 in C++20 mode then fails to compile it.
#include <utility>

#include <boost/asio.hpp>  // IWYU pragma: export
