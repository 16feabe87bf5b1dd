# Cross-compiling for Linux arm64 on a Debian x86-64 host (tools/arm64_check.sh uses it):
# Debian's gcc-aarch64-linux-gnu, the arm64 builds of the libraries from the host's multiarch
# folders (dpkg --add-architecture arm64), and ctest running each test through qemu-user.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)

# qemu-aarch64 finds the dynamic loader at /lib/ld-linux-aarch64.so.1, which libc6:arm64
# installs. Not -L /usr/aarch64-linux-gnu: under qemu the cross toolchain's own glibc
# (libc6-arm64-cross 2.36-8cross1) left test_pool's threads waiting for ever on 2026-12-06,
# where libc6:arm64 (2.36-9+deb12u14) ran it in 0.2 s.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64)

set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
set(ENV{PKG_CONFIG_SYSROOT_DIR} /)
