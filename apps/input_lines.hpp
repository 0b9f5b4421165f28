// The inputs of a command that reads texts from its arguments or, without any, from stdin:
// `qkv translate` and `qkv classify`.
#pragma once
#include <iostream>
#include <string>
#include <vector>

namespace qkv::app {

// one(text) for each argument text; without any, for each stdin line (a trailing '\r' dropped).
// One output line per input line, so outputs line up with inputs: a blank (or all-space)
// input line gives a blank output line, and one is not called.
template <class F>
void each_input(const std::vector<std::string>& texts, const F& one) {
  if (!texts.empty()) {
    for (const std::string& t : texts) one(t);
    return;
  }
  std::string line;
  while (std::getline(std::cin, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos)
      std::cout << std::endl;
    else
      one(line);
  }
}

}  // namespace qkv::app
