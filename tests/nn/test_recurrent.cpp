// nn::GRU, nn::LSTM and nn::ConvStack: torch's parameter names, gradcheck in float64 of the
// stacked and bidirectional layers under padding, their hook points, and bad input.
#include <catch2/catch.hpp>

#include "nn/conv.hpp"
#include "nn/recurrent.hpp"
#include "support/nn.hpp"

using namespace qkv;
using namespace qkv::nn;
using namespace qkv::testing;

TEST_CASE("GRU and LSTM parameters carry torch's names and shapes in torch's order") {
  Generator g(1);
  const LSTM lstm(5, 4, g, 2, true);
  const std::vector<std::pair<std::string, Shape>> want = {{"weight_ih_l0", {16, 5}},
                                                           {"weight_hh_l0", {16, 4}},
                                                           {"bias_ih_l0", {16}},
                                                           {"bias_hh_l0", {16}},
                                                           {"weight_ih_l0_reverse", {16, 5}},
                                                           {"weight_hh_l0_reverse", {16, 4}},
                                                           {"bias_ih_l0_reverse", {16}},
                                                           {"bias_hh_l0_reverse", {16}},
                                                           {"weight_ih_l1", {16, 8}},
                                                           {"weight_hh_l1", {16, 4}},
                                                           {"bias_ih_l1", {16}},
                                                           {"bias_hh_l1", {16}},
                                                           {"weight_ih_l1_reverse", {16, 8}},
                                                           {"weight_hh_l1_reverse", {16, 4}},
                                                           {"bias_ih_l1_reverse", {16}},
                                                           {"bias_hh_l1_reverse", {16}}};
  const auto got = lstm.named_parameters();
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    CHECK(got[i].first == want[i].first);
    CHECK(got[i].second.shape() == want[i].second);
  }
  const GRU gru(3, 6, g);
  CHECK(gru.named_parameters()[0].second.shape() == Shape{18, 3});
  const double bound = 1.0 / std::sqrt(6.0);  // torch's U(-1/sqrt(H), 1/sqrt(H))
  for (const auto& [name, p] : gru.named_parameters()) CHECK(max(abs(p.data())).item() <= bound);
}

TEST_CASE("gradcheck: bidirectional two-layer GRU and LSTM in float64, padded, with states") {
  for (bool lstm : {false, true}) {
    INFO((lstm ? "lstm" : "gru"));
    Generator g(lstm ? 2 : 3);
    Recurrent m(lstm ? RecurrentCell::lstm : RecurrentCell::gru, 3, 4, g, 2, true);
    m.to(DType::f64);
    const Tensor valid = valid_mask({4, 2}, 4);
    std::vector<ag::Var> in = {leaf({2, 4, 3}, g), leaf({4, 2, 4}, g)};
    if (lstm) in.push_back(leaf({4, 2, 4}, g));
    check_gradients(
        [&](const std::vector<ag::Var>& v) {
          const Recurrent::Output o = m.forward(v[0], valid, v[1], lstm ? v[2] : ag::Var());
          std::vector<ag::Var> parts = {ag::reshape(o.out, {-1}), ag::reshape(o.h, {-1})};
          if (lstm) parts.push_back(ag::reshape(o.c, {-1}));
          return ag::concat(parts, 0);
        },
        with_params(in, m));
  }
}

TEST_CASE("gradcheck: a causal dilated conv stack and a same-padded one in float64, padded") {
  for (bool causal : {false, true}) {
    INFO("causal " << causal);
    Generator g(causal ? 4 : 5);
    ConvStack m(ConvStackOptions{.d = 4,
                                 .layers = 2,
                                 .kernel = causal ? 3 : 2,
                                 .dilation_growth = 2,
                                 .causal = causal,
                                 .activation = Activation::gelu},
                g);
    m.to(DType::f64);
    const Tensor valid = valid_mask({6, 3}, 6);
    check_gradients([&](const std::vector<ag::Var>& v) { return m.forward(v[0], valid); },
                    with_params({leaf({2, 6, 4}, g)}, m));
  }
}

TEST_CASE("recurrent and conv stack hook points are passed in order with their shapes") {
  Generator g(6);
  const LSTM lstm(3, 5, g, 2, true);
  const ConvStack conv(ConvStackOptions{.d = 3, .layers = 2}, g);
  const ag::Var x(randn({2, 7, 3}, g));
  const Tensor valid = valid_mask({7, 4}, 7);
  auto hooked = [&](const ag::Var& input, Hooks& h) {
    h.capture = names_matching({"*"});
    h.add("rnn.0.out", [](const ag::Var& v) { return ag::mul(v, 0.0); });  // layer 1 sees zeros
    HookScope scope(h);
    const Recurrent::Output o = lstm.forward(input, valid);
    conv.forward(input);
    return o.out.data();
  };
  Hooks h, h2;
  const Tensor a = hooked(x, h);
  std::vector<std::string> want;
  lstm.list_hooks(want);
  conv.list_hooks(want);
  CHECK(h.passed == want);
  CHECK(want == std::vector<std::string>{"rnn.0.out", "rnn.0.h", "rnn.0.c", "rnn.1.out", "rnn.1.h",
                                         "rnn.1.c", "conv.0.conv", "conv.0.out", "conv.1.conv",
                                         "conv.1.out"});
  CHECK(h.cache.at("rnn.0.out").shape() == Shape{2, 7, 10});
  CHECK(h.cache.at("rnn.1.h").shape() == Shape{2, 2, 5});
  CHECK(h.cache.at("rnn.0.c").shape() == Shape{2, 2, 5});
  CHECK(h.cache.at("conv.1.out").shape() == Shape{2, 7, 3});
  CHECK(max(abs(h.cache.at("rnn.0.out").data())).item() == 0.0);
  // the replacement flows on: the output no longer depends on x, and differs from a plain pass
  CHECK(same_bits(a, hooked(ag::Var(randn({2, 7, 3}, g)), h2)));
  CHECK(!same_bits(a, lstm.forward(x, valid).out.data()));
}

TEST_CASE("recurrent and conv modules name the module and the shapes on bad input") {
  Generator g(7);
  const GRU gru(3, 4, g, 2);
  CHECK_ERROR_MENTIONS(gru.forward(ag::Var(zeros({2, 5, 4}))), "GRU", "(2, 5, 4)", "3");
  CHECK_ERROR_MENTIONS(gru.forward(ag::Var(zeros({2, 5, 3})), Tensor(), ag::Var(zeros({1, 2, 4}))),
                       "GRU", "h0", "(2, 2, 4)");
  CHECK_ERROR_MENTIONS(
      gru.forward(ag::Var(zeros({2, 5, 3})), Tensor(), ag::Var(), ag::Var(zeros({2, 2, 4}))), "GRU",
      "c0", "LSTM only");
  CHECK_ERROR_MENTIONS(GRU(0, 4, g), "GRU", "input_size 0");
  CHECK_ERROR_MENTIONS(ConvStack(ConvStackOptions{.d = 4, .kernel = 0}, g), "ConvStack", "kernel");
  CHECK_ERROR_MENTIONS(ConvStack(ConvStackOptions{.d = 4, .activation = Activation::swiglu}, g),
                       "ConvStack", "swiglu");
  const ConvStack conv(ConvStackOptions{.d = 4}, g);
  CHECK_ERROR_MENTIONS(conv.forward(ag::Var(zeros({2, 5, 3}))), "ConvStack", "(2, 5, 3)");
}
