// The page's files (serve/assets/*.html, *.js, *.css), compiled into the binary by
// serve/embed_assets.cmake so that `qkv serve` needs nothing beside it and nothing online.
#pragma once
#include <cstddef>
#include <string_view>

namespace qkv::serve {

struct Asset {
  std::string_view path;  // as requested: "/", "/app.js", "/style.css"
  std::string_view content_type;
  std::string_view bytes;
};
// The asset at a request path, or nullptr.
const Asset* find_asset(std::string_view path);

}  // namespace qkv::serve
