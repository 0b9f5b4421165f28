// The server's connections, under bounds a slow or hostile client cannot get around.
//
// cpp-httplib (Debian 12: 0.11.4) gives each connection a thread of its pool for as long as
// the connection lasts, and bounds only each read (5 s): a client that sends one header line
// every 2 s keeps its thread for as long as it likes, so as many such clients as threads stop
// the server, and stop() waits for them. A bound per client address does not help either: any
// local program shares 127.0.0.1 with the user's browser.
//
// So HttpServer keeps httplib's parsing and routing and replaces how connections are held:
//  - a gate (one thread, poll) holds every connection while its request arrives and between
//    requests: a connection there costs its descriptor and the bytes it has sent, no thread;
//  - only a complete request (its head, and its body when Content-Length gives it) goes to a
//    worker, which answers it with httplib's process_request and hands the connection back to
//    the gate for the next request (keep-alive);
//  - deadlines close a connection that is too slow: the idle time before a request's first
//    byte, the head (request line and headers) from its first byte, the body from the end of
//    the head; a head larger than its bound is answered 431, and a connection closed;
//  - at most max_connections are open at once; past that, the connection that has waited
//    longest in the gate is closed to admit the new one (a slow client loses its place, never
//    a new one), and only when every open connection is being answered is the new one 503;
//  - an answer may keep a worker waiting on its client for write_budget in all (a client that
//    reads slowly), each write for write_timeout;
//  - stop_all() closes the gate's connections and shuts down those being answered, so the
//    server stops as soon as the handlers running return, whatever the clients do;
//  - a handler may ask whether its client is still there (answering_socket, client_gone): the
//    server cancels a question whose client has gone at its next pass (serve/queue.hpp).
#pragma once
#include <httplib.h>

#include <chrono>
#include <cstdint>
#include <memory>

namespace qkv::serve {

struct ConnectionLimits {
  std::chrono::milliseconds idle{5000};            // before a request's first byte
  std::chrono::milliseconds head_deadline{5000};   // request line and headers, from first byte
  std::chrono::milliseconds body_deadline{10000};  // the body, from the end of the head
  std::chrono::milliseconds write_timeout{5000};   // each write of an answer
  std::chrono::milliseconds write_budget{30000};   // an answer's writes, waiting in all
  int64_t max_head_bytes = 16 * 1024;              // request line and headers
  int64_t max_body_bytes = 64 * 1024;              // a body the gate reads before a worker
  int max_connections = 1024;  // open at once (lowered to what RLIMIT_NOFILE leaves room for)
  int workers = 64;            // requests answered at once
  int max_requests_per_connection = 100;
};

// The socket of the request the calling thread answers: inside a handler or a content provider
// of an HttpServer; -1 on any other thread.
int answering_socket();
// Whether the client of sock has gone, without waiting: it closed the connection, or its
// sending side (an HTTP client that stops sending before its answer is taken as gone, as nginx
// takes it), or the connection failed or was shut down (stop_all). Bytes of a next request
// already sent (pipelining) are no sign of leaving.
bool client_gone(int sock);

class HttpServer : public httplib::Server {
 public:
  explicit HttpServer(const ConnectionLimits& lim);
  ~HttpServer() override;
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // listen_after_bind() with the gate and the workers running; returns once stopped, when the
  // handlers that were running have returned. What listen_after_bind returns.
  bool serve();
  // httplib's stop(), then every open connection closed or shut down (their reads and writes
  // fail now). Safe from any thread, also before serve() has started.
  void stop_all();

 private:
  struct Impl;
  // The accept loop's connection: handed to the gate at once.
  bool process_and_close_socket(socket_t sock) override;
  // httplib's parsing, routing and answer for one request on strm (a worker's).
  bool answer(httplib::Stream& strm, bool last, bool& closed);

  std::unique_ptr<Impl> impl_;
};

}  // namespace qkv::serve
