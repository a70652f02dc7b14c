// libFuzzer entry point for the path_normalize target (see targets/path_normalize.h for what it
// checks and README.md for how to run it). The unit tests replay corpus/path_normalize/ through
// the same function.

#include <cstdio>
#include <cstdlib>

#include "targets/path_normalize.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string failure = tidegate::fuzz::run_path_normalize(data, size);
  if (!failure.empty()) {
    std::fprintf(stderr, "invariant broken: %s\n", failure.c_str());
    std::abort();
  }
  return 0;
}
