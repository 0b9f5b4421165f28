// Command-line checks shared by the subcommands (main.cpp): each flag means one thing, and a
// value outside it is CLI11's one-line error naming the flag (exit 2), never a silent default.
#pragma once
#include <CLI/CLI.hpp>

#include <cmath>
#include <exception>
#include <filesystem>
#include <string>

#include "core/names.hpp"
#include "runfolder/checkpoint_selector.hpp"
#include "runfolder/integrity.hpp"

namespace qkv::app {

// A finite number in [lo, hi] (CLI::Range lets NaN through: every comparison with it is false).
inline CLI::Validator finite_range(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& s) -> std::string {
        try {
          size_t used = 0;
          const double v = std::stod(s, &used);
          if (used == s.size() && std::isfinite(v) && v >= lo && v <= hi) return "";
        } catch (const std::exception&) {
        }
        return "Value " + s + " not a finite number in [" + CLI::detail::to_string(lo) + " - " +
               CLI::detail::to_string(hi) + "]";
      },
      "FLOAT in [" + CLI::detail::to_string(lo) + " - " + CLI::detail::to_string(hi) + "]");
}

// The text of a parser's qkv::Error without its leading "KEY: " (CLI11 puts the flag in front).
inline std::string without_key(const Error& e, const std::string& key) {
  const std::string m = e.what();
  return m.rfind(key + ": ", 0) == 0 ? m.substr(key.size() + 2) : m;
}

// A value of E's names table (core/names.hpp), with parse_name's error (the nearest name).
template <NamedEnum E>
CLI::Validator one_of_names(const std::string& flag) {
  std::string names;
  for (const EnumName<E>& n : names_table<E>())
    names += (names.empty() ? "" : "|") + std::string(n.name);
  return CLI::Validator(
      [flag](std::string& s) -> std::string {
        try {
          parse_name<E>(s, flag);
          return "";
        } catch (const Error& e) {
          return without_key(e, flag);
        }
      },
      names);
}

// --checkpoint: best, latest, average, a checkpoint's name (step-00000100) or a folder's path
// (runfolder/checkpoint_selector.hpp's parse, and its error).
inline CLI::Validator checkpoint_name() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        try {
          run::parse_checkpoint_selector(s, "--checkpoint");
          return "";
        } catch (const Error& e) {
          return without_key(e, "--checkpoint");
        }
      },
      "best|latest|average|step-N|DIR");
}

// --threads: 0 (the default: the run's, or all cores) up to 4096; apply_threads caps it.
inline CLI::Validator thread_count() { return CLI::Range(0, 4096); }

// An exception's text for the one-line error: std::filesystem's "filesystem error: OP: WHY
// [PATH]" as "PATH: OP: WHY", nlohmann's without its "[json.exception...]" prefix.
inline std::string plain_message(const std::exception& e) {
  if (const auto* fe = dynamic_cast<const std::filesystem::filesystem_error*>(&e)) {
    std::string op = fe->what();
    const std::string prefix = "filesystem error: ";
    if (op.rfind(prefix, 0) == 0) op = op.substr(prefix.size());
    op = op.substr(0, op.find(": "));
    std::string where = fe->path1().string();
    if (!fe->path2().empty()) where += " -> " + fe->path2().string();
    return (where.empty() ? "" : where + ": ") + op + ": " + fe->code().message();
  }
  return run::json_message(e.what());
}

}  // namespace qkv::app
