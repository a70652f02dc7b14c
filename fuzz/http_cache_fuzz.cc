// libFuzzer entry point for the http_cache target (see targets/http_cache.h for what it checks
// and README.md for how to run it). The unit tests replay corpus/http_cache/ through the same
// function.

#include <cstdio>
#include <cstdlib>

#include "targets/http_cache.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string failure = tidegate::fuzz::run_http_cache(data, size);
  if (!failure.empty()) {
    std::fprintf(stderr, "invariant broken: %s\n", failure.c_str());
    std::abort();
  }
  return 0;
}
