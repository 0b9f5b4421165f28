// core/bounded_json: JSON from outside the process is parsed within a depth and a size, and a
// text past either is refused with one line, however deep it goes.
#include <catch2/catch.hpp>

#include <string>

#include "core/bounded_json.hpp"

using namespace qkv;
using nlohmann::json;

namespace {

// [[[...1...]]] nested `levels` deep (objects when obj: {"a":{"a":...}}).
std::string nested(int64_t levels, bool obj = false) {
  std::string s;
  s.reserve(static_cast<size_t>(levels) * (obj ? 6 : 2) + 1);
  for (int64_t i = 0; i < levels; ++i) s += obj ? "{\"a\":" : "[";
  s += "1";
  for (int64_t i = 0; i < levels; ++i) s += obj ? "}" : "]";
  return s;
}

}  // namespace

TEST_CASE("bounded json: the depth bound admits its last level and refuses the next") {
  std::string why;
  for (const bool obj : {false, true}) {
    INFO(obj);
    const auto at = try_parse_json(nested(kMaxJsonDepth, obj), why);
    REQUIRE(at.has_value());
    CHECK(at->dump() == nested(kMaxJsonDepth, obj));  // dumping recurses: fine this deep
    CHECK_FALSE(try_parse_json(nested(kMaxJsonDepth + 1, obj), why).has_value());
    CHECK(why == "nested deeper than 64 levels");
    CHECK(too_deep(why));
  }
  CHECK(try_parse_json(nested(3), why, {.max_depth = 3}).has_value());
  CHECK_FALSE(try_parse_json(nested(4), why, {.max_depth = 3}).has_value());
}

TEST_CASE("bounded json: a million levels are refused without recursing") {
  std::string why;
  // Parsed whole, then copied or dumped, this overflows the stack (a SIGSEGV, no exception).
  for (const int64_t levels : {int64_t{100000}, int64_t{1000000}}) {
    INFO(levels);
    CHECK_FALSE(try_parse_json(nested(levels), why, {.max_bytes = uint64_t{8} << 20}));
    CHECK(why == "nested deeper than 64 levels");
    CHECK_FALSE(try_parse_json<nlohmann::ordered_json>(nested(levels, true), why,
                                                       {.max_bytes = uint64_t{8} << 20}));
    CHECK(too_deep(why));
  }
  // Unclosed: refused at the same level, before the parser finds the end missing.
  CHECK_FALSE(try_parse_json(std::string(500000, '['), why));
  CHECK(too_deep(why));
}

TEST_CASE("bounded json: size, syntax and the message of parse_json") {
  std::string why;
  CHECK_FALSE(try_parse_json("[1, 2, 3]", why, {.max_bytes = 4}));
  CHECK(why == "9 bytes, more than the 4 bytes allowed");
  CHECK_FALSE(try_parse_json("{\"a\": ", why));
  CHECK(why.rfind("parse error at line 1, column 7", 0) == 0);  // no "[json.exception..." prefix
  CHECK_FALSE(too_deep(why));
  CHECK(parse_json("{\"step\": 3}", "x")["step"] == 3);
  CHECK_THROWS_WITH(parse_json(nested(65), "run/state.json: corrupt checkpoint state"),
                    "run/state.json: corrupt checkpoint state: nested deeper than 64 levels");
  CHECK_THROWS_AS(parse_json("nope", "x"), Error);
  // Order kept for ordered_json (the report reads metrics records in their written order).
  const auto o = parse_json<nlohmann::ordered_json>("{\"b\": 1, \"a\": 2}", "x");
  CHECK(o.begin().key() == "b");
}
