// Linked with apps/main.cpp into qkv_alloc_fault: `qkv train` whose allocation fails once the
// run folder is made, as QKV_ALLOC_FAULT says: "main" throws std::bad_alloc on the command's
// thread, "thread" on another thread (where no handler of the command can catch it).
#include <cstdlib>
#include <new>
#include <string>
#include <thread>

#include "run/train_run.hpp"

namespace {

void fail_allocation() {
  const char* e = std::getenv("QKV_ALLOC_FAULT");
  const std::string where = e ? e : "";
  if (where == "main") throw std::bad_alloc();
  if (where == "thread") std::thread([] { throw std::bad_alloc(); }).join();
}

[[maybe_unused]] const bool registered =
    (qkv::run::testing::set_after_folder(fail_allocation), true);

}  // namespace
