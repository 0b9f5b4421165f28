// A scored split as its family reports it: named metrics with their formats, a summary of what
// was scored and the family's further JSON. `qkv eval` prints whatever it is given, in order; it
// never asks which family computed it, so a new family reports new metrics without touching it.
//
//   run/x (checkpoint, valid split<summary>)
//     <label padded to 16><value with decimals>[ <note>]     one line per metric, or its text
//     <notes>                                                 the family's closing lines
//
// and as JSON, one object: each metric's key and value, then the family's further keys.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace qkv::run {

// One figure of a scored split.
struct Metric {
  std::string key = {};    // its JSON key: "bits_per_char"
  std::string label = {};  // its text label: "bits per char"
  double value = 0;
  int decimals = 4;       // text: digits after the point
  std::string note = {};  // text, after the value: "(per character)"
  // The lines that show it instead of "label value note", as printed after the metrics'
  // indent (BLEU's sacreBLEU line, then its signature indented two more); empty: the one line.
  std::vector<std::string> text = {};
};

// A split's scores, filled by the run's family (Inference::score).
struct Scores {
  // What was scored, continuing "(checkpoint, valid split": ", 500 examples" or
  // ": 1000 characters in 3 windows of 64".
  std::string summary;
  std::vector<Metric> metrics;     // in the order they are printed
  std::vector<std::string> notes;  // text lines after the metrics (how the decodes were made)
  // JSON keys beside the metrics': counts (examples, tokens), a regenerated split's lengths,
  // BLEU's signature, the decoding's timing; an object.
  nlohmann::json json = nlohmann::json::object();
  std::vector<std::string> hypotheses;  // the detokenized decodes, in order (text tasks)
};

// The loss and its perplexity, every family's first two metrics: per is the unit the loss is a
// mean over, as the perplexity's note says ("target token", "character").
std::vector<Metric> loss_metrics(double loss, const std::string& per);
// value with `decimals` digits after the point, rounded as printf's "%.*f" rounds (the text
// lines have always been printf's).
std::string fixed(double value, int decimals);
// One metric as its text line, without the indent: "exact match     0.9120".
std::string metric_line(const Metric& m);
// The scores as `qkv eval --json` prints them: each metric's key and value, then s.json's keys.
nlohmann::json scores_json(const Scores& s);

}  // namespace qkv::run
