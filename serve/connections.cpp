// The connection loop of `qkv serve` (see connections.hpp).
#include "serve/connections.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace qkv::serve {

namespace {

using Clock = std::chrono::steady_clock;

// "127.0.0.1" / "::1" and the port of a socket address.
void address_of(const sockaddr_storage& a, std::string& ip, int& port) {
  char buf[INET6_ADDRSTRLEN] = "";
  if (a.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&a);
    inet_ntop(AF_INET, &v4->sin_addr, buf, sizeof buf);
    port = ntohs(v4->sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&a);
    inet_ntop(AF_INET6, &v6->sin6_addr, buf, sizeof buf);
    port = ntohs(v6->sin6_port);
  }
  ip = buf;
}

// Waits until sock is ready for `events` or `wait` has passed; false on timeout or error.
bool wait_for(int sock, short events, std::chrono::milliseconds wait) {
  pollfd p{sock, events, 0};
  for (;;) {
    const int ms = static_cast<int>(std::max<int64_t>(0, wait.count()));
    const Clock::time_point start = Clock::now();
    const int n = ::poll(&p, 1, ms);
    if (n > 0) return (p.revents & (events | POLLHUP | POLLERR)) != 0;
    if (n == 0) return false;
    if (errno != EINTR) return false;
    wait -= std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  }
}

// One connection as httplib's request parser sees it: reads fail past the request's deadline
// or byte bound, writes past the write timeout.
class BoundedStream : public httplib::Stream {
 public:
  BoundedStream(int sock, const ConnectionLimits& lim) : sock_(sock), lim_(lim) {}

  void start_request() {
    deadline_ = Clock::now() + lim_.request_deadline;
    bytes_left_ = lim_.max_request_bytes;
  }
  bool is_readable() const override {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now());
    return left.count() > 0 && wait_for(sock_, POLLIN, left);
  }
  bool is_writable() const override { return wait_for(sock_, POLLOUT, lim_.write_timeout); }
  ssize_t read(char* ptr, size_t size) override {
    if (bytes_left_ <= 0 || !is_readable()) return -1;
    size = std::min(size, static_cast<size_t>(bytes_left_));
    ssize_t n;
    do n = ::recv(sock_, ptr, size, 0);
    while (n < 0 && errno == EINTR);
    if (n > 0) bytes_left_ -= n;
    return n;
  }
  ssize_t write(const char* ptr, size_t size) override {
    if (!is_writable()) return -1;
    ssize_t n;
    do n = ::send(sock_, ptr, size, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    return n;
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    if (::getpeername(sock_, reinterpret_cast<sockaddr*>(&a), &len) == 0) address_of(a, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    if (::getsockname(sock_, reinterpret_cast<sockaddr*>(&a), &len) == 0) address_of(a, ip, port);
  }
  socket_t socket() const override { return sock_; }

 private:
  int sock_;
  const ConnectionLimits& lim_;
  Clock::time_point deadline_{};
  int64_t bytes_left_ = 0;
};

// Closes a connection without resetting it: what the client sent and the server did not read
// (the rest of a refused request) is read and dropped for a moment first, since closing with
// unread data sends a reset, which can make the client lose the answer just sent.
void close_gently(int sock, bool drain) {
  ::shutdown(sock, SHUT_WR);
  char drop[4096];
  const Clock::time_point until = Clock::now() + std::chrono::milliseconds(200);
  while (drain && Clock::now() < until &&
         wait_for(sock, POLLIN,
                  std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now())))
    if (::recv(sock, drop, sizeof drop, 0) <= 0) break;
  ::close(sock);
}

}  // namespace

bool HttpServer::admit(int sock, const std::string& client) {
  std::lock_guard<std::mutex> hold(mu_);
  if (stopping_ || per_client_[client] >= lim_.max_per_client) return false;
  ++per_client_[client];
  open_.insert(sock);
  return true;
}

void HttpServer::release(int sock, const std::string& client) {
  std::lock_guard<std::mutex> hold(mu_);
  open_.erase(sock);
  if (--per_client_[client] <= 0) per_client_.erase(client);
}

bool HttpServer::stopping() const {
  std::lock_guard<std::mutex> hold(mu_);
  return stopping_;
}

void HttpServer::stop_all() {
  stop();
  std::lock_guard<std::mutex> hold(mu_);
  stopping_ = true;
  for (int sock : open_) ::shutdown(sock, SHUT_RDWR);  // blocked reads and writes return now
}

bool HttpServer::process_and_close_socket(socket_t sock) {
  BoundedStream strm(sock, lim_);
  std::string client;
  int port = 0;
  strm.get_remote_ip_and_port(client, port);
  bool ret = false;
  if (!admit(sock, client)) {
    const std::string body = R"({"error":"too many connections from )" + client + " (at most " +
                             std::to_string(lim_.max_per_client) + " at once)\"}";
    const std::string answer =
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
        "Connection: close\r\nContent-Length: " +
        std::to_string(body.size()) + "\r\n\r\n" + body;
    if (!stopping() && wait_for(sock, POLLOUT, std::chrono::milliseconds(200)))
      (void)!::send(sock, answer.data(), answer.size(), MSG_NOSIGNAL);
  } else {
    for (int left = lim_.max_requests_per_connection; left > 0 && !stopping(); --left) {
      if (!wait_for(sock, POLLIN, lim_.idle)) break;  // idle, closed, or shut down by stop
      char probe;
      if (::recv(sock, &probe, 1, MSG_PEEK | MSG_DONTWAIT) <= 0) break;  // the client left
      strm.start_request();
      bool closed = false;
      ret = process_request(strm, left == 1, closed, nullptr);
      if (!ret || closed) break;
    }
    release(sock, client);
  }
  close_gently(sock, !stopping());
  return ret;
}

}  // namespace qkv::serve
