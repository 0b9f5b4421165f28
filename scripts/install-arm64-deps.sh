#!/usr/bin/env bash
# Installs what `make test-arm64` needs to cross-build qkv for arm64 and run its tests under
# qemu-aarch64, from Debian 12 packages, only those missing. Idempotent: a second run installs
# nothing and prints one line.
#
#   install-arm64-deps.sh [SYSROOT]   SYSROOT: where the packages that cannot sit beside their
#                                     amd64 twins are unpacked (default build-arm64/sysroot,
#                                     where the toolchain looks; else -DQKV_ARM64_SYSROOT=...)
#
# Most libraries are plain multiarch installs (`dpkg --add-architecture arm64`, then pkg:arm64
# under /usr/lib/aarch64-linux-gnu). Two cannot sit beside their amd64 twins: SentencePiece's
# packages are not Multi-Arch: same (apt would remove the amd64 build the native build links),
# and libdnnl-dev's dnnl_config.h differs between architectures (dpkg refuses to overwrite it).
# Their arm64 packages are unpacked into SYSROOT instead, where cmake/toolchain-aarch64.cmake
# looks first. The header-only packages (catch2, CLI11, nlohmann-json, stb) serve both
# architectures: they are the ones install-deps.sh installs.
set -euo pipefail

sysroot="${1:-build-arm64/sysroot}"

host_packages=(
  crossbuild-essential-arm64         # aarch64-linux-gnu-gcc/g++ and the arm64 libc they link to
  qemu-user                          # qemu-aarch64: runs the arm64 test binaries on this host
  cmake pkg-config
  catch2 libcli11-dev nlohmann-json3-dev libstb-dev   # headers only: the same on both
)
arm64_packages=(
  # what the emulated binaries load: the loader and libc of libc6:arm64 (not the cross libc of
  # crossbuild-essential, which is for linking: see cmake/toolchain-aarch64.cmake)
  libc6:arm64 libstdc++6:arm64 libgomp1:arm64
  libopenblas-openmp-dev:arm64       # BLAS, the OpenMP build (CMakeLists.txt looks for it there)
  libspdlog-dev:arm64 libfmt-dev:arm64
  libxxhash-dev:arm64
  zlib1g-dev:arm64
  libcpp-httplib-dev:arm64
  libtomlplusplus-dev:arm64          # its CMake config lives under the architecture's libdir
)
# Not co-installable with amd64's (see above). oneDNN: qkv's bf16 products need AVX512-BF16,
# so on arm64 it is linked but bf16 reports itself unavailable.
sysroot_packages=(libsentencepiece0 libsentencepiece-dev libdnnl2 libdnnl-dev)

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

missing=()
for p in "${host_packages[@]}" "${arm64_packages[@]}"; do
  installed "$p" || missing+=("$p")
done
have_sysroot=1
for f in usr/include/sentencepiece_processor.h usr/include/oneapi/dnnl/dnnl.hpp; do
  [ -f "$sysroot/$f" ] || have_sysroot=0
done

if [ ${#missing[@]} -eq 0 ] && [ $have_sysroot -eq 1 ]; then
  echo "install-arm64-deps: all $((${#host_packages[@]} + ${#arm64_packages[@]})) packages present, and $sysroot"
  exit 0
fi

source "$(dirname "${BASH_SOURCE[0]}")/lib/as-root.sh" install-arm64-deps "${missing[*]:-the arm64 sysroot}"
export DEBIAN_FRONTEND=noninteractive
# Wait for another apt-get (e.g. install-deps.sh of a concurrent build) instead of failing.
apt_get=($sudo apt-get -o DPkg::Lock::Timeout=600)

if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  echo "install-arm64-deps: adding the arm64 architecture"
  $sudo dpkg --add-architecture arm64
fi
"${apt_get[@]}" update -qq
if [ ${#missing[@]} -gt 0 ]; then
  # Multiarch libraries must have the same version in both architectures: apt may upgrade the
  # amd64 twin (a Debian point release) along with the arm64 package.
  echo "install-arm64-deps: installing ${missing[*]}"
  "${apt_get[@]}" install -y -qq --no-install-recommends "${missing[@]}"
fi

if [ $have_sysroot -eq 0 ]; then
  echo "install-arm64-deps: unpacking ${sysroot_packages[*]} (arm64) into $sysroot"
  mkdir -p "$sysroot"
  debs=$(mktemp -d)
  trap 'rm -rf "$debs"' EXIT
  (cd "$debs" && apt-get -o APT::Sandbox::User=root download -qq "${sysroot_packages[@]/%/:arm64}")
  for deb in "$debs"/*.deb; do dpkg-deb -x "$deb" "$sysroot"; done
  # The .pc file says prefix=/usr; point it at the sysroot so pkg-config hands CMake real paths.
  root=$(cd "$sysroot" && pwd)
  sed -i "s|^prefix=.*|prefix=$root/usr|" "$sysroot"/usr/lib/aarch64-linux-gnu/pkgconfig/sentencepiece.pc
fi
