// The study folders qkv report reads (report_study.hpp): the registry and the reading.
#include "figures/report_study.hpp"

#include <filesystem>

#include "core/bounded_json.hpp"
#include "core/error.hpp"
#include "core/input_file.hpp"

namespace qkv::figures::report {

namespace fs = std::filesystem;

const std::vector<StudyKind>& study_kinds() {
  static const std::vector<StudyKind> kinds = {
      {"qkv saturation", "saturation.json", valid_saturation, saturation_page},
      {"qkv layers", "layers.json", valid_layers, layers_page},
  };
  return kinds;
}

const StudyKind* study_kind_of(const std::string& dir) {
  if (!fs::is_directory(dir) || fs::exists(fs::path(dir) / "config.toml")) return nullptr;
  for (const StudyKind& k : study_kinds())
    if (fs::exists(fs::path(dir) / k.file)) return &k;
  return nullptr;
}

StudyFolder read_study(const std::string& dir, const StudyKind& kind) {
  StudyFolder s;
  s.dir = dir;
  fs::path named(dir);
  if (named.filename().empty()) named = named.parent_path();  // "out/sat/"
  s.name = named.filename().string();
  const std::string file = (fs::path(dir) / kind.file).string();
  const std::string what = std::string(kind.command).substr(4) + " result";  // "saturation result"
  InputRules rules;
  rules.what = what;
  rules.max_bytes = uint64_t{1} << 30;
  const std::string text = read_input(file, rules);  // a FIFO or device: its own one-line error
  bool ok = false;
  try {
    s.j = parse_json<nlohmann::json>(text, file, {kMaxJsonDepth, rules.max_bytes});
    ok = kind.valid(s.j);
  } catch (...) {
  }
  if (!ok)
    throw Error("report: " + file + ": not a " + kind.command + " result (corrupt or unfinished)");
  return s;
}

}  // namespace qkv::figures::report
