#include "nn/recurrent.hpp"

#include <cmath>

#include "nn/hooks.hpp"

namespace qkv::nn {

Recurrent::Recurrent(RecurrentCell cell_, int64_t input, int64_t hidden, Generator& gen,
                     int64_t layers_, bool bidirectional)
    : cell(cell_),
      input_size(input),
      hidden_size(hidden),
      layers(layers_),
      directions(bidirectional ? 2 : 1) {
  const char* op = cell == RecurrentCell::gru ? "GRU" : "LSTM";
  QKV_CHECK(input > 0 && hidden > 0 && layers_ > 0, op, "sizes must be positive, got input_size ",
            input, " hidden_size ", hidden, " layers ", layers_);
  // torch's reset_parameters: every weight and bias U(-1/sqrt(H), 1/sqrt(H)), in its order
  const double a = 1.0 / std::sqrt(static_cast<double>(hidden));
  const int64_t gh = gate_count(cell) * hidden;
  for (int64_t l = 0; l < layers; ++l)
    for (int64_t dir = 0; dir < directions; ++dir) {
      const std::string suffix = "_l" + std::to_string(l) + (dir == 1 ? "_reverse" : "");
      const int64_t in = l == 0 ? input : directions * hidden;
      Weights w;
      w.w_ih = register_parameter("weight_ih" + suffix, uniform({gh, in}, -a, a, gen));
      w.w_hh = register_parameter("weight_hh" + suffix, uniform({gh, hidden}, -a, a, gen));
      w.b_ih = register_parameter("bias_ih" + suffix, uniform({gh}, -a, a, gen));
      w.b_hh = register_parameter("bias_hh" + suffix, uniform({gh}, -a, a, gen));
      weights.push_back(w);
    }
}

Recurrent::Output Recurrent::forward(const Var& x, const Tensor& valid, const Var& h0,
                                     const Var& c0) const {
  const char* op = cell == RecurrentCell::gru ? "GRU" : "LSTM";
  QKV_CHECK(x.dim() == 3 && x.size(2) == input_size, op, "input ", x.shape(),
            " must be (B, n, input_size ", input_size, ")");
  const Shape states{layers * directions, x.size(0), hidden_size};
  QKV_CHECK(!h0.defined() || h0.shape() == states, op, "h0 ", h0.shape(), " must be ", states);
  QKV_CHECK(!c0.defined() || (cell == RecurrentCell::lstm && c0.shape() == states), op, "c0 ",
            c0.shape(), " must be ", states, " (LSTM only)");
  Var input = x;
  std::vector<Var> hs, cs;  // (D, B, H) per layer
  for (int64_t l = 0; l < layers; ++l) {
    std::vector<Var> outs, h_l, c_l;
    for (int64_t dir = 0; dir < directions; ++dir) {
      const int64_t i = l * directions + dir;
      const Weights& w = weights[i];
      const Var h_i = h0.defined() ? ag::select(h0, 0, i) : Var();
      const Var c_i = c0.defined() ? ag::select(c0, 0, i) : Var();
      const ag::RecurrentOut r =
          cell == RecurrentCell::gru
              ? ag::gru(input, valid, h_i, w.w_ih, w.w_hh, w.b_ih, w.b_hh, dir == 1)
              : ag::lstm(input, valid, h_i, c_i, w.w_ih, w.w_hh, w.b_ih, w.b_hh, dir == 1);
      outs.push_back(r.out);
      h_l.push_back(r.h);
      if (r.c.defined()) c_l.push_back(r.c);
    }
    const std::string prefix = hook_prefix + std::to_string(l) + ".";
    input = hook_point(directions == 1 ? outs[0] : ag::concat(outs, 2), prefix, "out");
    hs.push_back(hook_point(ag::stack(h_l, 0), prefix, "h"));
    if (!c_l.empty()) cs.push_back(hook_point(ag::stack(c_l, 0), prefix, "c"));
  }
  return {input, ag::concat(hs, 0), cs.empty() ? Var() : ag::concat(cs, 0)};
}

void Recurrent::list_hooks(std::vector<std::string>& out) const {
  for (int64_t l = 0; l < layers; ++l) {
    const std::string prefix = hook_prefix + std::to_string(l) + ".";
    out.push_back(prefix + "out");
    out.push_back(prefix + "h");
    if (cell == RecurrentCell::lstm) out.push_back(prefix + "c");
  }
}

}  // namespace qkv::nn
