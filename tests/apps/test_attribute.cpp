// qkv attribute (inspect/token_attribution.hpp) on tiny trained runs of each family: every
// method against its definition where the answer is known in closed form (a model made linear
// in its embeddings by hooks; attention patterns set by hooks for the rollout), the gradients
// against central differences of the model's own logits, integrated gradients' completeness,
// and the command's output and errors through the binary.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "inspect/token_attribution.hpp"
#include "nn/model.hpp"
#include "nn/safetensors.hpp"
#include "run/inference.hpp"
#include "support/inspect_runs.hpp"
#include "support/nn.hpp"
#include "support/process.hpp"

using namespace qkv;
using namespace qkv::testing;
using inspect::AttributionMethod;

namespace {

// The tiny GPT ("lm"), copy translator ("copy") and majority classifier ("majority"), and a
// translator of reference_nn.py's nn.Transformer layout ("translator": post-LN with a final norm).
const TempDir& runs() {
  return inspect_runs("attribute", [](const TempDir& dir) {
    train_tiny_copy(dir, "translator", 60, 500, " --model.final_norm true");
  });
}

std::unique_ptr<run::Inference> open(const std::string& name) { return open_tiny(runs(), name); }

std::vector<double> as_vec(const Tensor& t) {
  return to_vector<double>(t.to(DType::f64).contiguous());
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// Integrated gradients' completeness as the tests require it: the row's sum within 1% of
// f(input) - f(baseline), or of one logit when the change is smaller (the tiny copy run's first
// row changes by 0.21 and its sum is off by 0.0034, 1.6% of it).
void check_completeness(double sum, double value, double baseline) {
  const double change = value - baseline;
  INFO("sum " << sum << ", f " << value << " - " << baseline);
  CHECK(std::abs(sum - change) < 0.01 * std::max(std::abs(change), 1.0));
}

// Tiny recurrent runs, trained on first use only (not for the tests above): Bahdanau's GRU
// encoder-decoder ("bahdanau", configs/bahdanau-copy.toml) and a GRU encoder under a Transformer
// decoder ("gru_encoder"), d_model 32, 30 steps each.
const TempDir& recurrent_runs() {
  static TempDir dir("attribute_recurrent");
  static const bool trained = [] {
    const std::string tiny =
        " --threads 1 --quiet --train.max_steps 30 --optim.warmup 5 --train.eval_examples 10"
        " --data.train_size 200 --data.valid_size 20 --data.test_size 20 --model.d_model 32";
    for (const auto& [name, args] : std::vector<std::pair<std::string, std::string>>{
             {"bahdanau", shipped_config("bahdanau-copy.toml")},
             {"gru_encoder", shipped_config("copy.toml") +
                                 " --model.encoder gru --model.d_ff 64 --model.heads 2"}}) {
      const RunResult r = run_qkv("train " + args + " --run-dir " + quoted(dir.file(name)) + tiny);
      INFO(r.output);
      REQUIRE(r.status == 0);
    }
    return true;
  }();
  (void)trained;
  return dir;
}

// Hooks that make the model linear in its embeddings: the stream the output layer reads is
// replaced by the output side's embedding plus the mean of the input side's (an
// encoder-decoder), or the embedding alone (a language model). The embeddings are read from
// this layer's own captures, which hold what flows on after every layer's replacements.
void make_linear(nn::Hooks& h, const nn::Model& m, bool pair) {
  const std::string out = pair ? "decoder.embed" : "embed";
  h.capture = nn::names_matching({"*embed"});
  h.add(read_point(m), [&h, out, pair](const ag::Var&) {
    const ag::Var e = h.cache.at(out);
    return pair ? ag::add(e, ag::mean(h.cache.at("encoder.embed"), {1}, true)) : e;
  });
}

// The embedding of one side in a plain pass (n, d).
Tensor embedding(const run::Inference& inf, const data::Ids& input, const data::Ids& tgt_in,
                 const std::string& point) {
  nn::Hooks cap;
  cap.capture = nn::names_matching({point});
  inf.logits(input, tgt_in, &cap);
  return cap.cache.at(point).data().select(0, 0);
}

// A query of method over each tiny run's sample input ("lm", "copy", "majority"), scoring its
// first `tokens` greedy outputs.
inspect::AttributionQuery sample_query(const run::Inference& inf, const std::string& name,
                                       AttributionMethod method, int64_t tokens) {
  const char* text = name == "lm" ? "First Citizen" : name == "copy" ? "3 1 4 1 5" : "0110111";
  inspect::AttributionQuery q{.input = inf.encode(text, "test"), .outputs = {}, .method = method};
  q.outputs = inspect::default_outputs(inf, q.input, tokens);
  return q;
}

}  // namespace

TEST_CASE("attribute: on a model linear in its embeddings every gradient method is exact") {
  for (const char* name : {"lm", "copy"}) {
    INFO(name);
    const auto inf = open(name);
    const bool pair = std::string(name) == "copy";
    const data::Ids input = inf->encode(pair ? "1 2 3 4" : "First", "test");
    const data::Ids outputs = inspect::output_ids(*inf, pair ? "5 6 7" : "Cit", "test");
    const int64_t contrast = inspect::output_ids(*inf, pair ? "9" : "z", "test")[0];
    const std::vector<double> w = as_vec(inf->model().output_layer().weight.data());
    const int64_t d = inf->model().output_layer().weight.size(1);
    nn::Hooks linear;
    make_linear(linear, inf->model(), pair);
    const nn::HookScope scope(linear);
    for (const bool with_contrast : {false, true})
      for (const AttributionMethod m :
           {AttributionMethod::saliency, AttributionMethod::input_x_gradient,
            AttributionMethod::integrated_gradients}) {
        INFO(inspect::name_of(m) << (with_contrast ? " with a contrast" : ""));
        inspect::AttributionQuery q{.input = input, .outputs = outputs, .method = m, .steps = 8};
        if (with_contrast) q.contrast = contrast;
        const inspect::TokenAttribution a = inspect::attribute_tokens(*inf, q);
        const auto n = static_cast<int64_t>(input.size());
        const auto k = static_cast<int64_t>(outputs.size());
        REQUIRE(a.scores.size() == outputs.size());
        // the output side as the model reads it: <bos> + outputs (pair), or the whole text
        data::Ids side = pair ? data::Ids{inf->run().data.framing.bos} : input;
        side.insert(side.end(), outputs.begin(), outputs.end() - 1);
        const Tensor e_out =
            embedding(*inf, pair ? input : side, side, pair ? "decoder.embed" : "embed");
        const Tensor e_in = pair ? embedding(*inf, input, side, "encoder.embed") : Tensor();
        for (int64_t r = 0; r < k; ++r) {
          std::vector<double> u(w.begin() + outputs[r] * d, w.begin() + (outputs[r] + 1) * d);
          if (with_contrast)
            for (int64_t j = 0; j < d; ++j) u[j] -= w[contrast * d + j];
          const double norm = std::sqrt(dot(u, u));
          const int64_t at = pair ? r : n - 1 + r;  // the output-side position row r reads
          // expected per column: the read position's u . e (saliency |u|); an encoder-decoder's
          // source tokens u . e_i / S each (saliency |u| / S)
          std::vector<double> want;
          if (pair)
            for (int64_t i = 0; i < n; ++i)
              want.push_back(m == AttributionMethod::saliency
                                 ? norm / static_cast<double>(n)
                                 : dot(u, as_vec(e_in.select(0, i))) / static_cast<double>(n));
          for (int64_t j = 0; j < e_out.size(0); ++j)
            want.push_back(j != at                            ? 0.0
                           : m == AttributionMethod::saliency ? norm
                                                              : dot(u, as_vec(e_out.select(0, j))));
          REQUIRE(a.scores[r].size() == want.size());
          for (size_t j = 0; j < want.size(); ++j) {
            INFO("row " << r << " column " << j);
            CHECK(a.scores[r][j] == Approx(want[j]).margin(1e-5));
          }
          if (m == AttributionMethod::integrated_gradients)
            CHECK(a.completeness_error(static_cast<size_t>(r)) < 1e-5);
        }
      }
  }
}

TEST_CASE("attribute: input x gradient is each embedding's directional derivative") {
  // d/da f(e with token j's embedding scaled by a) at a = 1 is e_j . df/de_j: central
  // differences of the model's own logits, through the inference interface
  for (const char* name : {"lm", "copy", "majority"}) {
    INFO(name);
    const auto inf = open(name);
    const inspect::AttributionQuery q =
        sample_query(*inf, name, AttributionMethod::input_x_gradient, 1);
    const inspect::TokenAttribution a = inspect::attribute_tokens(*inf, q);
    // the first row's pass, as attribute_tokens lays it out
    const bool pair = name == std::string("copy"), lm = name == std::string("lm");
    const data::Ids tgt_in = pair ? data::Ids{inf->run().data.framing.bos} : data::Ids{};
    const std::string point = pair ? "encoder.embed" : "embed";
    const auto n = static_cast<int64_t>(q.input.size());
    const int64_t row = lm ? n - 1 : 0;
    for (int64_t j = 0; j < n; ++j) {
      const auto f = [&](double scale) {
        nn::Hooks h;
        h.add(point, [j, scale](const ag::Var& e) {
          Tensor s = ones({1, e.size(1), 1});
          s.data<float>()[j] = static_cast<float>(scale);
          return ag::mul(e, ag::Var(s));
        });
        const Tensor logits = inf->logits(q.input, tgt_in, &h);
        return as_vec(logits.select(0, row))[static_cast<size_t>(q.outputs[0])];
      };
      const double eps = 1e-2, slope = (f(1 + eps) - f(1 - eps)) / (2 * eps);
      INFO("column " << j << " " << a.inputs[j]);
      CHECK(a.scores[0][j] == Approx(slope).margin(2e-3).epsilon(2e-2));
    }
  }
}

TEST_CASE("attribute: integrated gradients' sum is f(input) - f(baseline) within 1% at 64 steps") {
  for (const char* name : {"lm", "copy", "majority"}) {
    INFO(name);
    const auto inf = open(name);
    inspect::AttributionQuery q =
        sample_query(*inf, name, AttributionMethod::integrated_gradients, 3);
    const inspect::TokenAttribution a = inspect::attribute_tokens(*inf, q);
    REQUIRE(a.value.size() == q.outputs.size());
    for (size_t r = 0; r < a.scores.size(); ++r) {
      double sum = 0;
      for (const double v : a.scores[r]) sum += v;
      INFO("row " << r << ": relative error " << a.completeness_error(r));
      check_completeness(sum, a.value[r], a.baseline_value[r]);
    }
    // f(input) is the model's own logit of the row's token
    const Tensor logits =
        inf->logits(q.input, name == std::string("copy") ? data::Ids{inf->run().data.framing.bos}
                                                         : data::Ids{});
    const int64_t row = name == std::string("lm") ? logits.size(0) - 1 : 0;
    CHECK(a.value[0] ==
          Approx(as_vec(logits.select(0, row))[static_cast<size_t>(q.outputs[0])]).margin(1e-4));
    // batching the steps changes no more than the products' rounding
    q.batch = 1;
    const inspect::TokenAttribution one = inspect::attribute_tokens(*inf, q);
    for (size_t r = 0; r < a.scores.size(); ++r)
      for (size_t j = 0; j < a.scores[r].size(); ++j)
        CHECK(one.scores[r][j] == Approx(a.scores[r][j]).margin(1e-5));
  }
}

TEST_CASE("attribute: with the padding baseline the sum is f(input) - f(pad everywhere)") {
  for (const char* name : {"copy", "majority"}) {
    INFO(name);
    const auto inf = open(name);
    const bool pair = name == std::string("copy");
    inspect::AttributionQuery q =
        sample_query(*inf, name, AttributionMethod::integrated_gradients, 3);
    const double zero_work = inspect::attribution_work(*inf, q).token_passes;
    q.baseline = inspect::IgBaseline::pad;
    const inspect::TokenAttribution a = inspect::attribute_tokens(*inf, q);
    CHECK(a.baseline == "pad");
    // one plain pass more than the zero baseline's: the one that embeds the <pad>s
    const auto tokens = static_cast<double>(q.input.size() + (pair ? q.outputs.size() : 0));
    CHECK(inspect::attribution_work(*inf, q).token_passes == zero_work + tokens);
    // f(baseline) is the model's own logit on a pass whose every token is <pad>
    const data::Ids src(q.input.size(), inf->run().data.src_vocab.pad());
    const Tensor logits =
        inf->logits(src, pair ? data::Ids{inf->run().data.tgt_vocab.pad()} : data::Ids{});
    CHECK(a.baseline_value[0] ==
          Approx(as_vec(logits.select(0, 0))[static_cast<size_t>(q.outputs[0])]).margin(1e-4));
    for (size_t r = 0; r < a.scores.size(); ++r) {
      double sum = 0;
      for (const double v : a.scores[r]) sum += v;
      const double change = a.value[r] - a.baseline_value[r];
      INFO("row " << r << ": sum " << sum << ", f " << a.value[r] << " - " << a.baseline_value[r]);
      CHECK(std::abs(sum - change) < 0.01 * std::max(std::abs(change), 1.0));
    }
  }
  // a vocabulary without <pad> (the character GPT's) has no such baseline
  const auto lm = open("lm");
  inspect::AttributionQuery q = sample_query(*lm, "lm", AttributionMethod::integrated_gradients, 1);
  q.baseline = inspect::IgBaseline::pad;
  CHECK_THROWS_WITH(inspect::attribute_tokens(*lm, q), Catch::Contains("has no <pad> token"));
}

TEST_CASE("attribute: attention rollout equals the rollout by hand of patterns set by hooks") {
  // Patterns replaced by hooks (the layer's output is then pattern @ v): every head of every
  // self-attention on its own position except the input side's first layer and the language
  // model's first layer (uniform over what each query sees), cross-attention all on source 0.
  for (const char* name : {"lm", "copy"}) {
    INFO(name);
    const auto inf = open(name);
    const bool pair = name == std::string("copy");
    nn::Hooks set;
    for (const nn::AttentionSite& s : inf->model().attention_sites())
      for (int64_t l = 0; l < s.layers; ++l)
        set.add(s.pattern(l), [s, l, pair](const ag::Var& p) {  // (B, h, n, m)
          Tensor t = zeros(p.shape());
          const int64_t B = p.size(0), h = p.size(1), n = p.size(2), m = p.size(3);
          float* v = t.data<float>();
          for (int64_t i = 0; i < B * h * n; ++i) {
            const int64_t q = i % n;
            const int64_t seen = s.causal ? q + 1 : m;
            if (s.keys == nn::Side::input && s.queries == nn::Side::output)
              v[i * m] = 1;  // cross: source position 0
            else if (l == 0 && (s.queries == nn::Side::input || !pair))
              for (int64_t j = 0; j < seen; ++j) v[i * m + j] = 1.0f / static_cast<float>(seen);
            else
              v[i * m + q] = 1;
          }
          return ag::Var(t);
        });
    const nn::HookScope scope(set);
    inspect::AttributionQuery q{.input = inf->encode(pair ? "1 2 3 4" : "First", "test"),
                                .outputs = {},
                                .method = AttributionMethod::attention_rollout};
    q.outputs = inspect::output_ids(*inf, pair ? "5 6 7" : "Cit", "test");
    const inspect::TokenAttribution a = inspect::attribute_tokens(*inf, q);
    const auto n = static_cast<int64_t>(q.input.size());
    for (size_t r = 0; r < a.scores.size(); ++r) {
      std::vector<double> want(a.scores[r].size(), 0.0);
      if (pair) {
        // encoder: layer 0 uniform U, layer 1 itself: R = 0.5 U + 0.5 I; decoder: self-attention
        // itself, each of 2 cross-attentions 0.5 D + 0.5 [row 0 of R | 0]: 0.75 of row 0 of R
        for (int64_t j = 0; j < n; ++j)
          want[j] = 0.75 * (0.5 / static_cast<double>(n) + (j == 0 ? 0.5 : 0.0));
        want[n + r] = 0.25;
      } else {
        // layer 0 uniform over the t + 1 positions seen, layer 1 itself: 0.5 / (t + 1) + 0.5 at t
        const int64_t t = n - 1 + static_cast<int64_t>(r);
        for (int64_t j = 0; j <= t; ++j) want[j] = 0.5 / static_cast<double>(t + 1);
        want[t] += 0.5;
      }
      for (size_t j = 0; j < want.size(); ++j) {
        INFO("row " << r << " column " << j);
        CHECK(a.scores[r][j] == Approx(want[j]).margin(1e-6));
      }
    }
  }
}

TEST_CASE("attribute: value zeroing with each query attending to itself alone is the identity") {
  // Every self-attention pattern on the query's own position (set by hooks), cross-attention
  // on source position 0: zeroing value j moves only what reads it.
  for (const char* name : {"lm", "copy"}) {
    INFO(name);
    const auto inf = open(name);
    const bool pair = name == std::string("copy");
    nn::Hooks set;
    for (const nn::AttentionSite& s : inf->model().attention_sites())
      for (int64_t l = 0; l < s.layers; ++l)
        set.add(s.pattern(l), [s](const ag::Var& p) {  // (B, h, n, m)
          Tensor t = zeros(p.shape());
          const int64_t n = p.size(2), m = p.size(3);
          float* v = t.data<float>();
          for (int64_t i = 0; i < p.size(0) * p.size(1) * n; ++i)
            v[i * m + (s.keys == s.queries ? i % n : 0)] = 1;
          return ag::Var(t);
        });
    const nn::HookScope scope(set);
    inspect::AttributionQuery q{.input = inf->encode(pair ? "1 2 3 4" : "First", "test"),
                                .outputs = {},
                                .method = AttributionMethod::value_zeroing};
    q.outputs = inspect::output_ids(*inf, pair ? "5 6 7" : "Cit", "test");
    const inspect::TokenAttribution a = inspect::attribute_tokens(*inf, q);
    const auto n = static_cast<int64_t>(q.input.size());
    for (size_t r = 0; r < a.scores.size(); ++r) {
      INFO("row " << r);
      double sum = 0;
      for (const double v : a.scores[r]) sum += v;
      CHECK(sum == Approx(1).margin(1e-9));
      const int64_t own = pair ? n + static_cast<int64_t>(r) : n - 1 + static_cast<int64_t>(r);
      for (int64_t j = 0; j < static_cast<int64_t>(a.scores[r].size()); ++j) {
        INFO("column " << j);
        if (!pair)
          CHECK(a.scores[r][j] == Approx(j == own ? 1.0 : 0.0).margin(1e-6));
        else if (j == own || j == 0)  // its own decoder input, and the source token read
          CHECK(a.scores[r][j] > 0.01);
        else
          CHECK(a.scores[r][j] == Approx(0).margin(1e-6));
      }
    }
  }
}

TEST_CASE("attribute: an encoder classifier's one row covers <cls> and every symbol") {
  const auto inf = open("majority");
  for (const AttributionMethod m :
       {AttributionMethod::saliency, AttributionMethod::input_x_gradient,
        AttributionMethod::integrated_gradients, AttributionMethod::attention_rollout,
        AttributionMethod::value_zeroing}) {
    INFO(inspect::name_of(m));
    inspect::AttributionQuery q{
        .input = inf->encode("0110111", "test"), .outputs = {}, .method = m};
    q.outputs = inspect::default_outputs(*inf, q.input, 1);
    REQUIRE(q.outputs.size() == 1);
    const inspect::TokenAttribution a = inspect::attribute_tokens(*inf, q);
    CHECK(a.inputs == std::vector<std::string>{"<cls>", "0", "1", "1", "0", "1", "1", "1"});
    CHECK(a.context.empty());
    REQUIRE(a.scores.size() == 1);
    CHECK(a.scores[0].size() == 8);
    if (m == AttributionMethod::attention_rollout || m == AttributionMethod::value_zeroing) {
      double sum = 0;
      for (const double v : a.scores[0]) sum += v;
      CHECK(sum == Approx(1).margin(1e-9));
    }
  }
}

TEST_CASE("attribute: the command prints a table, JSON and a heatmap, and refuses bad input") {
  std::string copy(1, '\''), lm(1, '\'');  // appended piecewise: GCC 12's false -Wrestrict
  copy.append(runs().file("copy")).append("'");
  lm.append(runs().file("lm")).append("'");
  const RunResult t = run_qkv("attribute " + copy + " '3 1 4' --method integrated-gradients");
  INFO(t.output);
  REQUIRE(t.status == 0);
  CHECK(t.output.find("completeness") != std::string::npos);
  const RunResult j = run_qkv("attribute " + lm + " 'First' --tokens 2 --json --contrast e");
  REQUIRE(j.status == 0);
  const nlohmann::json js = nlohmann::json::parse(j.output);
  CHECK(js["method"] == "saliency");
  CHECK(js["contrast"] == "e");
  REQUIRE(js["outputs"].size() == 2);
  CHECK(js["inputs"].size() == 5);
  CHECK(js["context"].size() == 1);
  CHECK(js["outputs"][0]["context"].size() == 0);  // the first row sees no earlier output
  CHECK(js["outputs"][1]["context"].size() == 1);
  // the same bits twice
  CHECK(run_qkv("attribute " + lm + " 'First' --tokens 2 --json --contrast e").output == j.output);
  const std::string svg = runs().file("attribute.svg");
  REQUIRE(run_qkv("attribute " + copy + " '3 1 4' --out '" + svg + "'").status == 0);
  CHECK(std::filesystem::file_size(svg) > 500);
  // bad input: one line each, a non-zero exit
  for (const auto& [args, says] : std::vector<std::pair<std::string, std::string>>{
           {copy + " '1 2' --method integrated-gradient", "did you mean 'integrated-gradients'"},
           {copy + " '1 2' --contrast nonesuch", "'nonesuch' is no token"},
           {copy + " '1 2' --method integrated-gradients --steps 0", "--steps must be 1..512"},
           {copy + " '1 2' --method integrated-gradients --baseline pda",
            "unknown baseline 'pda'; did you mean 'pad'? (the baselines: zero, pad)"},
           {copy + " '1 2' --baseline pad", "--baseline is integrated gradients'"},
           {lm + " 'First' --method integrated-gradients --baseline pad", "has no <pad> token"},
           {lm + " 'First Citizen' --target 'abcdefgh'", "more than the model's context of 16"},
           {copy + " '1 2' --method attention-rollout --contrast 3", "no contrast"},
           {copy + " '1 2' --method value-zeroing --contrast 3", "no contrast"},
           {copy + " '1 2' --method integrated-gradients --max-work 1000",
            "token passes, more than the bound of 1k (--max-work"}}) {
    const RunResult r = run_qkv("attribute " + args);
    INFO(args << ": " << r.output);
    CHECK(r.status == 1);
    CHECK(r.output.find(says) != std::string::npos);
    CHECK(std::count(r.output.begin(), r.output.end(), '\n') == 1);
  }
}

TEST_CASE(
    "attribute: a recurrent encoder-decoder's gradients cover both sides, and what "
    "composes attention layers refuses a recurrent side in one line") {
  const TempDir& dir = recurrent_runs();
  const std::string bahdanau = quoted(dir.file("bahdanau"));
  for (const char* method : {"saliency", "input-x-gradient", "integrated-gradients"}) {
    INFO(method);
    // the outputs are the model's greedy translation (no --target): read by its embeddings
    const RunResult r = run_qkv("attribute " + bahdanau + " '3 1 4 1 5' --json --method " + method);
    INFO(r.output);
    REQUIRE(r.status == 0);
    const nlohmann::json js = nlohmann::json::parse(r.output);
    CHECK(js["inputs"].size() == 5);
    REQUIRE(!js["outputs"].empty());
    CHECK(js["context"].size() == js["outputs"].size());  // <bos> and all but the last output
    double input_side = 0, output_side = 0;
    for (size_t row = 0; row < js["outputs"].size(); ++row) {
      const nlohmann::json& o = js["outputs"][row];
      INFO("row " << row);
      REQUIRE(o["inputs"].size() == 5);
      REQUIRE(o["context"].size() == row + 1);  // <bos> and the outputs before it
      double sum = 0;
      for (const char* side : {"inputs", "context"})
        for (const double v : o[side].get<std::vector<double>>()) {
          CHECK(std::isfinite(v));
          sum += v;
          (side == std::string("inputs") ? input_side : output_side) += std::abs(v);
        }
      if (o.contains("value")) {  // integrated gradients: completeness
        CHECK(o["sum"].get<double>() == Approx(sum).margin(1e-9));
        check_completeness(sum, o["value"].get<double>(), o["baseline_value"].get<double>());
      }
    }
    // the recurrence reads the source through attention and the earlier outputs through its
    // state: both sides move the logits
    CHECK(input_side > 0);
    CHECK(output_side > 0);
  }
  // rollout and value zeroing would score a recurrent side's positions as if each held only its
  // own token: refused, naming the side without self-attention
  for (const auto& [run, side] : std::vector<std::pair<std::string, std::string>>{
           {bahdanau, "encoder.embed and decoder.embed"},
           {quoted(dir.file("gru_encoder")), "encoder.embed"}})
    for (const char* method : {"attention-rollout", "value-zeroing"}) {
      const RunResult r = run_qkv("attribute " + run + " '3 1 4' --method " + method);
      INFO(run << " " << method << ": " << r.output);
      CHECK(r.status == 1);
      CHECK(r.output.find("the positions after " + side + " mix in layers that are no attention") !=
            std::string::npos);
      CHECK(std::count(r.output.begin(), r.output.end(), '\n') == 1);
    }
  // the gradient methods on the Transformer decoder over a GRU encoder: its greedy output
  const RunResult g = run_qkv("attribute " + quoted(dir.file("gru_encoder")) + " '3 1 4' --json");
  INFO(g.output);
  CHECK(g.status == 0);
}

TEST_CASE("reference: gradients and integrated gradients at the embeddings match torch autograd",
          "[reference]") {
  // the tiny GPT and a translator of nn.Transformer's layout, their weights in torch (float64,
  // tests/apps/reference_attribute.py building tests/nn/reference_nn.py's modules)
  TempDir dir("attribute_reference");
  struct Case {
    std::string run, text, target;
    std::unique_ptr<run::Inference> inf;
    inspect::AttributionQuery q;
    std::map<std::string, inspect::TokenAttribution> ours;
  };
  std::vector<Case> cases;
  cases.push_back({"lm", "First Citizen", "", open("lm"), {}, {}});
  cases.push_back({"translator", "3 1 4 1 5", "3 1 4", open("translator"), {}, {}});
  for (Case& c : cases) {
    const run::Inference& inf = *c.inf;
    const bool pair = c.run == "translator";
    c.q.input = inf.encode(c.text, "test");
    c.q.outputs = pair ? inspect::output_ids(inf, c.target, "test")
                       : inspect::default_outputs(inf, c.q.input, 3);
    c.q.contrast = inspect::output_ids(inf, pair ? "9" : "e", "test")[0];
    const auto n = static_cast<int64_t>(c.q.input.size());
    const auto k = static_cast<int64_t>(c.q.outputs.size());
    const data::Ids head(c.q.outputs.begin(), c.q.outputs.end() - 1);
    const auto& mc = inf.run().config.model;
    nlohmann::json cfg{{"d_model", mc.d_model}, {"heads", mc.heads}, {"d_ff", mc.d_ff},
                       {"bias", mc.bias},       {"steps", 64},       {"contrast", c.q.contrast},
                       {"targets", c.q.outputs}};
    nn::NamedTensors t;
    std::vector<int64_t> rows;
    if (pair) {
      data::Ids tgt{inf.run().data.framing.bos};
      tgt.insert(tgt.end(), head.begin(), head.end());
      t = {{"input.src", run::row_of(c.q.input)}, {"input.tgt", run::row_of(tgt)}};
      for (int64_t r = 0; r < k; ++r) rows.push_back(r);
      cfg.update({{"kind", "transformer"},
                  {"norm_first", mc.norm_first},
                  {"activation", "relu"},
                  {"layer_norm_eps", mc.layer_norm_eps},
                  {"src_vocab", inf.run().data.src_vocab.size()},
                  {"tgt_vocab", inf.run().data.tgt_vocab.size()},
                  {"encoder_layers", mc.encoder_layers},
                  {"decoder_layers", mc.decoder_layers},
                  {"share_embeddings", mc.share_embeddings},
                  {"tie_output", mc.tie_output}});
    } else {
      data::Ids ids = c.q.input;
      ids.insert(ids.end(), head.begin(), head.end());
      t = {{"input.ids", run::row_of(ids)}};
      for (int64_t r = 0; r < k; ++r) rows.push_back(n - 1 + r);
      cfg.update(gpt_reference_config(inf));
      cfg["kind"] = "gpt";
    }
    cfg["rows"] = rows;
    if (pair)  // the padding baseline's ids: the translator's vocabularies have <pad>
      cfg["pad"] = {inf.run().data.src_vocab.pad(), inf.run().data.tgt_vocab.pad()};
    save_reference_case(dir.file(c.run + ".in.safetensors"), inf, t, cfg);
    for (const AttributionMethod m :
         {AttributionMethod::saliency, AttributionMethod::input_x_gradient,
          AttributionMethod::integrated_gradients}) {
      c.q.method = m;
      c.ours[std::string(inspect::name_of(m))] = inspect::attribute_tokens(inf, c.q);
    }
    if (pair) {  // integrated gradients from the padding baseline too
      c.q.baseline = inspect::IgBaseline::pad;
      c.ours["integrated-gradients-pad"] = inspect::attribute_tokens(inf, c.q);
    }
  }
  SKIP_WITHOUT_TORCH();
  const ReferenceRun ref = run_reference(source_dir() + "/tests/apps/reference_attribute.py", dir);
  INFO(ref.report());
  REQUIRE(ref.status == 0);
  for (const Case& c : cases) {
    const nn::SafetensorsFile theirs = nn::load_safetensors(dir.file(c.run + ".out.safetensors"));
    for (const auto& [method, ours] : c.ours) {
      std::string key = method;
      std::replace(key.begin(), key.end(), '-', '_');
      const std::vector<double> want = as_vec(theirs.get(key));
      size_t at = 0;
      double top = 0, worst = 0;
      for (const double v : want) top = std::max(top, std::abs(v));
      for (size_t r = 0; r < ours.scores.size(); ++r)
        for (size_t j = 0; j < ours.scores[r].size(); ++j, ++at) {
          if (at < want.size()) worst = std::max(worst, std::abs(ours.scores[r][j] - want[at]));
          INFO(c.run << " " << method << " row " << r << " column " << j << " (max|torch| " << top
                     << ")");
          REQUIRE(at < want.size());
          CHECK(ours.scores[r][j] == Approx(want[at]).margin(2e-5 * std::max(top, 1.0)));
        }
      CHECK(at == want.size());
      std::printf("attribute reference %-10s %-20s max|torch| %.4g, worst error %.3g\n",
                  c.run.c_str(), method.c_str(), top, worst);
    }
  }
}

TEST_CASE("attribute: misuse of the library is a qkv::Error naming attribute") {
  const auto inf = open("copy");
  inspect::AttributionQuery q{.input = inf->encode("1 2", "test"), .outputs = {999}};
  CHECK_THROWS_WITH(inspect::attribute_tokens(*inf, q),
                    Catch::Contains("attribute") && Catch::Contains("outside the output layer"));
  q.outputs = {};
  CHECK_THROWS_WITH(inspect::attribute_tokens(*inf, q), Catch::Contains("no output token"));
  q.outputs = inspect::output_ids(*inf, "2", "test");
  q.batch = 0;
  CHECK_THROWS_AS(inspect::attribute_tokens(*inf, q), Error);
  q.batch = 16;
  q.contrast = 999;
  CHECK_THROWS_WITH(inspect::attribute_tokens(*inf, q), Catch::Contains("contrast id 999"));
}
