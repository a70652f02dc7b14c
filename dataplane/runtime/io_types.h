#pragma once
// Stream types of the data plane. Each worker runs one io_context, so sockets and timers use its
// concrete executor type rather than any_io_executor: profiling showed the type-erased executor's
// copies and moves on every operation of the request path.

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/tcp_stream.hpp>

namespace tidegate::dataplane::runtime {

using Executor = boost::asio::io_context::executor_type;
using Socket = boost::asio::basic_stream_socket<boost::asio::ip::tcp, Executor>;
using Stream =
    boost::beast::basic_stream<boost::asio::ip::tcp, Executor, boost::beast::unlimited_rate_policy>;

}  // namespace tidegate::dataplane::runtime
