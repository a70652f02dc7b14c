// libFuzzer entry point for the manifest target (see targets/manifest.h for what it checks and
// README.md for how to run it). The unit tests replay corpus/manifest/ through the same function.

#include <cstdio>
#include <cstdlib>

#include "targets/manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string failure = tidegate::fuzz::run_manifest(data, size);
  if (!failure.empty()) {
    std::fprintf(stderr, "invariant broken: %s\n", failure.c_str());
    std::abort();
  }
  return 0;
}
