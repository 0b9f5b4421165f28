// `qkv serve` (see server.hpp): routes, the JSON errors, the model cache, signals.
#include "serve/server.hpp"

#include <httplib.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <list>
#include <map>
#include <mutex>
#include <thread>

#include "core/error.hpp"
#include "core/parallel.hpp"
#include "serve/assets.hpp"
#include "serve/run_files.hpp"

using nlohmann::json;

namespace qkv::serve {

namespace {

// A request for something that is not served: an unknown run, a file outside it.
struct NotFound : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void send_json(httplib::Response& res, const json& j, int status = 200) {
  res.status = status;
  res.set_content(j.dump(), "application/json");
}

void send_error(httplib::Response& res, int status, const std::string& message) {
  std::string line = message.substr(0, message.find('\n'));  // one line
  send_json(res, {{"error", line}}, status);
}

// The checkpoints loaded so far, by (run, checkpoint folder): at most `capacity`, the least
// recently used dropped first (a request still using it keeps it alive).
class ModelCache {
 public:
  ModelCache(size_t capacity, std::string precision)
      : capacity_(capacity), precision_(std::move(precision)) {}

  std::shared_ptr<Model> get(const ServedRun& run, const std::string& which) {
    if (which != "best" && which != "latest" && which.rfind("step-", 0) != 0)
      throw BadInput("checkpoint must be best, latest or step-N, got '" + which + "'");
    std::string name;
    try {
      name = resolve_checkpoint_name(run.dir.string(), which);
    } catch (const Error& e) {
      throw NotFound(run.name + ": no checkpoint " + which + " (yet)");
    }
    const std::string key = run.name + "/" + name;
    std::lock_guard<std::mutex> hold(mu_);  // one load at a time: each is read once
    for (auto it = lru_.begin(); it != lru_.end(); ++it)
      if (it->first == key) {
        lru_.splice(lru_.begin(), lru_, it);
        return it->second;
      }
    auto m = std::make_shared<Model>(run.dir.string(), name, precision_);
    lru_.emplace_front(key, m);
    if (lru_.size() > capacity_) lru_.pop_back();
    return m;
  }

 private:
  size_t capacity_;
  std::string precision_;
  std::mutex mu_;
  std::list<std::pair<std::string, std::shared_ptr<Model>>> lru_;
};

json parse_body(const httplib::Request& req) {
  json j = json::parse(req.body, nullptr, false);
  if (j.is_discarded()) throw BadInput("the request body is not valid JSON");
  if (!j.is_object()) throw BadInput("the request body must be a JSON object");
  return j;
}

// A field of the body, of type T, or `fallback` when absent; a wrong type is bad input.
template <class T>
T field(const json& body, const char* key, T fallback) {
  if (!body.contains(key) || body[key].is_null()) return fallback;
  const json& v = body[key];
  if constexpr (std::is_same_v<T, std::string>) {
    if (!v.is_string()) throw BadInput(std::string(key) + " must be a string");
  } else if constexpr (std::is_integral_v<T>) {
    if (!v.is_number_integer()) throw BadInput(std::string(key) + " must be an integer");
  } else {
    if (!v.is_number()) throw BadInput(std::string(key) + " must be a number");
  }
  return v.get<T>();
}

class Server {
 public:
  explicit Server(const ServeOptions& o)
      : opts_(o),
        runs_(served_runs(o.runs)),
        models_(static_cast<size_t>(o.max_loaded_models), o.precision) {}

  // Binds host:port (0: any free port); the chosen port.
  int bind() {
    http_.new_task_queue = [] { return new httplib::ThreadPool(24); };
    http_.set_payload_max_length(static_cast<size_t>(opts_.max_body_bytes));
    http_.set_keep_alive_max_count(100);
    // SO_REUSEADDR only: httplib's default adds SO_REUSEPORT, which would let a second server
    // listen on a port already taken (and share its connections) instead of failing.
    http_.set_socket_options([](int sock) {
      int yes = 1;
      setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    });
    routes();
    const int port = opts_.port == 0
                         ? http_.bind_to_any_port(opts_.host)
                         : (http_.bind_to_port(opts_.host, opts_.port) ? opts_.port : -1);
    QKV_CHECK(port > 0, "serve", "cannot listen on ", opts_.host, ":", opts_.port,
              " (in use, or not an address of this machine)");
    return port;
  }
  bool listen() { return http_.listen_after_bind(); }
  void stop() { http_.stop(); }

 private:
  const ServedRun& run_named(const std::string& name) const {
    for (const ServedRun& r : runs_)
      if (r.name == name) return r;
    throw NotFound("no run named '" + name + "' is served");
  }

  // Wraps a handler: its errors become one-line JSON answers (400 bad input, 404 not found,
  // 500 anything else) instead of reaching the connection.
  httplib::Server::Handler guarded(
      std::function<void(const httplib::Request&, httplib::Response&)> h) {
    return [h](const httplib::Request& req, httplib::Response& res) {
      try {
        h(req, res);
      } catch (const BadInput& e) {
        send_error(res, 400, e.what());
      } catch (const NotFound& e) {
        send_error(res, 404, e.what());
      } catch (const Error& e) {
        send_error(res, 400, e.what());  // the library refused the input or the checkpoint
      } catch (const std::exception& e) {
        send_error(res, 500, e.what());
      }
    };
  }

  std::shared_ptr<Model> model_for(const ServedRun& run, const json& body) {
    if (run.saturation) throw BadInput(run.name + " is a saturation study, not a trained model");
    if (opts_.threads > 0) set_num_threads(opts_.threads);  // this worker thread's OpenMP teams
    return models_.get(run, field<std::string>(body, "checkpoint", "best"));
  }

  json runs_json() const {
    json list = json::array();
    for (const ServedRun& r : runs_) {
      json j{{"name", r.name}, {"saturation", r.saturation}};
      if (r.saturation) {
        json charts = json::array();
        std::error_code ec;
        for (const auto& e : std::filesystem::directory_iterator(r.dir, ec))
          if (e.path().extension() == ".svg") charts.push_back(e.path().filename().string());
        std::sort(charts.begin(), charts.end());
        j["charts"] = charts;
      } else {
        try {
          j["facts"] = run_facts(r.dir.string());
        } catch (const Error& e) {
          j["facts"] = json::object();
          j["config_error"] = e.what();
        }
        j["checkpoints"] = list_checkpoints(r.dir.string());
      }
      list.push_back(std::move(j));
    }
    return list;
  }

  void routes() {
    http_.Get("/api/runs",
              guarded([this](const auto&, auto& res) { send_json(res, runs_json()); }));
    http_.Get(R"(/api/runs/([^/]+)/metrics)", guarded([this](const auto& req, auto& res) {
                const ServedRun& run = run_named(req.matches[1]);
                auto number = [&](const char* key) -> int64_t {
                  if (!req.has_param(key)) return 0;
                  try {
                    return std::stoll(req.get_param_value(key));
                  } catch (const std::exception&) {
                    throw BadInput(std::string(key) + " must be an integer");
                  }
                };
                const int64_t since = req.has_param("since") ? number("since") : -1;
                send_json(res, read_metrics(run, number("offset"), since));
              }));
    http_.Get(R"(/api/runs/([^/]+)/files/(.+))", guarded([this](const auto& req, auto& res) {
                const ServedRun& run = run_named(req.matches[1]);
                const auto path = file_inside(run, req.matches[2]);
                const std::string ext = path ? path->extension().string() : "";
                const char* type =
                    ext == ".svg"    ? "image/svg+xml"
                    : ext == ".png"  ? "image/png"
                    : ext == ".json" ? "application/json"
                    : ext == ".csv" || ext == ".txt" || ext == ".toml" || ext == ".jsonl"
                        ? "text/plain; charset=utf-8"
                        : nullptr;
                if (!type) throw NotFound("no such file in " + run.name);
                std::ifstream in(*path, std::ios::binary);
                std::string bytes((std::istreambuf_iterator<char>(in)), {});
                res.set_content(bytes, type);
              }));
    post_model("translate", [this](Model& m, const json& b, auto& res) {
      send_json(res, m.translate(field<std::string>(b, "text", ""), field<int64_t>(b, "beam", 4),
                                 opts_.limits));
    });
    post_model("attention", [this](Model& m, const json& b, auto& res) {
      send_json(res, m.attention(field<std::string>(b, "text", ""), opts_.limits));
    });
    post_model("next", [this](Model& m, const json& b, auto& res) {
      send_json(res, m.next_tokens(field<std::string>(b, "text", ""), field<int64_t>(b, "k", 5),
                                   opts_.limits));
    });
    generate_route();
    http_.Get(R"(/|/app\.js|/style\.css)", [](const httplib::Request& req, httplib::Response& res) {
      const Asset* a = find_asset(req.path);
      res.set_content(std::string(a->bytes), std::string(a->content_type).c_str());
      // The page runs its own script and talks only to this server.
      res.set_header("Content-Security-Policy",
                     "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
                     "connect-src 'self'");
    });
    // Browsers ask for an icon; there is none (an empty answer, not an error in the console).
    http_.Get("/favicon.ico", [](const auto&, auto& res) { res.status = 204; });
    http_.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;  // a handler's own JSON answer
      if (res.status == 413)
        send_error(res, 413, "the request body is larger than the server's limit");
      else if (res.status == 404)
        send_error(res, 404, "not found: " + req.path);
      else
        send_error(res, res.status, "HTTP " + std::to_string(res.status));
    });
  }

  template <class F>
  void post_model(const char* what, F f) {
    http_.Post(std::string(R"(/api/runs/([^/]+)/)") + what,
               guarded([this, f](const httplib::Request& req, httplib::Response& res) {
                 const ServedRun& run = run_named(req.matches[1]);
                 const json body = parse_body(req);
                 f(*model_for(run, body), body, res);
               }));
  }

  // A language model's sample, streamed: one JSON line per piece of text as it is made
  // ({"text": "..."}), then {"done": true}. Bad requests are refused before the stream starts.
  void generate_route() {
    http_.Post(R"(/api/runs/([^/]+)/generate)", guarded([this](const auto& req, auto& res) {
                 const ServedRun& run = run_named(req.matches[1]);
                 const json b = parse_body(req);
                 std::shared_ptr<Model> m = model_for(run, b);
                 SampleRequest q;
                 q.prompt = field<std::string>(b, "prompt", "");
                 q.tokens = field<int64_t>(b, "tokens", q.tokens);
                 q.temperature = field<double>(b, "temperature", q.temperature);
                 q.top_k = field<int64_t>(b, "top_k", q.top_k);
                 q.top_p = field<double>(b, "top_p", q.top_p);
                 q.seed = field<uint64_t>(b, "seed", q.seed);
                 m->check_sample(q, opts_.limits);
                 const int threads = opts_.threads;
                 res.set_chunked_content_provider(
                     "application/x-ndjson",
                     [m, q, threads, this](size_t, httplib::DataSink& sink) {
                       if (threads > 0) set_num_threads(threads);
                       try {
                         m->generate(q, opts_.limits, [&](const std::string& piece) {
                           const std::string line = json{{"text", piece}}.dump() + "\n";
                           return sink.write(line.data(), line.size());
                         });
                         const std::string end = json{{"done", true}}.dump() + "\n";
                         sink.write(end.data(), end.size());
                       } catch (const std::exception& e) {  // mid-stream: the last line says why
                         const std::string err = json{{"error", e.what()}}.dump() + "\n";
                         sink.write(err.data(), err.size());
                       }
                       sink.done();
                       return true;
                     });
               }));
  }

  ServeOptions opts_;
  std::vector<ServedRun> runs_;
  ModelCache models_;
  httplib::Server http_;
};

bool is_loopback(const std::string& host) {
  return host == "127.0.0.1" || host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

}  // namespace

int serve(const ServeOptions& o) {
  QKV_CHECK(!o.runs.empty(), "serve", "name at least one run folder");
  // SIGINT and SIGTERM go to one thread that stops the server (stop() is not safe inside a
  // signal handler); blocked here, before any thread starts, so every thread inherits it.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  Server server(o);
  const int port = server.bind();
  if (!is_loopback(o.host))
    std::fprintf(stderr,
                 "qkv serve: warning: listening on %s, not only this machine: anyone who can "
                 "reach it can use the page and the API\n",
                 o.host.c_str());
  std::printf("qkv serve: %zu folder(s) at http://%s:%d/\n", o.runs.size(),
              o.host.find(':') != std::string::npos ? ("[" + o.host + "]").c_str() : o.host.c_str(),
              port);
  std::fflush(stdout);
  std::atomic<bool> done{false};
  std::atomic<int> got{0};
  // After a signal, stop() again until listen() returns: a stop that comes before listen()
  // has started does nothing, and the signal may come as soon as the address is printed.
  std::thread watcher([&] {
    const timespec tick{0, 50 * 1000 * 1000};
    while (!done) {
      const int s = got ? 0 : sigtimedwait(&stop_signals, nullptr, &tick);
      if (s > 0) got = s;
      if (got) {
        server.stop();
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
  });
  const bool ok = server.listen();
  done = true;
  watcher.join();
  if (got) {
    std::printf("qkv serve: stopped (%s)\n", got == SIGINT ? "SIGINT" : "SIGTERM");
    return 0;
  }
  QKV_CHECK(ok, "serve", "the server stopped unexpectedly");
  return 0;
}

}  // namespace qkv::serve
