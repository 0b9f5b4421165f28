// qkv serve RUN [RUN ...] [--host 127.0.0.1] [--port 8080]: the local web page that watches runs
// learn and looks inside their models (serve/server.hpp; the page and API: docs/serve.md).
#include "apps/commands.hpp"
#include "serve/server.hpp"

namespace qkv::app {

int cmd_serve(const ServeArgs& a) {
  serve::ServeOptions o;
  o.runs = a.runs;
  o.host = a.host;
  o.port = a.port;
  o.threads = a.threads;
  o.precision = a.precision;
  return serve::serve(o);
}

}  // namespace qkv::app
