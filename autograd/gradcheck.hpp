// gradcheck: compares autograd's gradients with central differences, in float64.
//
// f maps the inputs to an output of any shape; a non-scalar output is reduced to the scalar
// L = <output, R> with a fixed random R, so every output element is checked at once. Each
// input that requires grad is checked element by element when small (numel <=
// max_elementwise), and along random unit directions (directional derivatives) when large.
// An element passes when |analytic - numerical| <= atol + rtol * |numerical|, as
// torch.autograd.gradcheck. The inputs' data is perturbed in place and restored.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "autograd/var.hpp"

namespace qkv::ag {

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
  int64_t max_elementwise = 2048;  // larger inputs are checked along random directions
  int64_t directions = 16;
  uint64_t seed = 0;
  bool allow_float32 = false;  // float32 differences are too coarse; opt in with loose tolerances
};

struct InputCheck {
  std::string name;     // the Var's name, or "input <i>"
  int64_t checked = 0;  // elements (or directions) checked
  bool directional = false;
  double max_abs_err = 0, max_rel_err = 0;
  bool passed = true;
};

struct GradcheckReport {
  bool passed = true;
  std::vector<InputCheck> inputs;
  // The worst element over all inputs (largest error relative to its tolerance).
  std::string worst_input;
  Shape worst_index;  // empty for a direction
  double analytic = 0, numerical = 0, abs_err = 0, rel_err = 0;
  std::string summary() const;  // one line per input, then the worst element
};

using GradcheckFn = std::function<Var(const std::vector<Var>&)>;

GradcheckReport gradcheck(const GradcheckFn& f, const std::vector<Var>& inputs,
                          const GradcheckOptions& opt = {});

}  // namespace qkv::ag
