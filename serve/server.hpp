// `qkv serve`: a local web page (serve/assets) and its JSON API (docs/serve.md) over the named
// run folders. Binds 127.0.0.1 unless told otherwise; reads the folders only.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "serve/model.hpp"

namespace qkv::serve {

struct ServeOptions {
  std::vector<std::string> runs;  // run folders, or qkv saturation --out folders
  std::string host = "127.0.0.1";
  int port = 8080;        // 0: any free port (printed)
  int threads = 1;        // compute threads per request (OpenMP)
  std::string precision;  // every model's products: fp32, bf16, auto; empty: each run's own
  int64_t max_body_bytes = 64 * 1024;
  int64_t max_loaded_models = 8;  // checkpoints kept in memory at once
  Limits limits;
};

// Serves until SIGINT or SIGTERM (then returns 0). Prints the page's address on stdout once
// listening, and a warning on stderr when host is not a loopback address. qkv::Error when a
// folder is not a run, or the address cannot be bound.
int serve(const ServeOptions& o);

}  // namespace qkv::serve
