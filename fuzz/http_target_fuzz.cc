// libFuzzer entry point for the http_target target (see targets/http_target.h for what it checks
// and README.md for how to run it). The unit tests replay corpus/http_target/ through the same
// function.

#include <cstdio>
#include <cstdlib>

#include "targets/http_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string failure = tidegate::fuzz::run_http_target(data, size);
  if (!failure.empty()) {
    std::fprintf(stderr, "invariant broken: %s\n", failure.c_str());
    std::abort();
  }
  return 0;
}
