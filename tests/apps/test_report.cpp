// qkv report without a browser (chart decimation and ticks: tests/figures): metric discovery from
// metrics.jsonl, config differences, the page's basics (one <title>, internal links resolve,
// nothing external), and bad input through the real binary on synthetic run folders.
// The browser side (Chromium loads the page of real runs) is tests/apps/report_browser_test.py.
#include <catch2/catch.hpp>

#include <fstream>
#include <set>

#include "apps/report.hpp"
#include "config/config.hpp"
#include "support/process.hpp"

using namespace qkv;
using namespace qkv::app;
using namespace qkv::config;
using namespace qkv::figures;
using namespace qkv::figures::report;
using namespace qkv::testing;

namespace {

// Every value of an attribute: the text after each `open` up to `close`. (No std::regex: its
// recursive matcher overflows the stack on a page's long base64 images and polylines under
// AddressSanitizer.)
std::vector<std::string> values_of(const std::string& html, const std::string& open, char close) {
  std::vector<std::string> out;
  for (size_t p = html.find(open); p != std::string::npos; p = html.find(open, p)) {
    p += open.size();
    const size_t end = html.find(close, p);
    if (end == std::string::npos) break;
    out.push_back(html.substr(p, end - p));
    p = end;
  }
  return out;
}

void write(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
}

// A run folder with an effective config and the given metrics lines (no vocabularies, no
// checkpoint: what a run looks like before its first validation, metrics aside).
std::string fake_run(const TempDir& t, const std::string& name, const std::string& task,
                     const std::string& metrics, double attention_scale = 0.0) {
  const std::string dir = t.file(name);
  std::filesystem::create_directories(dir);
  RunConfig c;
  c.data.task = qkv::parse_name<qkv::data::TaskKind>(task, "data.task");
  c.model.attention_scale = qkv::nn::AttentionScale::from_config(attention_scale);
  write(dir + "/config.toml", effective_toml(c));
  if (!metrics.empty()) write(dir + "/metrics.jsonl", metrics);
  return dir;
}

// Train records every step (with per-layer attention entropy), a validation every 100 steps
// with a metric no code knows about, a test record at the end.
std::string long_metrics(int steps) {
  std::string m;
  char buf[400];
  for (int s = 1; s <= steps; ++s) {
    std::snprintf(
        buf, sizeof buf,
        "{\"attention_entropy\":{\"decoder_cross\":[1.0,0.9],\"decoder_self\":[0.5,0.4],"
        "\"encoder_self\":[1.2,%g]},\"epoch\":0,\"grad_norm\":%g,\"loss\":%g,\"lr\":0.001,"
        "\"step\":%d}\n",
        1.0 + 0.1 * (s % 7), s == steps / 2 ? 50.0 : 1.0, 3.0 / s, s);
    m += buf;
    if (s % 100 == 0) {
      std::snprintf(buf, sizeof buf,
                    "{\"epoch\":0,\"examples\":20,\"exact_match\":0.5,\"loss\":%g,\"split\":"
                    "\"valid\",\"step\":%d,\"token_accuracy\":0.7,\"zz_new_metric\":%d}\n",
                    2.0 / s, s, s);
      m += buf;
    }
  }
  m += "{\"exact_match\":0.5,\"examples\":20,\"loss\":0.01,\"split\":\"test\",\"step\":" +
       std::to_string(steps) + ",\"token_accuracy\":0.9,\"bleu\":31.5}\n";
  return m;
}

// The basics a browser needs and the issue asks for: exactly one <title> outside inline SVG,
// every href="#x" has an id="x", ids unique, no script, nothing fetched from elsewhere.
void check_page_basics(const std::string& html) {
  std::string outside_svg;
  for (size_t at = 0;;) {
    const size_t svg = html.find("<svg", at);
    outside_svg += html.substr(at, svg == std::string::npos ? std::string::npos : svg - at);
    if (svg == std::string::npos) break;
    at = html.find("</svg>", svg);
    REQUIRE(at != std::string::npos);
    at += 6;
  }
  size_t titles = 0;
  for (size_t p = outside_svg.find("<title>"); p != std::string::npos;
       p = outside_svg.find("<title>", p + 1))
    ++titles;
  CHECK(titles == 1);
  std::multiset<std::string> ids;
  for (const std::string& id : values_of(html, " id=\"", '"')) ids.insert(id);
  for (const std::string& id : ids) CHECK(ids.count(id) == 1);
  std::vector<std::string> refs = values_of(html, " href=\"", '"');
  for (std::string& src : values_of(html, " src=\"", '"')) refs.push_back(std::move(src));
  for (const std::string& ref : refs) {
    INFO(ref.substr(0, 60));
    if (ref.rfind("#", 0) == 0)
      CHECK(ids.count(ref.substr(1)) == 1);
    else
      CHECK(ref.rfind("data:image/png;base64,", 0) == 0);
  }
  CHECK(html.find("<script") == std::string::npos);
  CHECK(html.find("<link") == std::string::npos);
  CHECK(html.find("url(") == std::string::npos);
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("report: every metric in metrics.jsonl becomes a chart, runs overlaid") {
  const TempDir t("report_metrics");
  std::vector<RunData> runs = {read_run(fake_run(t, "a", "copy", long_metrics(300))),
                               read_run(fake_run(t, "b", "copy", long_metrics(200), 1.0))};
  const std::vector<MetricChart> charts = metric_charts(runs);
  std::vector<std::string> keys;
  for (const MetricChart& c : charts) keys.push_back(c.key);
  // losses first, then the optimizer, validation metrics (known first), attention, the rest
  const std::vector<std::string> want = {"train/loss",
                                         "valid/loss",
                                         "train/lr",
                                         "train/grad_norm",
                                         "valid/token_accuracy",
                                         "valid/exact_match",
                                         "valid/zz_new_metric",
                                         "train/attention_entropy.encoder_self",
                                         "train/attention_entropy.decoder_self",
                                         "train/attention_entropy.decoder_cross"};
  CHECK(keys == want);
  const LineChart& loss = charts[0].chart;
  CHECK(loss.title == "Training loss");
  CHECK(loss.log_y);  // 3 down to 0.01: decades
  REQUIRE(loss.series.size() == 2);
  CHECK(loss.series[0].label == "a");
  CHECK(loss.series[1].label == "b");
  CHECK(loss.series[0].x.size() == 300);
  CHECK(loss.series[0].color != loss.series[1].color);
  const LineChart& enc = charts[7].chart;
  REQUIRE(enc.series.size() == 4);  // two layers of two runs
  CHECK(enc.series[1].label == "a, layer 2");
  CHECK(enc.y_label.find("nats") != std::string::npos);
  CHECK(charts[6].chart.title == "Validation zz_new_metric");
  CHECK(final_test(runs[0])["bleu"] == 31.5);
  CHECK(last_step(runs[0]) == 300);
  CHECK(differing_keys(runs) == std::vector<std::string>{"model.attention_scale"});
  std::vector<RunData> one = {runs[0]};
  CHECK(metric_charts(one)[0].chart.series[0].label == "Training loss");
}

TEST_CASE("report: runs of different tasks are refused, naming both") {
  const TempDir t("report_tasks");
  std::vector<RunData> runs = {read_run(fake_run(t, "a", "copy", "")),
                               read_run(fake_run(t, "b", "reverse", ""))};
  try {
    check_same_task(runs);
    FAIL("no error");
  } catch (const Error& e) {
    const std::string m = e.what();
    CHECK(m.find("different tasks") != std::string::npos);
    CHECK(m.find("copy") != std::string::npos);
    CHECK(m.find("reverse") != std::string::npos);
  }
}

TEST_CASE("report: page helpers escape, encode and link") {
  CHECK(html_escape("<a href=\"x\">'&'</a>") ==
        "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
  CHECK(base64("") == "");
  CHECK(base64("f") == "Zg==");
  CHECK(base64("fo") == "Zm8=");
  CHECK(base64("foo") == "Zm9v");
  CHECK(base64("foobar") == "Zm9vYmFy");
  const std::string page = render_page("t <1>", "sub", {{"a", "A", "<p>x</p>"}, {"b", "B", ""}}, 0);
  check_page_basics(page);
  CHECK(page.find("<title>t &lt;1&gt;</title>") != std::string::npos);
}

TEST_CASE("report: the page of a 20000-step run and of two runs, through the binary") {
  const TempDir t("report_page");
  const std::string a = fake_run(t, "a", "copy", long_metrics(20000));
  const std::string b = fake_run(t, "b", "copy", long_metrics(2000), 1.0);
  const RunResult r = run_qkv("report '" + a + "' '" + b + "' --out '" + t.file("r.html") + "'");
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(r.output.find("wrote ") != std::string::npos);
  const std::string html = read_file(t.file("r.html"));
  check_page_basics(html);
  CHECK(count(html, "<figure class=\"chart\"") == 10);
  CHECK(html.find("data-charts=\"10\"") != std::string::npos);
  CHECK(html.find("model.attention_scale") != std::string::npos);  // the config difference
  CHECK(html.find("no checkpoint yet") != std::string::npos);      // said, not an error
  // decimated: no polyline has more than two points per pixel column of a 600 px chart
  for (const std::string& points : values_of(html, "points='", '\''))
    CHECK(count(points, ",") <= 2 * 600);
  CHECK(html.size() < 1500 * 1024);
}

namespace {

// A probe record as the training writes it: two layers x three heads of a language model's
// self-attention, the score of head (l, h) at step s = (s + 10 l + h) / 1000, and an icl score.
std::string probe_record(int step, int layers = 2) {
  auto grid = [&](double offset) {
    nlohmann::json g = nlohmann::json::array();
    for (int l = 0; l < layers; ++l) {
      g.push_back(nlohmann::json::array());
      for (int h = 0; h < 3; ++h) g.back().push_back((step + 10 * l + h) / 1000.0 + offset);
    }
    return g;
  };
  const nlohmann::json self = {
      {"layers", layers}, {"heads", 3}, {"entropy", grid(1.0)}, {"induction", grid(0.0)}};
  const nlohmann::json sites = {{{"name", "self"}, {"title", "causal self-attention"}}};
  const nlohmann::json probe = {{"attentions", {{"self", self}}},
                                {"sites", sites},
                                {"icl", -step / 1000.0},
                                {"seconds", 0.01}};
  return nlohmann::json{{"step", step}, {"probe", probe}}.dump() + "\n";
}

}  // namespace

TEST_CASE("report: probe records are per-head curves and the in-context learning chart") {
  const TempDir t("report_probe");
  std::string m;
  for (int s = 0; s <= 300; s += 100)
    m += "{\"epoch\":0,\"grad_norm\":1.0,\"loss\":2.0,\"lr\":0.001,\"step\":" +
         std::to_string(s + 1) + "}\n" + probe_record(s);
  m += probe_record(400, 3);  // another layout (a corrupt line): left out of the curves
  const RunData run = read_run(fake_run(t, "p", "copy", m));
  std::vector<std::string> keys;
  for (const MetricChart& c : metric_charts({run})) keys.push_back(c.key);
  CHECK(keys == std::vector<std::string>{"train/loss", "train/lr", "train/grad_norm", "probe/icl",
                                         "probe/induction (best head, causal self-attention)"});
  const std::vector<MetricChart> charts = metric_charts({run});
  CHECK(charts[3].chart.title == "In-context learning score");
  CHECK(charts[3].chart.series[0].y == std::vector<double>{0.0, -0.1, -0.2, -0.3, -0.4});
  // the largest head: (1, 2) of two layers, then (2, 2) of the three-layer record
  CHECK(charts[4].chart.title == "Induction (best head, causal self-attention)");
  CHECK(charts[4].chart.y_label == "share of attention");
  CHECK(charts[4].chart.series[0].y == std::vector<double>{0.012, 0.112, 0.212, 0.312, 0.422});

  const std::vector<HeadCurves> curves = probe_head_curves(run);
  REQUIRE(curves.size() == 2);  // the record's arrays in its order: entropy, induction
  CHECK(curves[0].title == "causal self-attention: entropy");  // the record's site's title
  CHECK(curves[1].title == "causal self-attention: induction");
  const HeadCurves& ind = curves[1];
  CHECK(ind.layers == 2);
  CHECK(ind.heads == 3);
  CHECK(ind.steps == std::vector<double>{0, 100, 200, 300});
  CHECK(ind.y_min == 0);
  CHECK(ind.y_max == 1);
  CHECK(ind.values[1 * 3 + 2] == std::vector<double>{0.012, 0.112, 0.212, 0.312});
  CHECK(curves[0].y_max == Approx(1.312));  // entropy: 0 up to its largest value
  CHECK(curves[0].y_label == "nats");

  const std::string svg = render_svg(ind);
  CHECK(count(svg, "<g class='head'") == 6);
  CHECK(svg.find("data-layer='1' data-head='2'") != std::string::npos);
  CHECK(svg.find(">0.31<") != std::string::npos);  // head (1, 2)'s last value in its corner
  HeadCurves bad = ind;
  bad.values.pop_back();
  CHECK_THROWS_WITH(render_svg(bad), Catch::Contains("curves 5"));
  bad = ind;
  bad.values[0].push_back(1);
  CHECK_THROWS_WITH(render_svg(bad), Catch::Contains("5 points for 4 steps"));

  const RunResult r = run_qkv("report '" + run.dir + "' --out '" + t.file("r.html") + "' --svg '" +
                              t.file("svg") + "'");
  INFO(r.output);
  REQUIRE(r.status == 0);
  const std::string html = read_file(t.file("r.html"));
  check_page_basics(html);
  CHECK(html.find("Heads while training") != std::string::npos);
  // --svg: each chart as a file named after its title, the same SVG as on the page
  const std::string induction = read_file(t.file("svg/causal-self-attention-induction.svg"));
  CHECK(induction.rfind("<svg", 0) == 0);
  CHECK(html.find(induction) != std::string::npos);
  CHECK(std::filesystem::exists(t.file("svg/in-context-learning-score.svg")));
  CHECK(std::filesystem::exists(t.file("svg/training-loss.svg")));
  const RunResult refused = run_qkv("report '" + run.dir + "' --out '" + t.file("r2.html") +
                                    "' --svg '" + t.file("r.html") + "'");
  CHECK(refused.status != 0);
  CHECK(refused.output.find("--svg " + t.file("r.html") + " is a file") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(t.file("r2.html")));
  CHECK(count(html, "data-kind=\"heads\"") == 2);
}

TEST_CASE("report: probe curves follow the record's sites, in their order and words") {
  const TempDir t("report_probe_sites");
  const nlohmann::json grid = {{0.5}};  // one layer, one head
  const nlohmann::json one = {{"layers", 1}, {"heads", 1}, {"entropy", grid}};
  const nlohmann::json atts = {{"cross", one}, {"encoder", one}};  // the keys sorted, as written
  // the model's order (encoder before cross) and titles
  const nlohmann::json sites = {{{"name", "encoder"}, {"title", "encoder self-attention"}},
                                {{"name", "cross"}, {"title", "cross-attention"}}};
  const auto record = [&](bool with_sites) {
    nlohmann::json probe = {{"attentions", atts}, {"seconds", 0.01}};
    if (with_sites) probe["sites"] = sites;
    return nlohmann::json{{"step", 0}, {"probe", probe}}.dump() + "\n";
  };
  std::vector<std::string> titles;
  for (const HeadCurves& c : probe_head_curves(read_run(fake_run(t, "a", "copy", record(true)))))
    titles.push_back(c.title);
  CHECK(titles ==
        std::vector<std::string>{"encoder self-attention: entropy", "cross-attention: entropy"});
  // a record without sites (an older version's): its attentions by name, as its keys are sorted
  titles.clear();
  for (const HeadCurves& c : probe_head_curves(read_run(fake_run(t, "b", "copy", record(false)))))
    titles.push_back(c.title);
  CHECK(titles == std::vector<std::string>{"cross: entropy", "encoder: entropy"});
}

TEST_CASE("report: bad input gets one line and no output file") {
  const TempDir t("report_bad");
  const std::string out = t.file("r.html");
  auto one_line = [](const RunResult& r) {
    INFO(r.output);
    CHECK(r.status == 1);
    CHECK(count(r.output, "\n") == 1);
    CHECK(r.output.rfind("qkv: report: ", 0) == 0);
  };
  std::filesystem::create_directories(t.file("empty"));
  RunResult r = run_qkv("report '" + t.file("empty") + "' --out '" + out + "'");
  one_line(r);
  CHECK(r.output.find("not a run folder (no config.toml)") != std::string::npos);
  r = run_qkv("report '" + t.file("nowhere") + "' --out '" + out + "'");
  one_line(r);
  CHECK(r.output.find("no such folder") != std::string::npos);
  const std::string a = fake_run(t, "a", "copy", ""), b = fake_run(t, "b", "sort", "");
  r = run_qkv("report '" + a + "' '" + b + "' --out '" + out + "'");
  one_line(r);
  CHECK(r.output.find("runs of different tasks") != std::string::npos);
  r = run_qkv("report '" + a + "' --out '" + t.file("no/such/dir/r.html") + "'");
  one_line(r);
  CHECK(r.output.find("does not exist") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(out));
  // Metrics not yet written: a page that says so, and a warning line.
  r = run_qkv("report '" + a + "' --out '" + out + "'");
  CHECK(r.status == 0);
  CHECK(r.output.find("no metrics yet") != std::string::npos);
  const std::string html = read_file(out);
  check_page_basics(html);
  CHECK(html.find("No curves: no run has logged metrics yet") != std::string::npos);
  CHECK(html.find("no test metrics") != std::string::npos);
  // A half-written last line (a crash mid-write) is skipped and said.
  write(a + "/metrics.jsonl",
        "{\"step\":1,\"loss\":2.0,\"lr\":0.1,\"grad_norm\":1}\n{\"step\":2,\"lo");
  r = run_qkv("report '" + a + "' --out '" + out + "'");
  CHECK(r.status == 0);
  CHECK(read_file(out).find("1 line(s) of metrics.jsonl are not JSON records") !=
        std::string::npos);
  for (const auto& e : std::filesystem::directory_iterator(t.path))
    CHECK(e.path().filename().string().find(".tmp") == std::string::npos);
}

TEST_CASE("report: qkv saturation folders on one page, overlaid, never mixed with runs") {
  const TempDir t("report_saturation");
  for (const char* name : {"s1", "s2"}) {
    const RunResult r = run_qkv(std::string("saturation --out '") + t.file(name) +
                                "' --d-k 4,8 --samples 100 --rows 10 --batch 1 --keys 4"
                                " --example-d-k 8 --train-steps 0 --threads 1");
    INFO(r.output);
    REQUIRE(r.status == 0);
  }
  const RunResult r = run_qkv("report '" + t.file("s1") + "' '" + t.file("s2") + "' --out '" +
                              t.file("s.html") + "'");
  INFO(r.output);
  REQUIRE(r.status == 0);
  const std::string html = read_file(t.file("s.html"));
  check_page_basics(html);
  CHECK(count(html, "<figure class=\"chart\"") == 9);  // 7 against d_k, 2 bar charts
  CHECK(html.find(">s2: scale 1 (unscaled)</text>") != std::string::npos);
  CHECK(html.find("Copy task") == std::string::npos);  // no training, no training charts
  const std::string run = fake_run(t, "a", "copy", "");
  const RunResult mixed =
      run_qkv("report '" + run + "' '" + t.file("s1") + "' --out '" + t.file("m.html") + "'");
  CHECK(mixed.status == 1);
  CHECK(mixed.output.find("cannot share a page") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(t.file("m.html")));
}

TEST_CASE("report: qkv layers folders on one page, overlaid, checked, never mixed with others") {
  const TempDir t("report_layers");
  const RunResult made = run_qkv("layers --quick --out '" + t.file("l1") + "'");
  INFO(made.output);
  REQUIRE(made.status == 0);
  std::filesystem::copy(t.file("l1"), t.file("l2"));
  const RunResult r = run_qkv("report '" + t.file("l1") + "' '" + t.file("l2") + "' --out '" +
                              t.file("l.html") + "'");
  INFO(r.output);
  REQUIRE(r.status == 0);
  const std::string html = read_file(t.file("l.html"));
  check_page_basics(html);
  // time against n, the gradient profile; exact match against length on copy and on reverse,
  // the profile before and after training
  CHECK(count(html, "<figure class=\"chart\"") == 5);
  CHECK(html.find(">l2: gru</text>") != std::string::npos);
  CHECK(html.find(">l2: gru-no-attention</text>") != std::string::npos);  // a trained model
  CHECK(html.find(">l1: bahdanau (trained)</text>") != std::string::npos);
  CHECK(html.find("O(log_w n)") != std::string::npos);  // the lesson's column, from layers.json
  CHECK(count(html, "<td>l1</td><td>lstm</td>") == 1);  // one results row per folder and layer

  // A layers.json whose columns disagree in length is not a result: one line, no page.
  const nlohmann::json good = nlohmann::json::parse(read_file(t.file("l2") + "/layers.json"));
  nlohmann::json bad = good;
  bad["layers"][1]["seconds"].erase(0);
  write(t.file("l2") + "/layers.json", bad.dump());
  const RunResult corrupt = run_qkv("report '" + t.file("l1") + "' '" + t.file("l2") + "' --out '" +
                                    t.file("c.html") + "'");
  CHECK(corrupt.status == 1);
  CHECK(corrupt.output.find("layers.json: not a qkv layers result") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(t.file("c.html")));
  // The same for the trained models' curves.
  bad = good;
  bad["training"]["curves"][2]["exact_match"].erase(0);
  write(t.file("l2") + "/layers.json", bad.dump());
  CHECK(run_qkv("report '" + t.file("l2") + "' --out '" + t.file("c.html") + "'").status == 1);
  CHECK_FALSE(std::filesystem::exists(t.file("c.html")));

  // Two kinds of study folder: refused, naming both commands.
  REQUIRE(run_qkv("saturation --out '" + t.file("s") +
                  "' --d-k 4 --samples 10 --rows 2 --batch 1 --keys 4 --example-d-k 4"
                  " --train-steps 0 --threads 1")
              .status == 0);
  const RunResult mixed = run_qkv("report '" + t.file("l1") + "' '" + t.file("s") + "' --out '" +
                                  t.file("m.html") + "'");
  CHECK(mixed.status == 1);
  CHECK(mixed.output.find("qkv layers and qkv saturation folders cannot share a page") !=
        std::string::npos);
  CHECK_FALSE(std::filesystem::exists(t.file("m.html")));
}
