// `qkv serve` (see server.hpp): routes, the JSON errors, the model cache, signals.
#include "serve/server.hpp"

#include <arpa/inet.h>
#include <httplib.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <list>
#include <map>
#include <mutex>
#include <thread>

#include "core/bounded_json.hpp"
#include "core/cancel.hpp"
#include "core/error.hpp"
#include "core/input_file.hpp"
#include "core/parallel.hpp"
#include "inspect/head_table.hpp"
#include "runfolder/run_file.hpp"
#include "serve/assets.hpp"
#include "serve/connections.hpp"
#include "serve/queue.hpp"
#include "serve/run_files.hpp"

using nlohmann::json;

namespace qkv::serve {

namespace {

std::function<void(const std::string&)>& before_load() {
  static std::function<void(const std::string&)> hook;
  return hook;
}

constexpr uint64_t kMaxServedFile = 256ull << 20;  // a figure, a CSV, a config, a log
constexpr size_t kStreamChunk = 64 << 10;          // what one answer holds of its file at once

// A request for something that is not served: an unknown run, a file outside it.
struct NotFound : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Every answer's JSON: bytes that are not UTF-8 (a request's path, a folder's name, a message
// quoting either) become U+FFFD instead of an exception.
std::string dump_json(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

void send_json(httplib::Response& res, const json& j, int status = 200) {
  res.status = status;
  res.set_content(dump_json(j), "application/json");
}

void send_error(httplib::Response& res, int status, const std::string& message) {
  std::string line = message.substr(0, message.find('\n'));  // one line
  send_json(res, {{"error", line}}, status);
}

// The host of a Host header ("127.0.0.1:8080" -> 127.0.0.1, "[::1]:8080" -> ::1), lowercase.
std::string host_name(const std::string& header) {
  std::string h = header;
  if (!h.empty() && h[0] == '[') {
    const size_t end = h.find(']');
    h = end == std::string::npos ? h : h.substr(1, end - 1);
  } else if (const size_t colon = h.rfind(':'); colon != std::string::npos) {
    h = h.substr(0, colon);
  }
  std::transform(h.begin(), h.end(), h.begin(), [](unsigned char c) { return std::tolower(c); });
  return h;
}

bool ip_literal(const std::string& h) {
  unsigned char buf[sizeof(in6_addr)];
  return inet_pton(AF_INET, h.c_str(), buf) == 1 || inet_pton(AF_INET6, h.c_str(), buf) == 1;
}

// DNS rebinding names the server by the attacker's domain: a request must name it by an IP
// address, localhost (or a name under .localhost), or the --host it was given.
bool allowed_host(const std::string& header, const std::string& served) {
  const std::string h = host_name(header);
  const std::string local = ".localhost";
  return !h.empty() && (h == "localhost" || ip_literal(h) || h == host_name(served) ||
                        (h.size() > local.size() && h.ends_with(local)));
}

// The media type of a Content-Type header, lowercase, without parameters.
std::string media_type(const std::string& content_type) {
  std::string t = content_type.substr(0, content_type.find(';'));
  while (!t.empty() && t.back() == ' ') t.pop_back();
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return std::tolower(c); });
  return t;
}

// A query parameter that must be a whole integer ("12abc" is not 12).
int64_t integer_param(const httplib::Request& req, const char* key, int64_t fallback) {
  if (!req.has_param(key)) return fallback;
  const std::string v = req.get_param_value(key);
  int64_t x = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (v.empty() || ec != std::errc() || end != v.data() + v.size())
    throw BadInput(std::string(key) + " must be an integer");
  return x;
}

// The checkpoints loaded so far, by (run, checkpoint folder): at most `capacity`, the least
// recently used dropped first (a request still using it keeps it alive). A checkpoint is read
// once: requests for one being loaded wait for that load alone; every other checkpoint answers.
class ModelCache {
 public:
  ModelCache(size_t capacity, std::optional<Precision> precision)
      : capacity_(capacity), precision_(precision) {}

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
    const std::shared_ptr<Slot> slot = slot_for(key);
    std::lock_guard<std::mutex> loading(slot->mu);  // this checkpoint only
    if (!slot->model) {
      try {
        if (before_load()) before_load()(key);
        slot->model = std::make_shared<Model>(run.dir.string(), name, precision_);
      } catch (...) {
        forget(key, slot);  // the next request tries again
        throw;
      }
    }
    return slot->model;
  }

 private:
  struct Slot {
    std::mutex mu;  // held while the checkpoint loads
    std::shared_ptr<Model> model;
  };

  std::shared_ptr<Slot> slot_for(const std::string& key) {
    std::lock_guard<std::mutex> hold(mu_);  // held for the list only, never for a load
    for (auto it = lru_.begin(); it != lru_.end(); ++it)
      if (it->first == key) {
        lru_.splice(lru_.begin(), lru_, it);
        return it->second;
      }
    lru_.emplace_front(key, std::make_shared<Slot>());
    if (lru_.size() > capacity_) lru_.pop_back();
    return lru_.front().second;
  }

  void forget(const std::string& key, const std::shared_ptr<Slot>& slot) {
    std::lock_guard<std::mutex> hold(mu_);
    lru_.remove_if([&](const auto& e) { return e.first == key && e.second == slot; });
  }

  size_t capacity_;
  std::optional<Precision> precision_;
  std::mutex mu_;
  std::list<std::pair<std::string, std::shared_ptr<Slot>>> lru_;
};

// A served file, opened without blocking (a regular file only, within kMaxServedFile), sent
// kStreamChunk bytes at a time: an answer holds one chunk, never the file. The size is the
// file's when opened; a file that gets shorter meanwhile ends the answer early (the
// connection closes rather than send other bytes than the length promised).
void stream_file(httplib::Response& res, const std::string& path, const char* type) {
  auto file = std::make_shared<const run::RunFile>(path, "served file");
  if (file->size() > kMaxServedFile)
    throw BadInput(path + ": " + bytes_text(file->size()) + ", more than the " +
                   bytes_text(kMaxServedFile) + " a served file may hold");
  res.set_content_provider(static_cast<size_t>(file->size()), type,
                           [file](size_t offset, size_t length, httplib::DataSink& sink) {
                             const std::string chunk =
                                 file->read(offset, std::min(length, kStreamChunk));
                             return !chunk.empty() && sink.write(chunk.data(), chunk.size());
                           });
}

// The connections' bounds, with the body bound that httplib answers 413 past.
ConnectionLimits connection_limits(const ServeOptions& o) {
  ConnectionLimits l = o.connections;
  l.max_body_bytes = o.max_body_bytes;
  return l;
}

// A request body: JSON within the body bound (httplib's) and kMaxJsonDepth levels.
json parse_body(const httplib::Request& req) {
  std::string why;
  std::optional<json> j = try_parse_json(req.body, why, {kMaxJsonDepth, req.body.size()});
  if (!j && too_deep(why)) throw BadInput("the request body is " + why);
  if (!j) throw BadInput("the request body is not valid JSON");
  if (!j->is_object()) throw BadInput("the request body must be a JSON object");
  return std::move(*j);
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

// The heads a request removes: "ablate": "L.H,..." (inspect/heads.hpp); absent: none.
std::string ablation(const json& body) { return field<std::string>(body, "ablate", ""); }

class Server {
 public:
  explicit Server(const ServeOptions& o)
      : opts_(o),
        runs_(served_runs(o.runs)),
        models_(static_cast<size_t>(o.max_loaded_models), o.precision),
        questions_(o.queue),
        http_(connection_limits(o)) {}

  // Binds host:port (0: any free port); the chosen port.
  int bind() {
    http_.set_payload_max_length(static_cast<size_t>(opts_.max_body_bytes));
    http_.set_default_headers({{"X-Content-Type-Options", "nosniff"}});
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
  bool listen() { return http_.serve(); }
  // Every question running or waiting is cancelled at its next pass boundary (or poll of its
  // queue), and every connection closed: the server stops within one pass.
  void stop() {
    stopping_ = true;
    questions_.wake_all();
    http_.stop_all();
  }

 private:
  const ServedRun& run_named(const std::string& name) const {
    for (const ServedRun& r : runs_)
      if (r.name == name) return r;
    throw NotFound("no run named '" + name + "' is served");
  }

  // Wraps a handler: its errors become one-line JSON answers (400 bad input, 404 not found,
  // 503 a full queue, with Retry-After; 500 anything else) instead of reaching the connection.
  httplib::Server::Handler guarded(
      std::function<void(const httplib::Request&, httplib::Response&)> h) {
    return [h](const httplib::Request& req, httplib::Response& res) {
      try {
        h(req, res);
      } catch (const Busy& e) {
        res.set_header("Retry-After", std::to_string(e.retry_after));
        send_error(res, 503, e.what());
      } catch (const BadInput& e) {
        send_error(res, 400, e.what());
      } catch (const NotFound& e) {
        send_error(res, 404, e.what());
      } catch (const Error& e) {
        send_error(res, 400, e.what());  // the library refused the input or the checkpoint
      } catch (const std::exception& e) {
        send_error(res, 500, e.what());
      } catch (...) {
        send_error(res, 500, "internal error");
      }
    };
  }

  // Before any route, and before a body is read: the Host must name this server (DNS
  // rebinding), an Origin must be this server's (another site's page), a POST must say
  // application/json (a cross-site form or text/plain POST needs no preflight).
  httplib::Server::HandlerResponse refuse_foreign(const httplib::Request& req,
                                                  httplib::Response& res) const {
    auto refuse = [&](int status, const std::string& why) {
      send_error(res, status, why);
      return httplib::Server::HandlerResponse::Handled;
    };
    const std::string host = req.get_header_value("Host");
    if (!allowed_host(host, opts_.host))
      return refuse(403, "Host '" + host + "' is not this server's address (" + opts_.host +
                             " or localhost)");
    if (req.has_header("Origin") && req.get_header_value("Origin") != "http://" + host)
      return refuse(403, "requests from another site (Origin " + req.get_header_value("Origin") +
                             ") are refused");
    if (req.method == "POST" &&
        media_type(req.get_header_value("Content-Type")) != "application/json")
      return refuse(415, "a POST body must be JSON, sent as Content-Type: application/json (got '" +
                             req.get_header_value("Content-Type") + "')");
    if (req.method != "GET" && req.method != "POST" && req.method != "HEAD")
      return refuse(405, "method " + req.method + " is not served");
    return httplib::Server::HandlerResponse::Unhandled;
  }

  std::shared_ptr<Model> model_for(const ServedRun& run, const json& body) {
    if (run.saturation) throw BadInput(run.name + " is a saturation study, not a trained model");
    return models_.get(run, field<std::string>(body, "checkpoint", "best"));
  }

  // A question's token (core/cancel.hpp), asked at each of its pass boundaries on its thread:
  // cancelled once its client has gone (the socket this thread answers) or the server stops.
  // Each boundary also sets the thread's compute threads: --threads while the question is the
  // only one computing, one beside others (two requests' OpenMP teams on the same cores make
  // each wait for threads that another holds).
  std::function<void(CancelToken&)> question_poll() {
    const int sock = answering_socket();
    return [this, sock](CancelToken& t) {
      if (stopping_)
        t.cancel("the server is stopping");
      else if (sock >= 0 && client_gone(sock))
        t.cancel("the client closed the connection");
      set_thread_team(questions_.running() > 1 ? 1 : opts_.threads);
    };
  }

  // One question's place in its run's lane (queue.hpp) and its token; waits for the place (a
  // Busy when the lane is full, Cancelled when the client leaves or the server stops first).
  struct Question {
    Question(Server& s, const ServedRun& run, Lane lane)
        : token(s.question_poll()), place(s.questions_.enter(run.name, lane, token)) {
      token.check();  // the thread's compute threads, before any pass
    }
    CancelToken token;
    std::unique_ptr<Scheduler::Ticket> place;
  };

  // A question stopped at a pass boundary: counted for GET .../queue, one line on stderr.
  void cancelled(const ServedRun& run, const char* what, const Cancelled& e) {
    questions_.count_cancelled(run.name);
    std::fprintf(stderr, "qkv serve: %s/%s cancelled: %s\n", run.name.c_str(), what, e.what());
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
    // The head table's columns (the score registry's among them), for the page's head panels
    // before any table is asked for: the probe records name scores, this says what they are.
    http_.Get("/api/head_columns", guarded([](const auto&, auto& res) {
                send_json(res, json{{"columns", inspect::head_columns_json()}});
              }));
    http_.Get(R"(/api/runs/([^/]+)/metrics)", guarded([this](const auto& req, auto& res) {
                const ServedRun& run = run_named(req.matches[1]);
                send_json(res, read_metrics(run, integer_param(req, "offset", 0),
                                            integer_param(req, "since", -1)));
              }));
    http_.Get(R"(/api/runs/([^/]+)/queue)", guarded([this](const auto& req, auto& res) {
                send_json(res, questions_.stats(run_named(req.matches[1]).name));
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
                stream_file(res, path->string(), type);
              }));
    model_routes();
    generate_route();
    http_.Get(R"(/|/app\.js|/panels\.js|/head_curves\.js|/style\.css)",
              guarded([](const auto& req, auto& res) {
                const Asset* a = find_asset(req.path);
                res.set_content(std::string(a->bytes), std::string(a->content_type).c_str());
                // The page runs its own script and talks only to this server.
                res.set_header(
                    "Content-Security-Policy",
                    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
                    "connect-src 'self'");
              }));
    // Browsers ask for an icon; there is none (an empty answer, not an error in the console).
    http_.Get("/favicon.ico", [](const auto&, auto& res) { res.status = 204; });
    // Answers httplib makes itself (no route, a body too large, a malformed request); outside
    // the routes' guard, so guarded here: nothing may escape into the connection's thread.
    http_.set_error_handler(guarded([this](const auto& req, auto& res) {
      if (!res.body.empty()) return;  // a handler's own JSON answer
      if (res.status == 413)
        send_error(res, 413,
                   "the request body is larger than the server's limit of " +
                       bytes_text(static_cast<uint64_t>(opts_.max_body_bytes)));
      else if (res.status == 404)
        send_error(res, 404, "not found: " + req.path);
      else
        send_error(res, res.status, "HTTP " + std::to_string(res.status));
    }));
    // An exception that escaped a handler anyway: a JSON 500, never its text in a header.
    http_.set_exception_handler([](const auto&, auto& res, std::exception_ptr) {
      res.headers.erase("EXCEPTION_WHAT");
      send_error(res, 500, "internal error");
    });
    http_.set_pre_routing_handler(
        [this](const auto& req, auto& res) { return refuse_foreign(req, res); });
  }

  // The questions to a checkpoint (model.hpp), each with its body's "ablate".
  void model_routes() {
    post_model("translate", Lane::short_work, [this](Model& m, const json& b, auto& res) {
      send_json(res, m.translate(field<std::string>(b, "text", ""), field<int64_t>(b, "beam", 4),
                                 opts_.limits, ablation(b)));
    });
    post_model("attention", Lane::short_work, [this](Model& m, const json& b, auto& res) {
      send_json(res, m.attention(field<std::string>(b, "text", ""), opts_.limits, ablation(b),
                                 field<int64_t>(b, "k", 0)));
    });
    post_model("next", Lane::short_work, [this](Model& m, const json& b, auto& res) {
      send_json(res, m.next_tokens(field<std::string>(b, "text", ""), field<int64_t>(b, "k", 5),
                                   opts_.limits, ablation(b)));
    });
    post_model("heads", Lane::long_work, [this](Model& m, const json& b, auto& res) {
      HeadsRequest q;
      q.split = field<std::string>(b, "split", q.split);
      q.batches = field<int64_t>(b, "batches", q.batches);
      q.probes = field<int64_t>(b, "probes", q.probes);
      q.seed = field<uint64_t>(b, "seed", q.seed);
      send_json(res, m.heads(q, opts_.limits, ablation(b)));
    });
    post_model("lens", Lane::short_work, [this](Model& m, const json& b, auto& res) {
      LensRequest q;
      q.text = field<std::string>(b, "text", "");
      q.target = field<std::string>(b, "target", "");
      q.top = field<int64_t>(b, "top", q.top);
      send_json(res, m.lens(q, opts_.limits, ablation(b)));
    });
  }

  template <class F>
  void post_model(const char* what, Lane lane, F f) {
    http_.Post(std::string(R"(/api/runs/([^/]+)/)") + what,
               guarded([this, f, what, lane](const httplib::Request& req, httplib::Response& res) {
                 const ServedRun& run = run_named(req.matches[1]);
                 const json body = parse_body(req);
                 try {
                   Question q(*this, run, lane);
                   const CancelScope scope(q.token);
                   f(*model_for(run, body), body, res);
                 } catch (const Cancelled& e) {  // the client has gone: the answer goes nowhere
                   cancelled(run, what, e);
                   send_error(res, 503, std::string("cancelled: ") + e.what());
                 }
               }));
  }

  // A language model's sample, streamed: one JSON line per piece of text as it is made
  // ({"text": "..."}), then {"done": true}. Bad requests are refused before the stream starts,
  // and so is a full lane (a 503): the question waits for its place before the answer's
  // status is sent, and keeps it while it streams.
  void generate_route() {
    http_.Post(R"(/api/runs/([^/]+)/generate)", guarded([this](const auto& req, auto& res) {
                 const ServedRun& run = run_named(req.matches[1]);
                 const json b = parse_body(req);
                 std::shared_ptr<Question> question;
                 try {
                   question = std::make_shared<Question>(*this, run, Lane::long_work);
                 } catch (const Cancelled& e) {
                   cancelled(run, "generate", e);
                   return send_error(res, 503, std::string("cancelled: ") + e.what());
                 }
                 std::shared_ptr<Model> m = model_for(run, b);
                 SampleRequest q;
                 q.prompt = field<std::string>(b, "prompt", "");
                 q.tokens = field<int64_t>(b, "tokens", q.tokens);
                 q.temperature = field<double>(b, "temperature", q.temperature);
                 q.top_k = field<int64_t>(b, "top_k", q.top_k);
                 q.top_p = field<double>(b, "top_p", q.top_p);
                 q.seed = field<uint64_t>(b, "seed", q.seed);
                 q.ablate = ablation(b);
                 m->check_sample(q, opts_.limits);
                 const ServedRun* on = &run;
                 res.set_chunked_content_provider(
                     "application/x-ndjson",
                     [m, q, question, on, this](size_t, httplib::DataSink& sink) {
                       const CancelScope scope(question->token);
                       try {
                         m->generate(q, opts_.limits, [&](const std::string& piece) {
                           const std::string line = dump_json({{"text", piece}}) + "\n";
                           return sink.write(line.data(), line.size());
                         });
                         const std::string end = json{{"done", true}}.dump() + "\n";
                         sink.write(end.data(), end.size());
                       } catch (const Cancelled& e) {  // nobody to tell: close the connection
                         cancelled(*on, "generate", e);
                         return false;
                       } catch (const std::exception& e) {  // mid-stream: the last line says why
                         const std::string err = dump_json({{"error", e.what()}}) + "\n";
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
  Scheduler questions_;
  std::atomic<bool> stopping_{false};
  HttpServer http_;
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
  // BLAS's process-wide count, once, before any worker starts; each question then sets only its
  // own thread's team (core/parallel.hpp: set_thread_team).
  if (o.threads > 0) set_num_threads(o.threads);
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

namespace testing {
void set_before_load(std::function<void(const std::string&)> hook) {
  before_load() = std::move(hook);
}
}  // namespace testing

}  // namespace qkv::serve
