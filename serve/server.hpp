// `qkv serve`: a local web page (serve/assets) and its JSON API (docs/serve.md) over the named
// run folders. Binds 127.0.0.1 unless told otherwise; reads the folders only.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "serve/connections.hpp"
#include "serve/model.hpp"
#include "serve/queue.hpp"

namespace qkv::serve {

struct ServeOptions {
  std::vector<std::string> runs;  // run folders, or qkv saturation --out folders
  std::string host = "127.0.0.1";
  int port = 8080;                     // 0: any free port (printed)
  int threads = 1;                     // compute threads of a question alone; beside others, 1
  std::optional<Precision> precision;  // every model's products; unset: each run's own
  int64_t max_body_bytes = 64 * 1024;
  int64_t max_loaded_models = 8;  // checkpoints kept in memory at once
  Limits limits;
  QueueLimits queue;             // questions per run computing and waiting (queue.hpp)
  ConnectionLimits connections;  // deadlines and connection bounds (connections.hpp); its
                                 // max_body_bytes is set from max_body_bytes
};

// Serves until SIGINT or SIGTERM (then returns 0 within one pass: every question running or
// waiting is cancelled at its next pass boundary, and open connections are shut down). Prints the
// page's address on stdout once listening, and a warning on stderr when host is not a loopback
// address. qkv::Error when a folder is not a run, or the address cannot be bound.
int serve(const ServeOptions& o);

namespace testing {
// Called with "RUN/step-N" before each checkpoint is loaded: the tests' slow disk
// (tests/support/serve_slow_load.cpp). None by default.
void set_before_load(std::function<void(const std::string&)> hook);
}  // namespace testing

}  // namespace qkv::serve
