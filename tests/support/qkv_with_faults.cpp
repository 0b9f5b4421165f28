// Linked with apps/main.cpp into qkv_with_faults: the qkv binary with the tests' injected
// gradcheck faults registered before main runs (the registry is a function-local static, so
// the order of static initialisation does not matter).
#include "support/gradcheck_faults.hpp"

namespace {
[[maybe_unused]] const bool registered = (qkv::testing::register_gradcheck_faults(), true);
}  // namespace
