// docs/config.md cannot drift from the config reader: every key the reader knows appears in
// its table with the default the reader gives, and the table names no key the reader lacks.
#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "config/config.hpp"
#include "config/document.hpp"
#include "support/common.hpp"

using namespace qkv;
using namespace qkv::config;

namespace {

// "section.key" -> default, from the effective config of a default RunConfig (every key the
// field visitor writes, the optimizer's included).
std::map<std::string, ojson> reader_defaults() {
  const ConfigDoc doc = parse_config(effective_toml(RunConfig{}), "defaults");
  std::map<std::string, ojson> out;
  for (auto it = doc.root.begin(); it != doc.root.end(); ++it) {
    if (!it.value().is_object()) {
      out[it.key()] = it.value();
      continue;
    }
    for (auto k = it.value().begin(); k != it.value().end(); ++k)
      out[it.key() + "." + k.key()] = k.value();
  }
  return out;
}

// "section.key" -> the default's text, from the doc's rows "| `key` | `default` | ... |".
std::map<std::string, std::string> doc_defaults(const std::string& text) {
  std::map<std::string, std::string> out;
  const std::regex row(R"(^\| `([a-z_.0-9]+)` \| `([^`]*)` \|)");
  std::istringstream in(text);
  std::string line;
  std::smatch m;
  while (std::getline(in, line))
    if (std::regex_search(line, m, row)) out[m[1]] = m[2];
  return out;
}

}  // namespace

TEST_CASE("docs/config.md lists every config key with its default") {
  std::ifstream f(testing::source_path("docs/config.md"));
  REQUIRE(f.good());
  std::stringstream text;
  text << f.rdbuf();
  const auto doc = doc_defaults(text.str());
  const auto reader = reader_defaults();
  REQUIRE(reader.size() > 80);  // the visitor's keys, every section
  for (const auto& [key, value] : reader) {
    INFO(key << " (reader default " << value.dump() << ")");
    REQUIRE(doc.count(key) == 1);
    const ojson documented = parse_value_or_string(doc.at(key));
    if (value.is_number())
      CHECK(documented.get<double>() == value.get<double>());
    else
      CHECK(documented == value);
  }
  for (const auto& [key, text_value] : doc) {
    INFO(key << " is documented but the config reader has no such key");
    CHECK(reader.count(key) == 1);
  }
}
