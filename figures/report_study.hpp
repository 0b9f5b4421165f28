// qkv report for the folders the study commands write: `qkv saturation --out DIR`
// (saturation.json) and `qkv layers --out DIR` (layers.json). Each kind of study is one entry of
// study_kinds(): the file that marks its folder, how its JSON is checked, and what its page
// holds; qkv report draws any of them, several folders of one kind overlaid, without asking
// which kind it holds. A new study command is one line there plus its page function.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "figures/plot.hpp"

namespace qkv::figures::report {

// One study folder as read back: its JSON, checked by its kind.
struct StudyFolder {
  std::string dir;   // as given
  std::string name;  // the folder's name, the label of its series when folders are overlaid
  nlohmann::json j;
};

// What a study's page holds. Cells and intro are HTML (text escaped by the page function).
struct StudyPage {
  std::string title, subtitle, intro;
  std::vector<std::string> settings_header;  // one row per folder
  std::vector<std::vector<std::string>> settings_rows;
  std::vector<std::string> results_header;  // optional: a table of the results
  std::vector<std::vector<std::string>> results_rows;
  std::vector<LineChart> lines;
  std::vector<BarChart> bars;
};

struct StudyKind {
  const char* command;                     // "qkv saturation": names it in errors
  const char* file;                        // "saturation.json": marks its folders
  bool (*valid)(const nlohmann::json& j);  // false: not the command's result
  StudyPage (*page)(const std::vector<StudyFolder>& folders);
};

// Every kind of study folder qkv report reads.
const std::vector<StudyKind>& study_kinds();
// The kind whose file dir holds (a folder with config.toml is a run, never a study), or null.
const StudyKind* study_kind_of(const std::string& dir);
// dir's study file, parsed and checked; throws qkv::Error "report: FILE: not a qkv saturation
// result (corrupt or unfinished)" when it is not.
StudyFolder read_study(const std::string& dir, const StudyKind& kind);

// The pages, one per kind (report_saturation.cpp, report_layers.cpp).
bool valid_saturation(const nlohmann::json& j);
StudyPage saturation_page(const std::vector<StudyFolder>& folders);
bool valid_layers(const nlohmann::json& j);
StudyPage layers_page(const std::vector<StudyFolder>& folders);

}  // namespace qkv::figures::report
