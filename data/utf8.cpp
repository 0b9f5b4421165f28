#include "data/utf8.hpp"

#include "core/error.hpp"

namespace qkv::data {

namespace {
// Decodes the sequence at s[i]; returns its length in bytes, or 0 if it is malformed.
size_t decode_one(std::string_view s, size_t i, char32_t* out) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) {
    *out = b0;
    return 1;
  }
  size_t len;
  char32_t c, min;
  if ((b0 & 0xE0) == 0xC0) {
    len = 2, c = b0 & 0x1F, min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3, c = b0 & 0x0F, min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4, c = b0 & 0x07, min = 0x10000;
  } else {
    return 0;  // a continuation byte or 0xF8..0xFF where a sequence should start
  }
  if (i + len > s.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) return 0;
    c = (c << 6) | (b & 0x3F);
  }
  // Overlong forms and surrogates would let two byte strings spell one text.
  if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return 0;
  *out = c;
  return len;
}
}  // namespace

bool valid_utf8(std::string_view s, size_t* bad_offset) {
  for (size_t i = 0; i < s.size();) {
    char32_t c;
    const size_t n = decode_one(s, i, &c);
    if (n == 0) {
      if (bad_offset) *bad_offset = i;
      return false;
    }
    i += n;
  }
  return true;
}

std::vector<char32_t> decode_utf8(std::string_view s) {
  std::vector<char32_t> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    char32_t c;
    const size_t n = decode_one(s, i, &c);
    QKV_CHECK(n != 0, "decode_utf8", "invalid UTF-8 at byte ", i);
    out.push_back(c);
    i += n;
  }
  return out;
}

void append_utf8(std::string& out, char32_t c) {
  QKV_CHECK(c <= 0x10FFFF && !(c >= 0xD800 && c <= 0xDFFF), "append_utf8",
            "not a Unicode scalar value: ", static_cast<uint32_t>(c));
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

std::vector<std::string> split_chars(std::string_view s) {
  std::vector<std::string> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    char32_t c;
    const size_t n = decode_one(s, i, &c);
    QKV_CHECK(n != 0, "split_chars", "invalid UTF-8 at byte ", i);
    out.emplace_back(s.substr(i, n));
    i += n;
  }
  return out;
}

char32_t to_lower(char32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if (c < 0x80) return c;
  // Latin-1: À..Þ except the multiplication sign.
  if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 32;
  // Latin Extended-A alternates upper/lower in pairs, with the parity flipping at U+0139 and
  // U+0179; U+0130 (dotted I), U+0138 (kra) and U+0149 have no simple pair.
  if ((c >= 0x100 && c <= 0x12F) || (c >= 0x132 && c <= 0x137) || (c >= 0x14A && c <= 0x177))
    return (c % 2 == 0) ? c + 1 : c;
  if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) return (c % 2 == 1) ? c + 1 : c;
  if (c == 0x178) return 0xFF;  // Ÿ -> ÿ
  // Greek capitals Α..Ω (U+03A2 is unassigned).
  if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 32;
  // Cyrillic: Ѐ..Џ -> ѐ..џ, А..Я -> а..я.
  if (c >= 0x400 && c <= 0x40F) return c + 80;
  if (c >= 0x410 && c <= 0x42F) return c + 32;
  return c;
}

std::string to_lower_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : decode_utf8(s)) append_utf8(out, to_lower(c));
  return out;
}

bool is_space(char32_t c) {
  return c == ' ' || (c >= 0x09 && c <= 0x0D) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

bool is_punctuation(char32_t c) {
  if (c < 0x80)
    return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
           (c >= 0x7B && c <= 0x7E);
  // Latin-1 signs (¡ ¢ £ ... ¿) and × ÷, but not the letters ª º µ.
  if (c >= 0xA1 && c <= 0xBF) return c != 0xAA && c != 0xB5 && c != 0xBA;
  if (c == 0xD7 || c == 0xF7) return true;
  // General punctuation (dashes, curly quotes, ellipsis), less the spaces above.
  if (c >= 0x2010 && c <= 0x205E) return c != 0x2028 && c != 0x2029 && c != 0x202F;
  // CJK punctuation and full-width ASCII punctuation.
  if (c >= 0x3001 && c <= 0x303F) return true;
  if (c >= 0xFF01 && c <= 0xFF0F) return true;
  return false;
}

}  // namespace qkv::data
