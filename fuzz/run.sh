#!/usr/bin/env bash
# Builds the fuzz targets and runs one of them. See fuzz/README.md.
#
#   fuzz/run.sh build                 # build every target into $FUZZ_BUILD_DIR/bin
#   fuzz/run.sh TARGET [SECONDS]      # build, then fuzz TARGET (default 60 s)
#   fuzz/run.sh replay [TARGET...]    # build, then run each seed corpus once (no new inputs)
#
# TARGET is protocol_decode, manifest, http_target, substitution, path_normalize, http1_request,
# http1_response, annotations or http2_downstream. With clang++ the targets are libFuzzer binaries with
# AddressSanitizer and UBSan; without it (GCC only) they are built with a plain main()
# (standalone_main.cc) that can only replay inputs, still under ASan and UBSan.
# Environment: FUZZ_BUILD_DIR (default build-fuzz), JOBS (default 2), CXX (default clang++ if
# present, else g++), extra libFuzzer flags in FUZZ_FLAGS.
set -euo pipefail
cd "$(dirname "$0")/.."

TARGETS=(protocol_decode manifest http_target substitution path_normalize http1_request
  http1_response annotations http2_downstream http_cache kube_protobuf)
BUILD=${FUZZ_BUILD_DIR:-build-fuzz}
JOBS=${JOBS:-2}
if [ -z "${CXX:-}" ]; then
  if command -v clang++ >/dev/null; then CXX=clang++; else CXX=g++; fi
fi
if "$CXX" --version | grep -qi clang; then
  LIBFUZZER=1
  LIB_FLAGS="-fsanitize=fuzzer-no-link"
  LINK_FLAGS="-fsanitize=fuzzer,address,undefined"
else
  LIBFUZZER=0
  # GCC leaves float-cast-overflow out of -fsanitize=undefined (clang includes it); a JSON number
  # like 1e30 read into an integer field is exactly that.
  LIB_FLAGS="-fsanitize=float-cast-overflow"
  LINK_FLAGS="-fsanitize=address,undefined,float-cast-overflow"
  echo "note: $CXX has no libFuzzer; building replay-only binaries (see fuzz/README.md)" >&2
fi

build() {
  # The libraries, instrumented the same way as the targets (TIDEGATE_SANITIZE adds ASan+UBSan).
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER="$CXX" \
    -DCMAKE_CXX_FLAGS="$LIB_FLAGS" -DTIDEGATE_SANITIZE=ON -DTIDEGATE_TESTS=OFF >/dev/null
  cmake --build "$BUILD" -j"$JOBS" --target tidegate_controller_core tidegate_dataplane_core
  mkdir -p "$BUILD/bin"
  local extra=()
  [ "$LIBFUZZER" = 1 ] || extra=(fuzz/standalone_main.cc)
  for t in "${TARGETS[@]}"; do
    echo "linking $BUILD/bin/${t}_fuzz" >&2
    # shellcheck disable=SC2046
    "$CXX" -std=c++20 -O1 -g -fno-omit-frame-pointer $LINK_FLAGS \
      -DBOOST_ASIO_NO_DEPRECATED -DBOOST_BEAST_USE_STD_STRING_VIEW \
      -Ilib -Icontroller -Idataplane \
      "fuzz/${t}_fuzz.cc" "${extra[@]}" \
      "$BUILD/libtidegate_controller_core.a" "$BUILD/libtidegate_dataplane_core.a" \
      "$BUILD/libtidegate_lib.a" \
      $(pkg-config --libs re2 libnghttp2) -lprometheus-cpp-core -lyaml-cpp -lssl -lcrypto -pthread \
      -o "$BUILD/bin/${t}_fuzz"
  done
}

valid_target() {
  local t
  for t in "${TARGETS[@]}"; do [ "$t" = "$1" ] && return 0; done
  echo "unknown target \"$1\"; one of: ${TARGETS[*]}" >&2
  exit 2
}

case "${1:-}" in
  "" | -h | --help)
    sed -n '2,14p' "$0"
    ;;
  build)
    build
    ;;
  replay)
    shift
    [ $# -gt 0 ] || set -- "${TARGETS[@]}"
    for t in "$@"; do valid_target "$t"; done
    build
    failed=()
    for t in "$@"; do
      if [ "$LIBFUZZER" = 1 ]; then
        "$BUILD/bin/${t}_fuzz" -runs=0 "fuzz/corpus/$t" || failed+=("$t")
      else
        "$BUILD/bin/${t}_fuzz" "fuzz/corpus/$t" || failed+=("$t")
      fi
    done
    if [ ${#failed[@]} -gt 0 ]; then
      echo "failed: ${failed[*]}" >&2
      exit 1
    fi
    ;;
  *)
    t=$1
    seconds=${2:-60}
    valid_target "$t"
    if [ "$LIBFUZZER" != 1 ]; then
      echo "fuzzing needs clang++ with libFuzzer; try: fuzz/run.sh replay $t" >&2
      exit 1
    fi
    build
    # New inputs go to a working corpus outside the tree; the checked-in seeds are read only.
    work="$BUILD/corpus/$t"
    mkdir -p "$work" "$BUILD/artifacts"
    # shellcheck disable=SC2086
    "$BUILD/bin/${t}_fuzz" "$work" "fuzz/corpus/$t" -max_total_time="$seconds" \
      -artifact_prefix="$BUILD/artifacts/${t}-" -print_final_stats=1 ${FUZZ_FLAGS:-}
    ;;
esac
