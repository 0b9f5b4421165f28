// Linked with apps/main.cpp into qkv_serve_slow_load: `qkv serve` whose checkpoint loads take
// 3 s for runs whose folder name starts with "slow" (a slow disk), so a test can ask other runs
// while one loads.
#include <chrono>
#include <thread>

#include "serve/server.hpp"

namespace {
[[maybe_unused]] const bool registered =
    (qkv::serve::testing::set_before_load([](const std::string& key) {
       if (key.rfind("slow", 0) == 0) std::this_thread::sleep_for(std::chrono::seconds(3));
     }),
     true);
}  // namespace
