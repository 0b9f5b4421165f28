// The Catch2 main of every test binary, and the skip protocol of qkv's tests.
//
// Catch2 v2 has no "skipped" outcome, so a test case that cannot run (no MPI, no /proc, a
// sanitizer that defeats the measurement) calls QKV_SKIP("why") (tests/support/common.hpp): that
// prints the reason and ends the test case. When every test case the process ran was skipped
// and none failed, main returns kSkipExitCode (77, the automake convention), which qkv_test()
// declares as the discovered tests' SKIP_RETURN_CODE: ctest then reports the test as skipped
// instead of passed. A skip never hides a failure: a failed assertion before it makes the
// process fail as usual.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <cstdlib>
#include <iostream>

#include "core/parallel.hpp"
#include "support/common.hpp"

namespace {

int g_cases_run = 0, g_cases_skipped = 0;
bool g_current_skipped = false;

// Counts the test cases run and those that ended in QKV_SKIP.
struct SkipCounter : Catch::TestEventListenerBase {
  using TestEventListenerBase::TestEventListenerBase;
  void testCaseStarting(Catch::TestCaseInfo const& info) override {
    g_current_skipped = false;
    TestEventListenerBase::testCaseStarting(info);
  }
  void testCaseEnded(Catch::TestCaseStats const& stats) override {
    ++g_cases_run;
    if (g_current_skipped) ++g_cases_skipped;
    TestEventListenerBase::testCaseEnded(stats);
  }
};

}  // namespace

CATCH_REGISTER_LISTENER(SkipCounter)

namespace qkv::testing {

void mark_skipped(const std::string& reason) {
  g_current_skipped = true;
  std::cout << "SKIPPED: " << Catch::getResultCapture().getCurrentTestName() << ": " << reason
            << std::endl;
}

}  // namespace qkv::testing

int main(int argc, char** argv) {
  // Where the sources and the build are, for tests that read shipped files or run the qkv
  // binary (set here rather than by ctest, so a test binary run by hand finds them too).
  ::setenv("QKV_SOURCE_DIR", QKV_TEST_SOURCE_DIR, 0);
  ::setenv("QKV_BUILD_DIR", QKV_TEST_BUILD_DIR, 0);
  // One thread unless OMP_NUM_THREADS says otherwise: ctest runs tests side by side on few
  // cores, and spinning OpenMP pools of parallel tests starve each other. Tests about threads
  // set their own count.
  if (!std::getenv("OMP_NUM_THREADS")) qkv::set_num_threads(1);
  const int rc = Catch::Session().run(argc, argv);
  if (g_cases_run == 0) return rc;  // listing, --help, or nothing matched (-w NoTests: 2)
  if (rc == qkv::testing::kSkipExitCode) return 1;  // 77 failed assertions are not a skip
  if (rc == 0 && g_cases_skipped == g_cases_run) return qkv::testing::kSkipExitCode;
  return rc;
}
