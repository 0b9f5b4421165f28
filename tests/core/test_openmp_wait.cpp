// core/openmp_wait.hpp: the count of other runnable threads read from /proc/loadavg's text.
#include <catch2/catch.hpp>

#include "core/openmp_wait.hpp"

using qkv::others_runnable;

TEST_CASE("others_runnable: the fewest other runnable threads over the three looks") {
  const char* busy[3] = {"1.00 0.90 0.80 3/152 4711\n", "1.00 0.90 0.80 2/152 4712\n",
                         "1.00 0.90 0.80 4/153 4713\n"};
  CHECK(others_runnable(busy) == 1);  // 2 runnable at the quietest look, this thread one of them
  const char* idle[3] = {"0.00 0.01 0.05 1/98 17\n", "0.00 0.01 0.05 5/98 17\n",
                         "0.00 0.01 0.05 1/98 18\n"};
  CHECK(others_runnable(idle) == 0);  // a moment's wake-up (5) is not a busy core
  const char* many[3] = {"9 9 9 12/400 1", "9 9 9 10/400 1", "9 9 9 11/400 1"};
  CHECK(others_runnable(many) == 9);
}

TEST_CASE("others_runnable: an unreadable look gives -1, never a guess") {
  const char* missing[3] = {"0.1 0.1 0.1 2/98 17", nullptr, "0.1 0.1 0.1 2/98 17"};
  CHECK(others_runnable(missing) == -1);
  const char* garbage[3] = {"0.1 0.1 0.1 x/98 17", "0.1 0.1 0.1 2/98 17", "0.1 0.1 0.1 2/98 17"};
  CHECK(others_runnable(garbage) == -1);
  const char* short_text[3] = {"0.1 0.1", "0.1 0.1 0.1 2/98 17", "0.1 0.1 0.1 2/98 17"};
  CHECK(others_runnable(short_text) == -1);
  const char* no_slash[3] = {"0.1 0.1 0.1 2 17", "0.1 0.1 0.1 2/98 17", "0.1 0.1 0.1 2/98 17"};
  CHECK(others_runnable(no_slash) == -1);
  const char* zero[3] = {"0.1 0.1 0.1 0/98 17", "0.1 0.1 0.1 2/98 17", "0.1 0.1 0.1 2/98 17"};
  CHECK(others_runnable(zero) == -1);  // the reader itself is runnable: 0 is not a reading
}
