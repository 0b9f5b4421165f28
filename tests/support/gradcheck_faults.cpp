#include "support/gradcheck_faults.hpp"

#include "autograd/ops.hpp"
#include "core/random.hpp"
#include "nn/gradcheck_layers.hpp"

namespace qkv::testing {

namespace {

// x squared, with a backward that is off by a factor: gradcheck must catch it.
ag::Var wrong_square(const ag::Var& x) {
  const Tensor xd = x.data();
  return ag::record("wrong_square", mul(xd, xd), {x},
                    [xd](const Tensor& g) { return std::vector<Tensor>{mul(mul(g, xd), 3.0)}; });
}

}  // namespace

void register_gradcheck_faults() {
  for (const nn::GradcheckLayer& l : nn::gradcheck_layers())
    if (l.name == "wrong_square") return;
  nn::register_gradcheck_layer(
      {"wrong_square", "TEST ONLY: x^2 with a wrong backward (3x instead of 2x); must fail", true,
       [](const nn::LayerCheckOptions& o) {
         Generator g(o.seed);
         ag::Var x(uniform({2, 3}, -1, 1, g, DType::f64), true);
         x.set_name("x");
         return nn::GradcheckProblem{
             [](const std::vector<ag::Var>& in) { return wrong_square(in[0]); }, {x}, {}};
       }});
}

}  // namespace qkv::testing
