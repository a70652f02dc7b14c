// libFuzzer entry point for the annotations target (see targets/annotations.h for what it
// checks and README.md for how to run it). The unit tests replay corpus/annotations/ through
// the same function.

#include <cstdio>
#include <cstdlib>

#include "targets/annotations.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string failure = tidegate::fuzz::run_annotations(data, size);
  if (!failure.empty()) {
    std::fprintf(stderr, "invariant broken: %s\n", failure.c_str());
    std::abort();
  }
  return 0;
}
