// qkv average RUN --last N [--out DIR]: the run's last N checkpoints averaged
// (runfolder/average.hpp).
#include <cstdio>
#include <filesystem>

#include "apps/commands.hpp"
#include "runfolder/average.hpp"

namespace qkv::app {

int cmd_average(const AverageArgs& a) {
  const std::vector<std::string> ckpts = run::last_checkpoints(a.run_dir, a.last);
  const std::string out =
      a.out.empty()
          ? (std::filesystem::path(a.run_dir) / "checkpoints" / run::kAverageCheckpoint).string()
          : a.out;
  run::average_checkpoints(ckpts, out);
  std::printf("averaged %zu checkpoints (%s .. %s) into %s\n", ckpts.size(),
              std::filesystem::path(ckpts.front()).filename().c_str(),
              std::filesystem::path(ckpts.back()).filename().c_str(), out.c_str());
  return 0;
}

}  // namespace qkv::app
