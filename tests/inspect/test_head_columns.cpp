// The head table's columns come from the score registry (interp/head_scores.hpp): every score
// of QKV_HEAD_SCORES is a column of `qkv heads`, of its JSON (which the server answers too) and
// of docs/inspect.md's table, in the registry's order, with the registry's words.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

#include "inspect/head_table.hpp"
#include "interp/head_scores.hpp"
#include "support/common.hpp"

using namespace qkv;
using nlohmann::json;

namespace {

const char* kOwn[] = {"importance", "zero_loss_change", "mean_loss_change"};

bool meant_for(const interp::HeadScoreInfo& s, bool cross) {
  return s.attention == interp::ScoredAttention::any ||
         (s.attention == interp::ScoredAttention::cross) == cross;
}

// A row of an attention of each kind, with a distinct value for each of its kind's scores (as
// head_table fills it: inspect/head_table.cpp's scores_of asks the registry the same way).
inspect::HeadRow row_of(const std::string& attention, bool cross, double base) {
  inspect::HeadRow r;
  r.attention = attention, r.name = attention + ".0.1", r.layer = 0, r.head = 1;
  r.importance = base + 0.5, r.zero_loss_change = base + 0.25, r.mean_loss_change = base - 0.125;
  double v = base;
  for (const interp::HeadScoreInfo& s : interp::kHeadScores)
    if (meant_for(s, cross)) r.scores[s.name] = (v += 1.0 / 64);
  return r;
}

}  // namespace

TEST_CASE("head columns: the table's own three, then every score of the registry in its order") {
  const std::vector<inspect::HeadColumn>& c = inspect::head_columns();
  REQUIRE(c.size() == 3 + std::size(interp::kHeadScores));
  for (size_t i = 0; i < 3; ++i) {
    CHECK(c[i].name == kOwn[i]);
    CHECK(c[i].attention == "any");
    CHECK_FALSE(c[i].probe);  // measured on the split's loss, not recorded while training
  }
  for (size_t i = 0; i < std::size(interp::kHeadScores); ++i) {
    const interp::HeadScoreInfo& s = interp::kHeadScores[i];
    const inspect::HeadColumn& col = c[3 + i];
    INFO(s.name);
    CHECK(col.name == s.name);
    CHECK(col.title == s.title);
    CHECK(col.description == s.description);
    CHECK(col.decimals == s.decimals);
    CHECK(col.unit == interp::unit_label(s.unit));
    CHECK(col.max == interp::unit_max(s.unit));
    CHECK(col.attention == (s.attention == interp::ScoredAttention::self    ? "self"
                            : s.attention == interp::ScoredAttention::cross ? "cross"
                                                                            : "any"));
    CHECK(col.probe);
    CHECK(interp::find_head_score(s.name) == &s);
  }
  for (const inspect::HeadColumn& col : c) {
    INFO(col.name);
    CHECK_FALSE(col.title.empty());
    CHECK_FALSE(col.unit.empty());
    CHECK(col.description.size() >= 20);
    CHECK(col.description.find('\n') == std::string::npos);  // one line
    CHECK((col.decimals >= 0 && col.decimals <= 8));
  }
  CHECK(interp::find_head_score("importance") == nullptr);  // the table's own: no score
  CHECK(interp::unit_max(interp::ScoreUnit::share) == 1.0);
  CHECK_FALSE(interp::unit_max(interp::ScoreUnit::nats).has_value());
}

TEST_CASE("head columns: a row's values and the table's JSON hold every score of its attention") {
  inspect::HeadTable t;
  t.split = "valid", t.loss = 1.5, t.batches = 2, t.probe_length = 7;
  t.rows = {row_of("decoder", false, 0.0), row_of("cross", true, 10.0)};
  const json j = inspect::head_table_json(t);
  CHECK(j["columns"] == inspect::head_columns_json());
  REQUIRE(j["heads"].size() == 2);
  for (size_t k = 0; k < 2; ++k) {
    const inspect::HeadRow& r = t.rows[k];
    const bool cross = k == 1;
    INFO(r.attention);
    // head_values: the columns in their order, those of the row's attention
    std::vector<std::string> want(std::begin(kOwn), std::end(kOwn)), got;
    for (const interp::HeadScoreInfo& s : interp::kHeadScores)
      if (meant_for(s, cross)) want.push_back(s.name);
    for (const auto& [column, v] : inspect::head_values(r)) got.push_back(column->name);
    CHECK(got == want);
    const json& row = j["heads"][k];
    CHECK(row.size() == 4 + want.size());  // attention, head, layer, index and the columns
    CHECK(row["importance"] == r.importance);
    CHECK(row["mean_loss_change"] == r.mean_loss_change);
    for (const interp::HeadScoreInfo& s : interp::kHeadScores) {
      INFO(s.name);
      CHECK(row.contains(s.name) == meant_for(s, cross));
      if (meant_for(s, cross)) CHECK(row[s.name].get<double>() == r.scores.at(s.name));
    }
  }
  // The columns' JSON: every registry score with its words, "max" only when bounded.
  const json& cols = j["columns"];
  REQUIRE(cols.size() == 3 + std::size(interp::kHeadScores));
  for (size_t i = 0; i < std::size(interp::kHeadScores); ++i) {
    const interp::HeadScoreInfo& s = interp::kHeadScores[i];
    const json& c = cols[3 + i];
    INFO(s.name);
    CHECK(c["name"] == s.name);
    CHECK(c["title"] == s.title);
    CHECK(c["description"] == s.description);
    CHECK(c["decimals"] == s.decimals);
    CHECK(c["unit"] == interp::unit_label(s.unit));
    CHECK(c["probe"] == true);
    CHECK(c.contains("max") == (s.unit == interp::ScoreUnit::share));
  }
  CHECK_FALSE(cols[0].contains("max"));
}

TEST_CASE("head columns: docs/inspect.md's table of columns names every column") {
  std::ifstream f(testing::source_path("docs/inspect.md"));
  REQUIRE(f.good());
  std::stringstream text;
  text << f.rdbuf();
  for (const inspect::HeadColumn& c : inspect::head_columns()) {
    INFO(c.name);
    CHECK(text.str().find("| `" + c.name + "` |") != std::string::npos);
  }
}
