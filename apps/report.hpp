// qkv report's reading of a run folder: its effective config.toml and newest checkpoint, with
// the metrics read by figures/report.hpp, which holds the page's parts.
#pragma once
#include <string>

#include "figures/report.hpp"

namespace qkv::app {

// Reads dir; throws qkv::Error "DIR: not a run folder (no config.toml)" and the like.
figures::report::RunData read_run(const std::string& dir);

}  // namespace qkv::app
