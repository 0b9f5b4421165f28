// The server's connections, under bounds a slow or hostile client cannot get around.
//
// cpp-httplib (Debian 12: 0.11.4) runs one connection per pool thread and bounds only each
// read (read timeout, 5 s): a client that sends one header line every 2 s keeps its thread for
// as long as it likes, so as many such clients as threads stop the server, and stop() waits
// for them. HttpServer keeps httplib's parsing and routing and replaces its connection loop:
//  - each request (request line, headers and body) must arrive within a deadline, and within a
//    byte bound, counted from its first byte; past either the connection is closed;
//  - one client address holds at most max_per_client connections at once; more are answered
//    503 at once and closed;
//  - stop() shuts every open connection down, so it returns as soon as the handlers running
//    return, whatever the clients do.
#pragma once
#include <httplib.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>

namespace qkv::serve {

struct ConnectionLimits {
  std::chrono::milliseconds request_deadline{10000};  // request line + headers + body
  std::chrono::milliseconds idle{5000};               // between requests of one connection
  std::chrono::milliseconds write_timeout{5000};      // each write of an answer
  int64_t max_request_bytes = (64 + 64) * 1024;       // headers + the largest body
  int max_per_client = 32;                            // open connections of one address
  int max_requests_per_connection = 100;
};

class HttpServer : public httplib::Server {
 public:
  explicit HttpServer(const ConnectionLimits& lim) : lim_(lim) {}
  // httplib's stop(), then every open connection shut down (their reads and writes fail now).
  void stop_all();

 private:
  bool process_and_close_socket(socket_t sock) override;
  // Registers sock under its client's address; false when that address is at its bound or
  // the server is stopping.
  bool admit(int sock, const std::string& client);
  void release(int sock, const std::string& client);
  bool stopping() const;

  ConnectionLimits lim_;
  mutable std::mutex mu_;
  bool stopping_ = false;
  std::set<int> open_;
  std::map<std::string, int> per_client_;
};

}  // namespace qkv::serve
