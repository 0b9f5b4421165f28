#include "gradcheck.hpp"

#include <cmath>
#include <optional>
#include <sstream>

#include "core/random.hpp"

namespace qkv::ag {
namespace {

double dot(const Tensor& a, const Tensor& b) { return qkv::sum(qkv::mul(a, b)).item(); }

// Flat index -> multi-index, for the report.
Shape unravel(int64_t flat, const Shape& s) {
  Shape idx(s.size());
  for (int64_t d = static_cast<int64_t>(s.size()) - 1; d >= 0; --d) {
    idx[d] = flat % s[d];
    flat /= s[d];
  }
  return idx;
}

}  // namespace

std::string GradcheckReport::summary() const {
  std::ostringstream os;
  for (const InputCheck& c : inputs)
    os << c.name << ": " << c.checked << (c.directional ? " directions" : " elements")
       << ", max abs err " << c.max_abs_err << ", max rel err " << c.max_rel_err
       << (c.passed ? ", pass" : ", FAIL") << '\n';
  os << "worst: " << worst_input << ' '
     << (worst_index.empty() ? "direction" : shape_str(worst_index)) << " analytic " << analytic
     << " numerical " << numerical << " abs err " << abs_err << " rel err " << rel_err
     << (passed ? " (pass)" : " (FAIL)");
  return os.str();
}

GradcheckReport gradcheck(const GradcheckFn& f, const std::vector<Var>& inputs,
                          const GradcheckOptions& opt) {
  for (const Var& v : inputs)
    QKV_CHECK(v.dtype() == DType::f64 || !is_floating(v.dtype()) || opt.allow_float32 ||
                  !v.requires_grad(),
              "gradcheck", "input ", v.shape(), " is ", dtype_name(v.dtype()),
              "; finite differences need float64 (set allow_float32 with loosened tolerances)");
  Generator gen(opt.seed);

  // The scalar under test: L = <f(inputs), R>.
  Tensor R;
  auto loss = [&](bool record_graph) -> std::pair<double, Var> {
    std::optional<NoGrad> off;
    if (!record_graph) off.emplace();
    Var out = f(inputs);
    if (!R.defined()) R = randn(out.shape(), gen, out.dtype());
    return {dot(out.data(), R), out};
  };

  // Analytic gradients, once.
  auto [l0, out] = loss(true);
  std::vector<Var> wrt;
  for (const Var& v : inputs)
    if (v.requires_grad()) wrt.push_back(v);
  QKV_CHECK(!wrt.empty(), "gradcheck", "no input requires grad");
  QKV_CHECK(out.requires_grad(), "gradcheck",
            "the output does not depend on any input that requires grad");
  const std::vector<Tensor> analytic = grad({out}, {R}, wrt);

  GradcheckReport rep;
  double worst_ratio = -1;
  auto judge = [&](InputCheck& c, const Shape& where, double a, double n) {
    const double abs_err = std::abs(a - n);
    const double rel_err = abs_err / std::max(std::abs(n), 1e-12);
    const double allowed = opt.atol + opt.rtol * std::abs(n);
    const bool ok = abs_err <= allowed && std::isfinite(a) && std::isfinite(n);
    c.max_abs_err = std::max(c.max_abs_err, abs_err);
    if (std::abs(n) > opt.atol) c.max_rel_err = std::max(c.max_rel_err, rel_err);
    c.passed = c.passed && ok;
    const double ratio = std::isfinite(abs_err) ? abs_err / allowed : INFINITY;
    if (ratio > worst_ratio) {
      worst_ratio = ratio;
      rep.worst_input = c.name;
      rep.worst_index = where;
      rep.analytic = a;
      rep.numerical = n;
      rep.abs_err = abs_err;
      rep.rel_err = rel_err;
    }
  };

  for (size_t k = 0; k < wrt.size(); ++k) {
    Var v = wrt[k];
    InputCheck c;
    c.name = v.name().empty() ? "input " + std::to_string(k) : v.name();
    Tensor x = v.data();  // perturbed in place through this handle
    const Tensor ga = analytic[k].to(DType::f64).contiguous();
    const int64_t n = x.numel();
    if (n <= opt.max_elementwise) {
      for (int64_t i = 0; i < n; ++i) {
        const Shape idx = unravel(i, x.shape());
        Tensor xi = x;
        for (int64_t d = 0; d < static_cast<int64_t>(idx.size()); ++d) xi = xi.select(0, idx[d]);
        const double orig = xi.item();
        xi.fill_(orig + opt.eps);
        const double lp = loss(false).first;
        xi.fill_(orig - opt.eps);
        const double lm = loss(false).first;
        xi.fill_(orig);
        judge(c, idx, ga.data<double>()[i], (lp - lm) / (2 * opt.eps));
        ++c.checked;
      }
    } else {
      c.directional = true;
      const Tensor saved = x.clone();
      for (int64_t j = 0; j < opt.directions; ++j) {
        Tensor dir = randn(x.shape(), gen, x.dtype());
        dir = qkv::div(dir, std::sqrt(dot(dir, dir)));
        x.copy_(qkv::add(saved, qkv::mul(dir, opt.eps)));
        const double lp = loss(false).first;
        x.copy_(qkv::sub(saved, qkv::mul(dir, opt.eps)));
        const double lm = loss(false).first;
        x.copy_(saved);
        judge(c, {}, dot(ga, dir.to(DType::f64)), (lp - lm) / (2 * opt.eps));
        ++c.checked;
      }
    }
    rep.passed = rep.passed && c.passed;
    rep.inputs.push_back(c);
  }
  return rep;
}

}  // namespace qkv::ag
