// Injected faults for the gradcheck registry (nn/gradcheck_layers.hpp): layers whose backward
// is wrong on purpose, so the tests can see gradcheck and `qkv gradcheck` fail. They live here,
// never in library code; the tests' build of the qkv binary (qkv_with_faults) registers them too.
#pragma once

namespace qkv::testing {

// Registers wrong_square (x^2 whose backward returns 3x instead of 2x), marked test_only:
// listed, never part of --all. Safe to call more than once.
void register_gradcheck_faults();

}  // namespace qkv::testing
