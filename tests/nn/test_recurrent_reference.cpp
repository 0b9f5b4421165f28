// nn::GRU, nn::LSTM, nn::Conv1d and nn::ConvStack against torch.nn.GRU / LSTM / Conv1d
// (tests/nn/reference_recurrent.py, run with /usr/bin/python3) in float32 on the same weights
// (loaded into torch by name with load_state_dict) and inputs: outputs, final states, and the
// gradients of the input, the initial states and every parameter. Sizes cross the kernels'
// blocks: widths that are no multiple of 16, n = 1 and n = 37, padded rows (torch's packed
// sequences), two layers, both directions. Error per tensor: max|ours - torch| / max|torch|.
#include <catch2/catch.hpp>

#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "nn/conv.hpp"
#include "nn/recurrent.hpp"
#include "nn/safetensors.hpp"
#include "support/nn.hpp"

using namespace qkv;
using namespace qkv::nn;
using namespace qkv::testing;

namespace {

struct Case {
  std::string name;
  nlohmann::json config;
  NamedTensors files;                  // what the script reads
  std::map<std::string, Tensor> ours;  // what it must give back
};

// Gradients of sum_i <outputs_i, R_i> with respect to x, the states and every parameter of m,
// stored in c.ours under the script's names; the R_i go to c.files as names[i].
void add_gradients(Case& c, const Module& m, const std::vector<ag::Var>& outputs,
                   const std::vector<std::string>& names, std::vector<ag::Var> wrt,
                   std::vector<std::string> wrt_names, Generator& g) {
  std::vector<Tensor> R;
  for (size_t i = 0; i < outputs.size(); ++i) {
    R.push_back(randn(outputs[i].shape(), g));
    c.files.push_back({names[i], R.back()});
  }
  for (const auto& [name, p] : m.named_parameters()) {
    wrt.push_back(p);
    wrt_names.push_back("param." + name);
    c.files.push_back({"param." + name, p.data()});
  }
  const std::vector<Tensor> grads = ag::grad(outputs, R, wrt);
  for (size_t i = 0; i < wrt.size(); ++i) c.ours["grad." + wrt_names[i]] = grads[i];
}

Case recurrent_case(const std::string& name, bool lstm, int64_t n, int64_t d, int64_t H,
                    int64_t layers, bool bidirectional, const std::vector<int64_t>& lengths,
                    bool with_states, uint64_t seed) {
  Generator g(seed);
  const int64_t B = static_cast<int64_t>(lengths.size()), D = bidirectional ? 2 : 1;
  const Recurrent m(lstm ? RecurrentCell::lstm : RecurrentCell::gru, d, H, g, layers,
                    bidirectional);
  const ag::Var x(randn({B, n, d}, g), true);
  const Tensor valid = valid_mask(lengths, n);
  ag::Var h0, c0;
  std::vector<ag::Var> wrt = {x};
  std::vector<std::string> wrt_names = {"x"};
  Case c{name,
         {{"kind", lstm ? "lstm" : "gru"},
          {"hidden", H},
          {"layers", layers},
          {"bidirectional", bidirectional}},
         {{"x", x.data()}, {"valid", valid}},
         {}};
  if (with_states) {
    h0 = ag::Var(mul(randn({layers * D, B, H}, g), 0.5), true);
    wrt.push_back(h0), wrt_names.push_back("h0"), c.files.push_back({"h0", h0.data()});
    if (lstm) {
      c0 = ag::Var(mul(randn({layers * D, B, H}, g), 0.5), true);
      wrt.push_back(c0), wrt_names.push_back("c0"), c.files.push_back({"c0", c0.data()});
    }
  }
  const Recurrent::Output o = m.forward(x, valid, h0, c0);
  c.ours = {{"out", o.out.data()}, {"h", o.h.data()}};
  std::vector<ag::Var> outputs = {o.out, o.h};
  std::vector<std::string> names = {"R", "Rh"};
  if (lstm) c.ours["c"] = o.c.data(), outputs.push_back(o.c), names.push_back("Rc");
  add_gradients(c, m, outputs, names, wrt, wrt_names, g);
  return c;
}

Case conv_case(const std::string& name, bool stack, int64_t n, int64_t d, int64_t out, int64_t k,
               int64_t dilation, bool causal, const std::vector<int64_t>& lengths, uint64_t seed) {
  Generator g(seed);
  const int64_t B = static_cast<int64_t>(lengths.size());
  const ag::Var x(randn({B, n, d}, g), true);
  const Tensor valid = valid_mask(lengths, n);
  Case c{name,
         {{"kind", stack ? "convstack" : "conv1d"},
          {"out", out},
          {"k", k},
          {"dilation", dilation},
          {"causal", causal}},
         {{"x", x.data()}, {"valid", valid}},
         {}};
  std::shared_ptr<Module> m;
  ag::Var y;
  if (stack) {
    ConvStackOptions o{
        .d = d, .layers = 3, .kernel = k, .dilation_growth = dilation, .causal = causal};
    c.config["layers"] = o.layers;
    c.config["growth"] = dilation;
    auto s = std::make_shared<ConvStack>(o, g);
    // gains and shifts away from 1 and 0, so their gradients are tested as used
    for (auto [pname, p] : s->named_parameters())
      if (pname.find("norm") != std::string::npos) p.data().copy_(uniform(p.shape(), 0.5, 1.5, g));
    y = s->forward(x, valid);
    m = s;
  } else {
    auto conv = std::make_shared<Conv1d>(d, out, k, g, dilation, causal);
    y = conv->forward(x, valid);
    m = conv;
  }
  c.ours = {{"out", y.data()}};
  add_gradients(c, *m, {y}, {"R"}, {x}, {"x"}, g);
  return c;
}

}  // namespace

TEST_CASE("reference: GRU, LSTM, Conv1d and a conv stack match torch.nn in float32",
          "[reference]") {
  TempDir dir("recurrent_ref");
  const std::vector<Case> cases = {
      recurrent_case("gru_bi_2layers_n37", false, 37, 20, 19, 2, true, {37, 20, 1}, true, 1),
      recurrent_case("lstm_bi_2layers_n37", true, 37, 20, 19, 2, true, {37, 20, 1}, true, 2),
      recurrent_case("gru_n1", false, 1, 5, 7, 1, false, {1, 1}, false, 3),
      recurrent_case("lstm_n1_bi", true, 1, 5, 7, 1, true, {1, 1}, true, 4),
      recurrent_case("lstm_h33_n37", true, 37, 33, 17, 1, false, {37, 36, 5, 37}, false, 5),
      recurrent_case("gru_wide_n37", false, 37, 48, 40, 1, true, {30, 37}, true, 6),
      conv_case("conv1d_k3_dil2", false, 37, 20, 19, 3, 2, false, {37, 20, 1}, 7),
      conv_case("conv1d_k4_same", false, 37, 20, 19, 4, 1, false, {37, 30}, 8),
      conv_case("conv1d_k3_causal_dil3", false, 37, 17, 33, 3, 3, true, {37, 12}, 9),
      conv_case("conv1d_n1_k3", false, 1, 5, 7, 3, 1, false, {1, 1}, 10),
      conv_case("convstack_causal", true, 37, 20, 20, 3, 2, true, {37, 25, 3}, 11),
      conv_case("convstack_same", true, 37, 19, 19, 5, 1, false, {37, 9}, 12),
  };
  for (const Case& c : cases)
    save_safetensors(dir.file(c.name + ".in.safetensors"), c.files, {{"config", c.config.dump()}});
  const ReferenceRun ref = run_reference(source_path("tests/nn/reference_recurrent.py"), dir);
  INFO(ref.report());
  REQUIRE(ref.status == 0);
  for (const Case& c : cases) {
    const SafetensorsFile theirs = load_safetensors(dir.file(c.name + ".out.safetensors"));
    for (const auto& [name, t] : c.ours) {
      const Tensor want = theirs.get(name);
      const double err = rel_err(t, want), size = max(abs(want)).item();
      std::printf("recurrent reference %-22s %-31s max|torch| %8.3g rel err %.3g\n", c.name.c_str(),
                  name.c_str(), size, err);
      INFO(c.name << " " << name);
      CHECK(err < 2e-5);
      // every tensor compared carries something (h0 = 0 leaves w_hh's gradient 0 at n = 1)
      CHECK((size > 0 || (c.name == "gru_n1" && name == "grad.param.weight_hh_l0")));
    }
  }
}
