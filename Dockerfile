# Tidegate's image: both programs (tidegate-controller, tidegate-dataplane) on Debian bookworm-slim
# with only their runtime libraries, running as a fixed non-root UID.
#
# Build (see docs/images.md; e2e/cluster/images/build does this, with its podman settings):
#   podman build --pull=never --network host -t docker.io/tidegate/tidegate:test .
# --pull=never: the bases are made locally from Debian's mirror (debootstrap), there is no
# registry. --network host: apt inside the build reaches the mirror through the host's own
# network, with no bridge, NAT or firewall rules made for the build.

ARG BASE_BUILD=docker.io/library/debian:bookworm
ARG BASE_RUN=docker.io/library/debian:bookworm-slim

FROM ${BASE_BUILD} AS build
ENV DEBIAN_FRONTEND=noninteractive
# The compilers and -dev packages of scripts/install-deps that the two programs need (no test,
# benchmark or style tools). apt's downloads and lists live in cache mounts, not in a layer.
# No sharing=locked on the mounts: buildah 1.28 holds those locks until the whole build ends, so
# the second stage's apt step waited forever for the first's. apt locks its own directories,
# and e2e/cluster/images/build runs one build at a time.
RUN --mount=type=cache,id=tidegate-apt-cache,target=/var/cache/apt \
    --mount=type=cache,id=tidegate-apt-lists,target=/var/lib/apt/lists \
    apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends \
      g++ cmake ninja-build ccache pkg-config binutils \
      libboost-dev libboost-system-dev libssl-dev libcpprest-dev libyaml-cpp-dev libre2-dev \
      libmimalloc-dev libnghttp2-dev zlib1g-dev libbrotli-dev libzstd-dev prometheus-cpp-dev \
      nlohmann-json3-dev libsimdjson-dev >/dev/null

WORKDIR /src
# Only what the build reads (.dockerignore keeps the rest out of the context as well).
COPY CMakeLists.txt ./
COPY lib/ lib/
COPY controller/ controller/
COPY dataplane/ dataplane/
COPY bench/access_log_bench.cc bench/

# ccache's directory and the build tree are cache mounts: after a small change only the
# changed files compile (and a fresh build tree compiles from ccache). The settings are
# those of scripts/build (precompiled headers need the sloppiness to hit). The old precompiled
# header is deleted first: while it exists, ccache counts it as an input of the compile that
# remakes it, and GCC's .gch files differ bit for bit from one compile to the next, so that
# compile and every file including the header would miss forever (0 hits of 105 here before).
# Made afresh it is a hit, the same bytes come back, and unchanged files hit too.
#
# BUILD_TYPE and WERROR default to scripts/build's RelWithDebInfo (the build the tests ran;
# debug info is stripped below) without -Werror (another compiler may warn). CCACHE_DIR may
# name a directory the builder mounts with `podman build -v HOST_CCACHE:DIR`: with the same
# compiler (bookworm's g++ on a bookworm host), build type, -Werror setting and paths relative
# to the source tree, every object the host's scripts/build compiled is a hit, so the image
# costs no second compile (e2e/cluster/images/build does this; docs/images.md).
ARG BUILD_TYPE=RelWithDebInfo
ARG WERROR=OFF
ARG CCACHE_DIR=/root/.cache/ccache
# LANG as scripts/build sets it: ccache hashes the locale.
ENV CCACHE_DIR=${CCACHE_DIR} CCACHE_MAXSIZE=5G LANG=C.UTF-8 CCACHE_BASEDIR=/src CCACHE_NOHASHDIR=1 \
    CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
ARG JOBS=2
RUN --mount=type=cache,id=tidegate-ccache,target=/root/.cache/ccache \
    --mount=type=cache,id=tidegate-image-build,target=/src/build \
    mkdir -p "$CCACHE_DIR" \
 && ccache --zero-stats >/dev/null \
 && cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE}" -DTIDEGATE_TESTS=OFF \
      -DTIDEGATE_WERROR="${WERROR}" >/dev/null \
 && find build -name '*.gch' -delete \
 && cmake --build build -j"${JOBS}" --target tidegate-controller tidegate-dataplane \
 && mkdir -p /out/bin \
 && strip --strip-unneeded -o /out/bin/tidegate-controller build/bin/tidegate-controller \
 && strip --strip-unneeded -o /out/bin/tidegate-dataplane build/bin/tidegate-dataplane \
 && { ccache --show-stats | grep -E 'Hits|Misses' || true; }
# The runtime packages are those that own the shared libraries the binaries load: derived, so
# that a new dependency cannot be forgotten here.
RUN for lib in $(ldd /out/bin/* | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u); do \
      dpkg -S "$lib" 2>/dev/null || dpkg -S "$(readlink -f "$lib")" 2>/dev/null \
        || dpkg -S "/usr$lib" 2>/dev/null || dpkg -S "${lib#/usr}" \
        || { echo "no package owns $lib" >&2; exit 1; }; \
    done | cut -d: -f1 | sort -u > /out/runtime-packages \
 && echo "runtime packages: $(tr '\n' ' ' < /out/runtime-packages)"

FROM ${BASE_RUN}
ENV DEBIAN_FRONTEND=noninteractive
COPY --from=build /out/runtime-packages /usr/share/tidegate/runtime-packages
RUN --mount=type=cache,id=tidegate-apt-cache,target=/var/cache/apt \
    --mount=type=cache,id=tidegate-apt-lists,target=/var/lib/apt/lists \
    apt-get update -qq \
 && xargs apt-get install -y -qq --no-install-recommends < /usr/share/tidegate/runtime-packages >/dev/null \
 && rm -rf /var/log/apt /var/log/dpkg.log /var/cache/debconf/*-old /var/lib/dpkg/*-old \
 && echo 'tidegate:x:65532:65532:tidegate:/nonexistent:/usr/sbin/nologin' >> /etc/passwd \
 && echo 'tidegate:x:65532:' >> /etc/group
COPY --from=build /out/bin/ /usr/local/bin/

# The data plane's defaults listen on 8080/8443 (above 1024: no capability needed) and put the
# control socket in /tmp, which a read-only root file system must get as a volume (emptyDir).
USER 65532:65532
WORKDIR /tmp
EXPOSE 8080 8443 10254
# No shell at run time: the chart (or `podman run IMAGE tidegate-controller ...`) names the
# program; the data plane is the default.
CMD ["/usr/local/bin/tidegate-dataplane"]
