// libFuzzer entry point for the http1_request target (see targets/http1_message.h for what it
// checks and README.md for how to run it). The unit tests replay corpus/http1_request/ through
// the same function.

#include <cstdio>
#include <cstdlib>

#include "targets/http1_message.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string failure = tidegate::fuzz::run_http1_request(data, size);
  if (!failure.empty()) {
    std::fprintf(stderr, "invariant broken: %s\n", failure.c_str());
    std::abort();
  }
  return 0;
}
