#pragma once
// Boost 1.74's asio/awaitable.hpp uses std::exchange without including <utility> (C++20).
#include <utility>
// Precompiled header for the data plane and the unit tests: Asio and Beast dominate compile time.
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <memory>
#include <string>
#include <string_view>
#include <vector>
