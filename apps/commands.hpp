// The qkv subcommands: one source file each, called by main.cpp after parsing the command line.
// Each returns the process exit code; errors are thrown as qkv::Error and reported by main.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace qkv::app {

struct TrainArgs {
  std::string config, run_dir, resume;
  std::vector<std::pair<std::string, std::string>> overrides;  // ("model.d_model", "256")
  bool quiet = false, verbose = false;
};
int cmd_train(const TrainArgs& a);  // train.cpp

struct EvalArgs {
  std::string run_dir, split = "valid", checkpoint = "best";
  bool json = false;
  int threads = 0;
};
int cmd_eval(const EvalArgs& a);  // eval.cpp

struct TranslateArgs {
  std::string run_dir, checkpoint = "best";
  std::vector<std::string> texts;  // empty: read lines from stdin
  int beam = 1;
  double alpha = 1.0;
  int max_len = 0;  // 0: source length + train.max_decode_extra
  int threads = 0;
};
int cmd_translate(const TranslateArgs& a);  // translate.cpp

}  // namespace qkv::app
