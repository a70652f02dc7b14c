#pragma once
// Stream types of the data plane. Each worker runs one io_context, so sockets and timers use its
// concrete executor type rather than any_io_executor: profiling showed the type-erased executor's
// copies and moves on every operation of the request path.

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "runtime/deadline_stream.h"

namespace tidegate::dataplane::runtime {

using Executor = boost::asio::io_context::executor_type;
using Socket = boost::asio::basic_stream_socket<boost::asio::ip::tcp, Executor>;
// A socket whose operations time out (runtime/deadline_stream.h: beast::basic_stream's interface
// without a timer armed and cancelled per operation).
using Stream = DeadlineStream<Executor>;

}  // namespace tidegate::dataplane::runtime
