// libFuzzer entry point for the http2_downstream target (see targets/http2_downstream.h for what it
// checks and README.md for how to run it). The unit tests replay corpus/http2_downstream/ through
// the same function.

#include <cstdio>
#include <cstdlib>

#include "targets/http2_downstream.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string failure = tidegate::fuzz::run_http2_downstream(data, size);
  if (!failure.empty()) {
    std::fprintf(stderr, "invariant broken: %s\n", failure.c_str());
    std::abort();
  }
  return 0;
}
