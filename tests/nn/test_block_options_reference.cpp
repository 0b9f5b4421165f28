// The block options against PyTorch (tests/nn/reference_block_options.py, /usr/bin/python3):
// RMSNorm, the relu2 and SwiGLU feed-forward networks, the logits' soft cap and self-attention
// with QK-norm, on the same weights and inputs in float64, outputs and every gradient. torch
// 1.13 has none of these as a module: the script holds each one's defining formula in torch
// ops. The attention case has 70 queries and keys, past the fused kernel's 64-query tile.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <deque>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "support/common.hpp"
#include "support/nn.hpp"

using namespace qkv;
using namespace qkv::nn;
using namespace qkv::testing;
using nlohmann::json;

namespace {

json flat(const Tensor& t) {
  return {{"shape", t.shape()}, {"data", to_vector<double>(t.to(DType::f64).contiguous())}};
}

Tensor unflat(const json& j) {
  return from_vector<double>(j["data"].get<std::vector<double>>(), j["shape"].get<Shape>());
}

// One case: the forward on named inputs (parameters included), its output and gradients.
struct Case {
  std::string name, op;
  json config;
  std::vector<std::pair<std::string, Var>> tensors;
  std::function<Var()> forward;
  std::map<std::string, Tensor> ours;
  json to_torch(Generator& g) {
    const Var y = forward();
    const Tensor r = randn(y.shape(), g, DType::f64);
    std::vector<Var> wrt;
    json t = json::object();
    for (auto& [n, v] : tensors) t[n] = flat(v.data()), wrt.push_back(v);
    const std::vector<Tensor> grads = ag::grad({y}, {r}, wrt);
    ours["out"] = y.data();
    for (size_t i = 0; i < grads.size(); ++i) ours["grad." + tensors[i].first] = grads[i];
    return {{"name", name}, {"op", op}, {"config", config}, {"tensors", t}, {"R", flat(r)}};
  }
};

// The module's parameters, perturbed (unit gains and zero biases would hide misuse), as inputs.
void add_params(Case& c, Module& m, Generator& g) {
  m.to(DType::f64);
  for (auto& [n, v] : m.named_parameters()) {
    v.data() = add(v.data(), mul(randn(v.shape(), g, DType::f64), 0.3));
    c.tensors.emplace_back(n, v);
  }
}

}  // namespace

TEST_CASE("block options match their PyTorch formulas, outputs and gradients", "[reference]") {
  SKIP_WITHOUT_TORCH();
  Generator g(31);
  std::deque<Case> cases;  // (a deque: the forwards hold references to their cases)
  const double eps = 1e-5;
  auto add = [&](const std::string& name, const std::string& op, json config) -> Case& {
    cases.push_back(Case{name, op, std::move(config), {}, nullptr, {}});
    return cases.back();
  };

  auto norm = std::make_shared<RMSNorm>(8, eps);
  Case& rms = add("rmsnorm", "rmsnorm", {{"eps", eps}});
  rms.tensors.emplace_back("x", leaf({2, 5, 8}, g, DType::f64, -2, 2));
  add_params(rms, *norm, g);
  rms.forward = [&rms, norm] { return norm->forward(rms.tensors[0].second); };

  for (Activation a : {Activation::relu2, Activation::swiglu}) {
    auto ffn = std::make_shared<PositionwiseFeedForward>(8, 12, g, a, 0.0, nullptr);
    const std::string op = std::string(name_of(a)) + "_ffn";
    Case& c = add(op, op, json::object());
    c.tensors.emplace_back("x", leaf({2, 5, 8}, g));
    add_params(c, *ffn, g);
    c.forward = [&c, ffn] { return ffn->forward(c.tensors[0].second); };
  }

  Case& cap = add("softcap", "softcap", {{"cap", 2.5}});
  cap.tensors.emplace_back("x", leaf({3, 11}, g, DType::f64, -8, 8));
  cap.forward = [&cap] { return soft_cap(cap.tensors[0].second, 2.5); };

  auto attn = std::make_shared<MultiHeadAttention>(16, 2, g);
  attn->use_qk_norm(eps);
  Case& qk = add("qk_norm_attention", "qk_norm_attention", {{"heads", 2}, {"eps", eps}});
  qk.tensors.emplace_back("x", leaf({2, 70, 16}, g));
  add_params(qk, *attn, g);
  qk.forward = [&qk, attn] {
    const Var& x = qk.tensors[0].second;
    return attn->forward(x, x, x, causal_mask(70));
  };

  json in = json::array();
  for (Case& c : cases) in.push_back(c.to_torch(g));
  TempDir dir("block_options_ref");
  const std::string in_path = dir.file("in.json"), out_path = dir.file("out.json");
  std::ofstream(in_path) << in.dump();
  const std::string script = source_dir() + "/tests/nn/reference_block_options.py";
  const std::string cmd = "/usr/bin/python3 '" + script + "' '" + in_path + "' '" + out_path +
                          "' > '" + dir.file("log") + "' 2>&1";
  REQUIRE(std::system(cmd.c_str()) == 0);
  const json out = json::parse(std::ifstream(out_path));
  for (Case& c : cases) {
    REQUIRE(out.contains(c.name));
    for (const auto& [k, ours] : c.ours) {
      INFO(c.name << " " << k);
      const Tensor theirs = unflat(out[c.name][k]);
      REQUIRE(theirs.shape() == ours.shape());
      CHECK(rel_err(ours, theirs) < 1e-9);
    }
  }
}
