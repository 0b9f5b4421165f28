// The command line's options, one add_<command> per subcommand (apps/options_*.cpp): each binds
// the subcommand's arguments, help texts, defaults and checks to the fields of its Args
// (apps/commands.hpp). apps/main.cpp names the subcommands and runs them.
#pragma once
#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>

#include "apps/commands.hpp"

namespace qkv::app {

// options_common.cpp
void add_precision(CLI::App* cmd, std::optional<qkv::Precision>& precision);
void add_ablate(CLI::App* cmd, std::string& ablate);
void add_max_work(CLI::App* cmd, int64_t& max_work);
void add_input_options(CLI::App* cmd, InputArgs& a, const std::string& max_input_help);
// options_train.cpp
void add_train(CLI::App* cmd, TrainArgs& a);
void add_config(CLI::App* cmd, TrainArgs& a);
void add_eval(CLI::App* cmd, EvalArgs& a);
void add_average(CLI::App* cmd, AverageArgs& a);
void add_score(CLI::App* cmd, ScoreArgs& a);
// options_decode.cpp
void add_translate(CLI::App* cmd, TranslateArgs& a);
void add_classify(CLI::App* cmd, ClassifyArgs& a);
void add_generate(CLI::App* cmd, GenerateArgs& a);
// options_study.cpp
void add_bench(CLI::App* cmd, BenchArgs& a);
void add_gradcheck(CLI::App* cmd, GradcheckArgs& a);
void add_saturation(CLI::App* cmd, SaturationArgs& a);
void add_layers(CLI::App* cmd, LayersArgs& a);
void add_attention(CLI::App* cmd, AttentionArgs& a);
void add_report(CLI::App* cmd, ReportArgs& a);
void add_serve(CLI::App* cmd, ServeArgs& a);
// options_inspect.cpp
void add_heads(CLI::App* cmd, HeadsArgs& a);
void add_lens(CLI::App* cmd, LensArgs& a);
void add_patch(CLI::App* cmd, PatchArgs& a);
void add_attribute(CLI::App* cmd, AttributeArgs& a);

}  // namespace qkv::app
