// libFuzzer entry point for the protocol_decode target (see targets/protocol_decode.h for what it
// checks and README.md for how to run it). The unit tests replay corpus/protocol_decode/ through
// the same function.

#include <cstdio>
#include <cstdlib>

#include "targets/protocol_decode.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string failure = tidegate::fuzz::run_protocol_decode(data, size);
  if (!failure.empty()) {
    std::fprintf(stderr, "invariant broken: %s\n", failure.c_str());
    std::abort();
  }
  return 0;
}
