// A guard in front of toml++: the first non-ASCII byte outside strings and comments.
//
// TOML 1.0 allows non-ASCII text only inside strings (quoted keys included) and comments; a bare
// key or a value is ASCII. toml++ 3.3.0 (Debian 12) reaches TOML_UNREACHABLE, undefined
// behaviour, when its whitespace test meets some such characters where a key is expected (for
// example a Cyrillic letter in a bare key). Refusing them first, with their line and column, turns
// that into the clear error a user needs, and rejects nothing that TOML accepts.
#pragma once
#include <cstddef>
#include <optional>
#include <string_view>

namespace qkv::config {

struct TextPos {
  std::size_t line = 1;    // 1-based
  std::size_t column = 1;  // 1-based, in bytes
};

// The position of the first byte >= 0x80 that is not inside a string ("...", '...', """...""",
// '''...''') or a comment (# to the end of the line), a leading byte order mark aside; nullopt
// when there is none.
std::optional<TextPos> first_non_ascii_outside_strings(std::string_view toml);

}  // namespace qkv::config
