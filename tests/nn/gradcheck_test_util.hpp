// The gradcheck fixture of the nn tests: a module's parameters appended to the inputs, and one
// checker that requires every input and parameter to be checked and to pass.
#pragma once
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "autograd/gradcheck.hpp"
#include "nn/module.hpp"
#include "test_util.hpp"

namespace qkv::nn::test {

// inputs first, then every parameter of m (named, so a failure names the parameter)
inline std::vector<ag::Var> with_params(std::vector<ag::Var> inputs, const Module& m) {
  for (const auto& [name, p] : m.named_parameters()) {
    ag::Var v = p;
    v.set_name(name);
    inputs.push_back(v);
  }
  return inputs;
}

// gradcheck of f at in on one thread (central differences call f thousands of times; a
// parallel region per op would only add noise). Prints the worst errors under the test's name.
inline void check_gradients(const ag::GradcheckFn& f, const std::vector<ag::Var>& in) {
  const qkv::test::ScopedThreads one(1);
  const ag::GradcheckReport r = ag::gradcheck(f, in);
  INFO(r.summary());
  CHECK(r.passed);
  double worst_abs = 0, worst_rel = 0;
  int64_t checked = 0;
  for (const auto& c : r.inputs) {
    worst_abs = std::max(worst_abs, c.max_abs_err);
    worst_rel = std::max(worst_rel, c.max_rel_err);
    checked += c.checked;
  }
  std::printf("gradcheck [%s] %zu inputs: max abs err %.2g, max rel err %.2g\n",
              Catch::getResultCapture().getCurrentTestName().c_str(), r.inputs.size(), worst_abs,
              worst_rel);
  CHECK(checked > 0);
  CHECK(r.inputs.size() == in.size());  // every input (and parameter) was checked
}

}  // namespace qkv::nn::test
