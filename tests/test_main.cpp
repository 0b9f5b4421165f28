// The Catch2 main of every test binary.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <cstdlib>

#include "core/parallel.hpp"

int main(int argc, char** argv) {
  // Where the sources and the build are, for tests that read shipped files or run the qkv
  // binary (set here rather than by ctest, so a test binary run by hand finds them too).
  ::setenv("QKV_SOURCE_DIR", QKV_TEST_SOURCE_DIR, 0);
  ::setenv("QKV_BUILD_DIR", QKV_TEST_BUILD_DIR, 0);
  // One thread unless OMP_NUM_THREADS says otherwise: ctest runs tests side by side on few
  // cores, and spinning OpenMP pools of parallel tests starve each other. Tests about threads
  // set their own count.
  if (!std::getenv("OMP_NUM_THREADS")) qkv::set_num_threads(1);
  return Catch::Session().run(argc, argv);
}
