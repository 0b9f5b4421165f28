// The training progress lines: the throughput a line shows, and the durations.
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <catch2/catch.hpp>

#include <sstream>

#include "figures/progress.hpp"

using qkv::figures::format_duration;
using qkv::figures::Progress;

namespace {
// Captures spdlog's default logger while it lives.
struct CaptureLog {
  std::ostringstream out;
  std::shared_ptr<spdlog::logger> saved = spdlog::default_logger();
  CaptureLog() {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
    sink->set_pattern("%v");
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("capture", sink));
  }
  ~CaptureLog() { spdlog::set_default_logger(saved); }
  std::string take() {
    std::string s = out.str();
    out.str("");
    return s;
  }
};
}  // namespace

TEST_CASE("progress lines show the last measured throughput, never a made-up 0") {
  CaptureLog log;
  Progress p(10, 0, 5, /*quiet=*/false, /*verbose=*/true);
  p.update(1, 2.5, 1e-3, 0);  // not a measured step, nothing measured yet
  CHECK(log.take().find("  - tok/s") != std::string::npos);
  p.update(5, 2.0, 1e-3, 12345);  // a logged step measures the interval
  CHECK(log.take().find("12.3k tok/s") != std::string::npos);
  p.update(6, 1.9, 1e-3, 0);  // in between: the last measurement stands
  const std::string line = log.take();
  CHECK(line.find("12.3k tok/s") != std::string::npos);
  CHECK(line.find("step 6/10  loss 1.9000") != std::string::npos);
}

TEST_CASE("durations print as m:ss or h:mm:ss, and ? when unknown") {
  CHECK(format_duration(42) == "0:42");
  CHECK(format_duration(3909) == "1:05:09");
  CHECK(format_duration(-1) == "?");
}
