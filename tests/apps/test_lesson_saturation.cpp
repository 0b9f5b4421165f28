// qkv saturation: the variance lemma, the softmax statistics against d_k, the gradient norms,
// the training curves, and the files it writes (JSON schema, CSV twins, figures).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "apps/commands.hpp"
#include "autograd/ops.hpp"
#include "core/random.hpp"
#include "support/process.hpp"

using namespace qkv;
using namespace qkv::app;
using namespace qkv::testing;
using nlohmann::json;

namespace {

// One fast run shared by the test cases: four widths, the default sample counts, a short
// training at a small width.
// The folder fast_run writes into.
const TempDir& run_dir() {
  static TempDir dir("saturation");
  return dir;
}

const json& fast_run() {
  static json j = [] {
    const TempDir& dir = run_dir();
    SaturationArgs a;
    a.out = dir.path.string();
    a.d_k = {4, 16, 64, 256};
    a.batch = 2;
    a.example_d_k = 64;
    a.train_steps = 12;
    a.train_d_model = 32;
    a.train_batch = 8;
    a.seed = 1;  // fixed: the trends are asserted at this seed
    REQUIRE(cmd_saturation(a) == 0);
    return json::parse(read_file(dir.file("saturation.json")));
  }();
  return j;
}

const json& record(int64_t d, const std::string& scale) {
  for (const json& r : fast_run().at("records"))
    if (r.at("d_k") == d && r.at("scale") == scale) return r;
  FAIL("no record for d_k " << d << " scale " << scale);
  static json none;
  return none;
}

}  // namespace

TEST_CASE("saturation: the variance lemma within 5% for d_k up to 256") {
  for (int64_t d : {4, 16, 64, 256}) {
    INFO("d_k " << d);
    const double unscaled = record(d, "1").at("var_qk");
    const double scaled = record(d, "1/sqrt(d_k)").at("var_qk");
    CHECK(std::abs(unscaled / static_cast<double>(d) - 1) < 0.05);
    CHECK(std::abs(scaled - 1) < 0.05);
  }
}

TEST_CASE(
    "saturation: unscaled rows saturate as d_k grows, entropy falls and saturated rows rise, "
    "scaled rows stay flat") {
  // The lesson's prediction, at the fixed seed of fast_run: without 1/sqrt(d_k) the scores'
  // spread grows as sqrt(d_k), so each width's rows are peakier than the last (lower entropy,
  // a larger top weight, more rows above the saturation threshold); with it, every width
  // looks the same.
  const double log_m = std::log(10.0);
  double prev_entropy = 1e9, prev_sat = 0, prev_top = 0;  // d_k 4 unscaled: some rows saturate
  double lo = 1e9, hi = 0, top_lo = 1, top_hi = 0, sat_hi = 0;
  for (int64_t d : {4, 16, 64, 256}) {
    INFO("d_k " << d);
    const json& s = record(d, "1/sqrt(d_k)");
    const json& u = record(d, "1");
    CHECK(s.at("max_entropy").get<double>() == Approx(log_m));
    const double hs = s.at("mean_entropy"), hu = u.at("mean_entropy");
    CHECK(hs <= log_m);
    CHECK(hs > 0.7 * log_m);
    lo = std::min(lo, hs), hi = std::max(hi, hs);
    const double top_s = s.at("mean_max_weight");
    top_lo = std::min(top_lo, top_s), top_hi = std::max(top_hi, top_s);
    sat_hi = std::max(sat_hi, s.at("saturated_fraction").get<double>());
    // unscaled: strictly falling entropy, strictly rising top weight and saturated rows
    CHECK(hu < prev_entropy);
    prev_entropy = hu;
    const double sat = u.at("saturated_fraction"), top = u.at("mean_max_weight");
    CHECK(sat > prev_sat);
    CHECK(top > prev_top);
    prev_sat = sat, prev_top = top;
    CHECK(top >= top_s - 0.02);
  }
  // scaled: flat at every width
  CHECK(top_hi - top_lo < 0.05);
  CHECK(sat_hi < 0.01);
  CHECK(hi - lo < 0.05 * log_m);  // the scaled rows look the same at every width
  CHECK(record(256, "1").at("mean_entropy").get<double>() < 0.25 * log_m);
  CHECK(record(256, "1").at("saturated_fraction").get<double>() > 0.3);
  CHECK(record(256, "1/sqrt(d_k)").at("saturated_fraction").get<double>() < 0.01);
  // saturated rows pass almost no gradient: the softmax Jacobian shrinks, and so does the
  // gradient reaching the logits (W_Q and W_K then get it multiplied by the larger scale)
  CHECK(record(256, "1").at("jacobian_norm").get<double>() <
        0.3 * record(256, "1/sqrt(d_k)").at("jacobian_norm").get<double>());
  CHECK(record(256, "1").at("grad_norm_logits").get<double>() <
        0.7 * record(256, "1/sqrt(d_k)").at("grad_norm_logits").get<double>());
  for (const json& r : fast_run().at("records"))
    for (const char* k : {"grad_norm_wq", "grad_norm_wk", "grad_norm_logits"}) {
      CHECK(std::isfinite(r.at(k).get<double>()));
      CHECK(r.at(k).get<double>() > 0);
    }
}

TEST_CASE("saturation: the JSON schema, the CSV twins and the figures") {
  const json& j = fast_run();
  REQUIRE(j.at("records").size() == 8);
  for (const json& r : j["records"]) {
    for (const char* k : {"d_k", "scale", "var_qk", "mean_entropy", "max_entropy",
                          "mean_max_weight", "saturated_fraction", "jacobian_norm", "grad_norm_wq",
                          "grad_norm_wk", "grad_norm_logits"}) {
      INFO(k);
      REQUIRE(r.contains(k));
      if (std::string(k) != "scale") CHECK(r[k].is_number());
    }
    CHECK((r["scale"] == "1" || r["scale"] == "1/sqrt(d_k)"));
  }
  REQUIRE(j.at("training").size() == 2);
  for (const json& t : j["training"]) {
    CHECK(t.at("step").size() == 12);
    CHECK(t.at("loss").size() == 12);
    CHECK(t.at("attention_entropy").size() == 12);
    for (double v : t["loss"]) CHECK(std::isfinite(v));
    for (double v : t["attention_entropy"]) CHECK(v >= 0);
  }
  CHECK(j["training"][0]["scale"] == "1/sqrt(d_k)");
  CHECK(j["training"][1]["scale"] == "1");
  const json& row = j.at("example_row");
  double s1 = 0, s2 = 0;
  for (double v : row.at("scaled")) s1 += v;
  for (double v : row.at("unscaled")) s2 += v;
  CHECK(s1 == Approx(1));
  CHECK(s2 == Approx(1));
}

TEST_CASE("saturation: CSV twins and figures on disk") {
  fast_run();
  const std::filesystem::path out = run_dir().path;
  const std::string csv = read_file((out / "saturation.csv").string());
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 9);  // header + 8 records
  CHECK(csv.rfind("d_k,scale,var_qk,mean_entropy,max_entropy,mean_max_weight,saturated_fraction,"
                  "jacobian_norm,grad_norm_wq,grad_norm_wk,grad_norm_logits\n",
                  0) == 0);
  const std::string tcsv = read_file((out / "saturation_training.csv").string());
  CHECK(std::count(tcsv.begin(), tcsv.end(), '\n') == 1 + 2 * 12);
  for (const char* f : {"row_weights.svg", "entropy.svg", "max_weight.svg",
                        "saturated_fraction.svg", "jacobian_norm.svg", "gradient_norm.svg",
                        "logit_gradient_norm.svg", "training_loss.svg", "training_entropy.svg"}) {
    INFO(f);
    const std::string svg = read_file((out / f).string());
    CHECK(svg.rfind("<svg", 0) == 0);
    CHECK(svg.find("</svg>") != std::string::npos);
  }
}

TEST_CASE("saturation: bad options are errors") {
  SaturationArgs a;
  a.out = (std::filesystem::temp_directory_path() / "qkv_lesson_saturation_bad").string();
  a.keys = 1;
  CHECK_THROWS_WITH(cmd_saturation(a), Catch::Contains("--keys"));
  a.keys = 10;
  a.d_k = {0};
  CHECK_THROWS_WITH(cmd_saturation(a), Catch::Contains("--d-k"));
  a.d_k = {4};
  a.train_heads = 3;
  CHECK_THROWS_WITH(cmd_saturation(a), Catch::Contains("--train-heads"));
}
