#include "bench/bench_util.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/bounded_json.hpp"
#include "core/error.hpp"

namespace qkv::bench {

// kB from a /proc/self/status line such as "VmHWM:   12345 kB".
double proc_status_mb(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const std::string k = std::string(key) + ":";
  while (std::getline(in, line))
    if (line.rfind(k, 0) == 0) return std::atof(line.c_str() + k.size()) / 1024.0;
  return 0;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

long minor_page_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char ch : s) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return out + "'";
}

// Runs cmd, returns the last line of its stdout parsed as JSON.
nlohmann::json run_child(const std::string& cmd) {
  FILE* p = popen(cmd.c_str(), "r");
  QKV_CHECK(p, "bench", "cannot run: ", cmd);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int rc = pclose(p);
  QKV_CHECK(rc == 0, "bench", "child failed (status ", rc, "): ", cmd, "\n", out);
  std::istringstream lines(out);
  std::string line, last;
  while (std::getline(lines, line))
    if (!line.empty() && line[0] == '{') last = line;
  QKV_CHECK(!last.empty(), "bench", "no JSON result from: ", cmd, "\n", out);
  return parse_json(last, "bench: the JSON result of " + cmd);
}

std::string self_exe() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  QKV_CHECK(n > 0, "bench", "cannot find this executable (/proc/self/exe)");
  return std::string(buf, static_cast<size_t>(n));
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

double load_average() {
  std::ifstream in("/proc/loadavg");
  double l = 0;
  in >> l;
  return l;
}

}  // namespace qkv::bench
