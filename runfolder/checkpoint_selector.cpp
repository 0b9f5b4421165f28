#include "runfolder/checkpoint_selector.hpp"

#include <vector>

namespace qkv::run {

CheckpointSelector parse_checkpoint_selector(std::string_view text, const std::string& key) {
  if (text.find('/') != std::string_view::npos) return {CheckpointKind::path, std::string(text)};
  if (text.size() > 5 && text.substr(0, 5) == "step-" &&
      text.find_first_not_of("0123456789", 5) == std::string_view::npos)
    return {CheckpointKind::step, std::string(text)};
  const std::optional<CheckpointKind> named = find_name<CheckpointKind>(text);
  if (named && *named != CheckpointKind::step && *named != CheckpointKind::path)
    return {*named, {}};
  std::vector<std::string_view> names;  // the names that parse as they are spelled
  for (const EnumName<CheckpointKind>& n : kCheckpointNames)
    if (n.value != CheckpointKind::step && n.value != CheckpointKind::path) names.push_back(n.name);
  throw Error(cat(key, ": must be ", names_list<CheckpointKind>(),
                  " (step-N: a checkpoint's name, e.g. step-00000100; path: a checkpoint folder, "
                  "with a '/'), got '",
                  text, "'", did_you_mean(text, names, "'", "'")));
}

}  // namespace qkv::run
