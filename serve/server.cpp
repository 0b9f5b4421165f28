// `qkv serve` (see server.hpp): routes and signals (the HTTP checks: http.hpp; the loaded
// checkpoints: model_cache.hpp).
#include "serve/server.hpp"

#include <httplib.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <thread>

#include "core/cancel.hpp"
#include "core/error.hpp"
#include "core/input_file.hpp"
#include "core/parallel.hpp"
#include "inspect/head_table.hpp"
#include "serve/assets.hpp"
#include "serve/attribution.hpp"
#include "serve/connections.hpp"
#include "serve/http.hpp"
#include "serve/model_cache.hpp"
#include "serve/queue.hpp"
#include "serve/run_files.hpp"

using nlohmann::json;

namespace qkv::serve {

namespace {

// The connections' bounds, with the body bound that httplib answers 413 past.
ConnectionLimits connection_limits(const ServeOptions& o) {
  ConnectionLimits l = o.connections;
  l.max_body_bytes = o.max_body_bytes;
  return l;
}

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

  // The checkpoint a request names ("checkpoint": best, latest or step-N), read before the
  // question takes its place (BadInput for a wrong type or name, or a run with no model).
  static std::string checkpoint_of(const ServedRun& run, const json& body) {
    if (run.saturation) throw BadInput(run.name + " is a saturation study, not a trained model");
    const auto which = field<std::string>(body, "checkpoint", "best");
    ModelCache::check_name(which);
    return which;
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
    http_.Get(R"(/|/app\.js|/panels\.js|/head_curves\.js|/attribution\.js|/style\.css)",
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

  // The questions to a checkpoint (model.hpp), each with its body's "ablate". Each route reads
  // its fields first (a malformed one is a 400 even when the lane is full) and returns what to
  // ask the model once the question has its place.
  void model_routes() {
    post_model("translate", Lane::short_work, [this](const json& b) {
      const auto text = field<std::string>(b, "text", "");
      const auto beam = field<int64_t>(b, "beam", 4);
      return [=, this](Model& m, const std::string& cut) {
        return m.translate(text, beam, opts_.limits, cut);
      };
    });
    post_model("classify", Lane::short_work, [this](const json& b) {
      const auto text = field<std::string>(b, "text", "");
      return [=, this](Model& m, const std::string& cut) {
        return m.classify(text, opts_.limits, cut);
      };
    });
    post_model("attention", Lane::short_work, [this](const json& b) {
      const auto text = field<std::string>(b, "text", "");
      const auto k = field<int64_t>(b, "k", 0);
      return [=, this](Model& m, const std::string& cut) {
        return m.attention(text, opts_.limits, cut, k);
      };
    });
    post_model("next", Lane::short_work, [this](const json& b) {
      const auto text = field<std::string>(b, "text", "");
      const auto k = field<int64_t>(b, "k", 5);
      return [=, this](Model& m, const std::string& cut) {
        return m.next_tokens(text, k, opts_.limits, cut);
      };
    });
    post_model("heads", Lane::long_work, [this](const json& b) {
      HeadsRequest q;
      q.split = field<std::string>(b, "split", q.split);
      q.batches = field<int64_t>(b, "batches", q.batches);
      q.probes = field<int64_t>(b, "probes", q.probes);
      q.seed = field<uint64_t>(b, "seed", q.seed);
      return [=, this](Model& m, const std::string& cut) { return m.heads(q, opts_.limits, cut); };
    });
    post_model("lens", Lane::short_work, [this](const json& b) {
      LensRequest q;
      q.text = field<std::string>(b, "text", "");
      q.target = field<std::string>(b, "target", "");
      q.top = field<int64_t>(b, "top", q.top);
      return [=, this](Model& m, const std::string& cut) { return m.lens(q, opts_.limits, cut); };
    });
    attribution_routes();
  }

  // Why an output (serve/attribution.hpp): token attribution and attribution patching. Their
  // passes are many (integrated gradients' steps, a pass per exact patch), bounded by the
  // limits' work: the long lane, as the head table's.
  void attribution_routes() {
    post_model("attribute", Lane::long_work, [this](const json& b) {
      AttributeRequest q;
      q.text = field<std::string>(b, "text", "");
      q.method = field<std::string>(b, "method", q.method);
      q.target = field<std::string>(b, "target", "");
      q.contrast = field<std::string>(b, "contrast", "");
      q.tokens = field<int64_t>(b, "tokens", q.tokens);
      q.steps = field<int64_t>(b, "steps", q.steps);
      return [=, this](Model& m, const std::string& cut) {
        return attribute(m, q, opts_.limits, cut);
      };
    });
    post_model("patch", Lane::long_work, [this](const json& b) {
      PatchRequest q;
      q.clean = field<std::string>(b, "clean", "");
      q.corrupt = field<std::string>(b, "corrupt", "");
      q.check = field<int64_t>(b, "check", q.check);
      return [=, this](Model& m, const std::string& cut) { return patch(m, q, opts_.limits, cut); };
    });
  }

  // read(body) checks the request's fields and returns the question, a json(Model&, ablate)
  // asked once the question has its place in the run's lane.
  template <class Read>
  void post_model(const char* what, Lane lane, Read read) {
    http_.Post(
        std::string(R"(/api/runs/([^/]+)/)") + what,
        guarded([this, read, what, lane](const httplib::Request& req, httplib::Response& res) {
          const ServedRun& run = run_named(req.matches[1]);
          const json body = parse_body(req);
          const auto ask = read(body);
          const std::string cut = ablation(body), checkpoint = checkpoint_of(run, body);
          try {
            Question q(*this, run, lane);
            const CancelScope scope(q.token);
            send_json(res, ask(*models_.get(run, checkpoint), cut));
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
                 SampleRequest q;
                 q.prompt = field<std::string>(b, "prompt", "");
                 q.tokens = field<int64_t>(b, "tokens", q.tokens);
                 q.temperature = field<double>(b, "temperature", q.temperature);
                 q.top_k = field<int64_t>(b, "top_k", q.top_k);
                 q.top_p = field<double>(b, "top_p", q.top_p);
                 q.seed = field<uint64_t>(b, "seed", q.seed);
                 q.ablate = ablation(b);
                 const std::string checkpoint = checkpoint_of(run, b);
                 std::shared_ptr<Question> question;
                 try {
                   question = std::make_shared<Question>(*this, run, Lane::long_work);
                 } catch (const Cancelled& e) {
                   cancelled(run, "generate", e);
                   return send_error(res, 503, std::string("cancelled: ") + e.what());
                 }
                 std::shared_ptr<Model> m = models_.get(run, checkpoint);
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
