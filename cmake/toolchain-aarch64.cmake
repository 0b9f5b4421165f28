# Cross-compiling qkv for arm64 on a Debian amd64 host (`make test-arm64`):
#
#   cmake -S . -B build-arm64 --toolchain cmake/toolchain-aarch64.cmake -DQKV_NATIVE=OFF -DQKV_MPI=OFF
#
# The compilers come from crossbuild-essential-arm64, the libraries from Debian's arm64 packages
# (multiarch, under /usr/lib/aarch64-linux-gnu) and from QKV_ARM64_SYSROOT, where
# scripts/install-arm64-deps.sh unpacks the ones that cannot be installed beside their amd64
# twins. The test binaries run under qemu-aarch64, also when Catch2 lists their test cases at
# build time (CMAKE_CROSSCOMPILING_EMULATOR).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
# GCC notes that aarch64 passes some std::pair arguments differently since GCC 10.1: qkv and its
# callers are all built by this compiler, so the note says nothing here.
set(CMAKE_CXX_FLAGS_INIT -Wno-psabi)

if(NOT QKV_ARM64_SYSROOT)
  get_filename_component(QKV_ARM64_SYSROOT "${CMAKE_CURRENT_LIST_DIR}/../build-arm64/sysroot" ABSOLUTE)
endif()
set(QKV_ARM64_SYSROOT "${QKV_ARM64_SYSROOT}" CACHE PATH
  "Unpacked arm64 packages that cannot be installed beside their amd64 twins")
# try_compile projects read this file again: hand them the same sysroot.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES QKV_ARM64_SYSROOT)

# The sysroot first, so its oneDNN headers (dnnl_config.h differs per architecture) win over the
# amd64 ones in /usr/include; then the host root, where the multiarch arm64 libraries live. Only
# programs (cmake, pkg-config) come from the host.
set(CMAKE_FIND_ROOT_PATH "${QKV_ARM64_SYSROOT}" /)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# pkg-config must see only arm64 .pc files (and the arch-independent ones), never amd64's.
set(ENV{PKG_CONFIG_LIBDIR}
  "${QKV_ARM64_SYSROOT}/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")

# The arm64 binaries load the arm64 dynamic loader, libc and libraries of Debian's multiarch
# packages (libc6:arm64, ...) from the host's own paths: -L /. Not -L /usr/aarch64-linux-gnu:
# the loader there is crossbuild-essential's (glibc 2.36-8, for linking), older than
# libc6:arm64's point release, and with the newer libc.so.6 it hangs in the first
# pthread_create (the two share internal structures).
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /)
