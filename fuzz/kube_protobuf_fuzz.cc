// libFuzzer entry point for the kube_protobuf target (see targets/kube_protobuf.h for what it
// checks and README.md for how to run it). The unit tests replay corpus/kube_protobuf/ through the
// same function.

#include <cstdio>
#include <cstdlib>

#include "targets/kube_protobuf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string failure = tidegate::fuzz::run_kube_protobuf(data, size);
  if (!failure.empty()) {
    std::fprintf(stderr, "invariant broken: %s\n", failure.c_str());
    std::abort();
  }
  return 0;
}
