// Parsing JSON that came from outside the process: a run folder's records (metrics.jsonl,
// state.json, manifest.json, provenance.json, saturation.json), a safetensors header, a request
// body, a child process's output. Every such text goes through here, so that none of them can
// crash or exhaust the reader.
//
// Why a bound on depth: nlohmann's parser itself is iterative, but copying, comparing and
// dumping a value recurse once per level, so a 200 KB line of 100,000 nested brackets parsed
// whole overflows the stack the moment it is copied or written out (a SIGSEGV, not an
// exception). Here the parser's callback counts the levels as they open and the parse stops at
// the first one past the bound, before any value that deep exists.
//
// Header-only (templates over nlohmann::json and nlohmann::ordered_json): it needs
// nlohmann_json, which every library that parses JSON links already.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "core/error.hpp"
#include "core/input_file.hpp"

namespace qkv {

// No record qkv writes nests deeper than 6 levels (a probe record's score tables).
inline constexpr int kMaxJsonDepth = 64;

struct JsonBounds {
  int max_depth = kMaxJsonDepth;            // arrays and objects inside one another
  uint64_t max_bytes = uint64_t{16} << 20;  // the text's length
};

namespace detail {

struct JsonTooDeep {};  // thrown from the parser's callback: ends the parse at once

// nlohmann's message without its "[json.exception.parse_error.101] " prefix.
inline std::string json_reason(const std::string& what) {
  if (what.rfind("[json.exception.", 0) == 0 && what.find("] ") != std::string::npos)
    return what.substr(what.find("] ") + 2);
  return what;
}

}  // namespace detail

// The value of text, or nullopt with `why` set to one line saying what is wrong: "nested
// deeper than 64 levels", "2.0 MiB, more than the 1 MiB allowed", or the parser's words
// ("parse error at line 1, column 3: syntax error ..."). Never throws for bad text.
template <class Json = nlohmann::json>
std::optional<Json> try_parse_json(std::string_view text, std::string& why,
                                   const JsonBounds& b = {}) {
  if (text.size() > b.max_bytes) {
    why = bytes_text(text.size()) + ", more than the " + bytes_text(b.max_bytes) + " allowed";
    return std::nullopt;
  }
  const int most = b.max_depth;
  // depth: the levels around the value being opened (0 for the outermost)
  const typename Json::parser_callback_t bound = [most](int depth, typename Json::parse_event_t e,
                                                        Json&) {
    if (depth >= most &&
        (e == Json::parse_event_t::object_start || e == Json::parse_event_t::array_start))
      throw detail::JsonTooDeep{};
    return true;
  };
  try {
    return Json::parse(text.begin(), text.end(), bound);
  } catch (const detail::JsonTooDeep&) {
    why = "nested deeper than " + std::to_string(most) + " levels";
  } catch (const typename Json::exception& e) {
    why = detail::json_reason(e.what());
  }
  return std::nullopt;
}

// Whether try_parse_json refused a text for its depth (valid JSON, too deep for a reader).
inline bool too_deep(const std::string& why) { return why.rfind("nested deeper than", 0) == 0; }

// The value of text; qkv::Error "CONTEXT: why" (try_parse_json's why) when it is refused.
template <class Json = nlohmann::json>
Json parse_json(std::string_view text, const std::string& context, const JsonBounds& b = {}) {
  std::string why;
  std::optional<Json> j = try_parse_json<Json>(text, why, b);
  if (!j) throw Error(context + ": " + why);
  return std::move(*j);
}

}  // namespace qkv
