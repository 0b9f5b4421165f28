// config in tests: a RunConfig from TOML text and command-line overrides, as `qkv train` reads
// a file ("test.toml" in its errors).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "config/config.hpp"

namespace qkv::test {

inline config::RunConfig config_from(const std::string& text,
                                     std::vector<std::pair<std::string, std::string>> ov = {}) {
  return config::config_from_toml(config::parse_config(text, "test.toml"), ov);
}

}  // namespace qkv::test
