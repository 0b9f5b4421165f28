// The connections of `qkv serve`: the gate, the workers and their streams (see connections.hpp).
#include "serve/connections.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <limits>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace qkv::serve {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr size_t kUnknown = std::numeric_limits<size_t>::max();

thread_local int t_answering = -1;  // answering_socket()

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

milliseconds until(Clock::time_point t) {
  return std::max(milliseconds(0), std::chrono::duration_cast<milliseconds>(t - Clock::now()));
}

// Waits until sock is ready for `events` or `wait` has passed; false on timeout or error.
bool wait_for(int sock, short events, milliseconds wait) {
  pollfd p{sock, events, 0};
  const Clock::time_point end = Clock::now() + wait;
  for (;;) {
    const int n = ::poll(&p, 1, static_cast<int>(until(end).count()));
    if (n > 0) return (p.revents & (events | POLLHUP | POLLERR)) != 0;
    if (n == 0 || errno != EINTR) return false;
  }
}

// Sends what the socket takes now (never waits): a short answer before closing.
void send_now(int sock, const std::string& bytes) {
  (void)!::send(sock, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

// A complete answer of one line of JSON, closing the connection.
std::string plain_answer(const char* status, const std::string& message) {
  const std::string body = "{\"error\":\"" + message + "\"}";
  return std::string("HTTP/1.1 ") + status +
         "\r\nContent-Type: application/json\r\nX-Content-Type-Options: nosniff\r\n"
         "Connection: close\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

// Closes a connection without resetting it: what the client sent and the server did not read
// (the rest of a refused request) is read and dropped for a moment first, since closing with
// unread data sends a reset, which can make the client lose the answer just sent.
void close_gently(int sock, bool drain) {
  ::shutdown(sock, SHUT_WR);
  char drop[4096];
  const Clock::time_point end = Clock::now() + milliseconds(200);
  while (drain && Clock::now() < end && wait_for(sock, POLLIN, until(end)))
    if (::recv(sock, drop, sizeof drop, MSG_DONTWAIT) <= 0) break;
  ::close(sock);
}

// The value of header `name` (lowercase) in a request head; nullopt when absent.
std::optional<std::string_view> header_in(std::string_view head, std::string_view name) {
  for (size_t at = head.find("\r\n"); at != std::string_view::npos && at + 2 < head.size();) {
    const size_t start = at + 2, end = head.find("\r\n", start);
    const std::string_view line = head.substr(start, end - start);
    const size_t colon = line.find(':');
    if (colon == name.size() &&
        std::equal(name.begin(), name.end(), line.begin(), [](char a, char b) {
          return a == std::tolower(static_cast<unsigned char>(b));
        })) {
      std::string_view v = line.substr(colon + 1);
      while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
      while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
      return v;
    }
    at = end;
  }
  return std::nullopt;
}

// The bytes of the whole request whose head is `head` (its length included): head plus
// Content-Length. kUnknown when a worker must read the body itself (chunked) or httplib answers
// without it (a length that is not a number, or larger than the bound: a 400 or a 413).
size_t request_length(std::string_view head, int64_t max_body) {
  if (header_in(head, "transfer-encoding")) return kUnknown;
  const std::optional<std::string_view> cl = header_in(head, "content-length");
  if (!cl) return head.size();
  size_t n = 0;
  if (cl->empty() || cl->size() > 12 ||
      !std::all_of(cl->begin(), cl->end(), [](char c) { return c >= '0' && c <= '9'; }))
    return kUnknown;
  for (const char c : *cl) n = n * 10 + static_cast<size_t>(c - '0');
  return n > static_cast<size_t>(max_body) ? kUnknown : head.size() + n;
}

}  // namespace

int answering_socket() { return t_answering; }

bool client_gone(int sock) {
  pollfd p{sock, POLLIN | POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0) return false;  // nothing (or EINTR: the next pass asks again)
  if (p.revents & (POLLERR | POLLHUP | POLLNVAL | POLLRDHUP)) return true;
  char byte;
  const ssize_t n = ::recv(sock, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

// One connection, in the gate or with a worker.
struct Connection {
  int fd = -1;
  std::string buf;             // received, not yet read by httplib
  Clock::time_point since;     // waiting since (accepted, or its last answer sent)
  Clock::time_point started;   // its request's first byte (since, while none)
  Clock::time_point head_end;  // its request's head complete
  size_t head = 0;             // the head's length once complete (0: not yet)
  size_t need = 0;             // the whole request's length once known (kUnknown: the body's
                               // length is the worker's to find)
  int requests = 0;            // answered on this connection
  bool gone = false;           // the client left, or its socket failed: closed as it is
  std::string refusal;         // an answer to send before closing it ("" none)

  explicit Connection(int sock) : fd(sock), since(Clock::now()), started(since) {}
  bool has_request() const { return !buf.empty(); }
  // When the gate closes it: the idle time, the head's or the body's deadline.
  Clock::time_point deadline(const ConnectionLimits& lim) const {
    if (!has_request()) return since + lim.idle;
    return head == 0 ? started + lim.head_deadline : head_end + lim.body_deadline;
  }
  // Takes the state of buf's request: true when it is complete enough for a worker; a head
  // past its bound sets the refusal.
  bool ready(const ConnectionLimits& lim);
  // Whether the gate closes it now: it left, was refused, or is past its deadline (then the
  // refusal says which).
  bool to_close(const ConnectionLimits& lim, Clock::time_point now);
};

bool Connection::ready(const ConnectionLimits& lim) {
  if (head == 0) {
    const size_t end = buf.find("\r\n\r\n");
    if ((end == std::string::npos ? buf.size() : end + 4) > static_cast<size_t>(lim.max_head_bytes))
      refusal = plain_answer("431 Request Header Fields Too Large",
                             "the request head is larger than the server's limit of " +
                                 std::to_string(lim.max_head_bytes / 1024) + " KiB");
    if (end == std::string::npos || !refusal.empty()) return false;
    head = end + 4, head_end = Clock::now();
    need = request_length(std::string_view(buf).substr(0, head), lim.max_body_bytes);
  }
  return need == kUnknown || buf.size() >= need;
}

bool Connection::to_close(const ConnectionLimits& lim, Clock::time_point now) {
  if (gone || !refusal.empty()) return true;
  if (deadline(lim) > now) return false;
  const auto secs = [](milliseconds t) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", static_cast<double>(t.count()) / 1000);
    return std::string(buf);
  };
  if (has_request() && head == 0)
    refusal =
        plain_answer("408 Request Timeout", "the request head did not arrive within " +
                                                secs(lim.head_deadline) + " s of its first byte");
  else if (has_request())
    refusal = plain_answer("408 Request Timeout", "the request body did not arrive within " +
                                                      secs(lim.body_deadline) + " s of its head");
  return true;
}

// A worker's stream over a connection: first the bytes the gate received, then the socket's,
// within the body deadline and bound; writes within the write timeout and budget.
class ConnectionStream : public httplib::Stream {
 public:
  ConnectionStream(Connection& c, const ConnectionLimits& lim)
      : c_(c),
        lim_(lim),
        read_until_(c.head_end + lim.body_deadline),
        write_left_(lim.write_budget) {}

  bool is_readable() const override {
    return at_ < c_.buf.size() || wait_for(c_.fd, POLLIN, until(read_until_));
  }
  bool is_writable() const override { return wait_writable(); }
  ssize_t read(char* ptr, size_t size) override {
    if (at_ < c_.buf.size()) {
      const size_t n = std::min(size, c_.buf.size() - at_);
      std::copy_n(c_.buf.data() + at_, n, ptr);
      at_ += n;
      return static_cast<ssize_t>(n);
    }
    if (read_ >= lim_.max_body_bytes || !wait_for(c_.fd, POLLIN, until(read_until_))) return -1;
    size = std::min(size, static_cast<size_t>(lim_.max_body_bytes - read_));
    ssize_t n;
    do n = ::recv(c_.fd, ptr, size, MSG_DONTWAIT);
    while (n < 0 && errno == EINTR);
    if (n > 0) read_ += n;
    return n;
  }
  ssize_t write(const char* ptr, size_t size) override {
    for (;;) {  // poll may call a socket writable that then takes nothing (EAGAIN): wait again
      if (!wait_writable()) return -1;
      const ssize_t n = ::send(c_.fd, ptr, size, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n >= 0 || (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)) return n;
    }
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    if (::getpeername(c_.fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) address_of(a, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    if (::getsockname(c_.fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) address_of(a, ip, port);
  }
  socket_t socket() const override { return c_.fd; }

  // What httplib has not read: the next request's first bytes (pipelined), for the gate.
  std::string rest() const { return c_.buf.substr(std::min(at_, c_.buf.size())); }

 private:
  // Waits for room to write, within the write timeout and what is left of the budget.
  bool wait_writable() const {
    const Clock::time_point start = Clock::now();
    const bool ok = write_left_.count() > 0 &&
                    wait_for(c_.fd, POLLOUT, std::min(lim_.write_timeout, write_left_));
    write_left_ -= std::chrono::duration_cast<milliseconds>(Clock::now() - start);
    return ok;
  }

  Connection& c_;
  const ConnectionLimits& lim_;
  size_t at_ = 0;     // into c_.buf
  int64_t read_ = 0;  // from the socket
  Clock::time_point read_until_;
  mutable milliseconds write_left_;
};

struct HttpServer::Impl {
  HttpServer& server;
  ConnectionLimits lim;
  std::mutex mu;  // everything below
  std::condition_variable work_ready;
  bool started = false, stopping = false;
  int open = 0;                                    // connections open, wherever they are
  std::vector<std::unique_ptr<Connection>> inbox;  // to the gate: new, or back from a worker
  std::deque<std::unique_ptr<Connection>> work;    // complete requests for the workers
  std::set<int> answering;                         // sockets a worker holds
  int wake = -1;                                   // eventfd: the gate's inbox has news
  std::thread gate;
  std::vector<std::thread> workers;

  Impl(HttpServer& s, const ConnectionLimits& l) : server(s), lim(l) {}

  void start();
  void join();
  void notify_gate() const {
    const uint64_t one = 1;
    (void)!::write(wake, &one, sizeof one);
  }
  void to_gate(std::unique_ptr<Connection> c) {
    {
      std::lock_guard<std::mutex> hold(mu);
      inbox.push_back(std::move(c));
    }
    notify_gate();
  }
  void closed(int sock, bool drain) {
    if (drain)
      close_gently(sock, true);
    else
      ::close(sock);
    std::lock_guard<std::mutex> hold(mu);
    --open;
  }

  void gate_loop();
  void admit(std::vector<std::unique_ptr<Connection>>& waiting);
  void read_from(Connection& c);
  void worker_loop();
  bool answer_one(Connection& c);
};

namespace {

// Descriptors for max_connections and what the process needs besides (run files, models'
// files, pipes): the soft limit is raised towards the hard one, and the bound lowered to fit
// what is left. Were accept() to fail for lack of descriptors, no connection could be admitted
// and none made room for.
int connections_that_fit(int wanted) {
  constexpr rlim_t kSpare = 128;
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0) return wanted;
  const rlim_t want = static_cast<rlim_t>(wanted) + kSpare;
  if (r.rlim_cur < want) {
    r.rlim_cur = r.rlim_max == RLIM_INFINITY ? want : std::min(want, r.rlim_max);
    ::setrlimit(RLIMIT_NOFILE, &r);
    ::getrlimit(RLIMIT_NOFILE, &r);
  }
  if (r.rlim_cur >= want) return wanted;
  return r.rlim_cur > kSpare + 1 ? static_cast<int>(r.rlim_cur - kSpare) : 1;
}

}  // namespace

void HttpServer::Impl::start() {
  lim.max_connections = connections_that_fit(lim.max_connections);
  wake = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  gate = std::thread([this] { gate_loop(); });
  for (int i = 0; i < lim.workers; ++i) workers.emplace_back([this] { worker_loop(); });
}

void HttpServer::Impl::join() {
  if (gate.joinable()) gate.join();
  for (std::thread& w : workers)
    if (w.joinable()) w.join();
  if (wake >= 0) ::close(wake);
  wake = -1;
}

// Takes the inbox into the gate. A connection past max_connections makes room by closing the
// one that has waited longest for its request to arrive; when none waits (all are being
// answered), the new one is refused with a 503.
void HttpServer::Impl::admit(std::vector<std::unique_ptr<Connection>>& waiting) {
  std::vector<std::unique_ptr<Connection>> news;
  {
    std::lock_guard<std::mutex> hold(mu);
    news.swap(inbox);
  }
  for (std::unique_ptr<Connection>& c : news) {
    const bool fresh = c->requests == 0 && c->buf.empty();
    int now_open;
    {
      std::lock_guard<std::mutex> hold(mu);
      now_open = open;
    }
    if (fresh && now_open > lim.max_connections) {
      auto oldest = std::min_element(waiting.begin(), waiting.end(),
                                     [](auto& a, auto& b) { return a->started < b->started; });
      if (oldest == waiting.end()) {
        send_now(c->fd, plain_answer("503 Service Unavailable",
                                     "the server has " + std::to_string(lim.max_connections) +
                                         " connections open, every one being answered"));
        closed(c->fd, false);
        continue;
      }
      closed((*oldest)->fd, false);
      waiting.erase(oldest);
    }
    waiting.push_back(std::move(c));
  }
}

// What the socket has for c now, within the head and body bounds.
void HttpServer::Impl::read_from(Connection& c) {
  char chunk[16384];
  const size_t most = static_cast<size_t>(lim.max_head_bytes + lim.max_body_bytes) + 1;
  while (c.buf.size() < most) {
    const ssize_t n =
        ::recv(c.fd, chunk, std::min(sizeof chunk, most - c.buf.size()), MSG_DONTWAIT);
    if (n > 0) {
      if (c.buf.empty()) c.started = Clock::now();
      c.buf.append(chunk, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    c.gone = true;  // the client left (0), or the socket failed
    return;
  }
}

void HttpServer::Impl::gate_loop() {
  std::vector<std::unique_ptr<Connection>> waiting;
  std::vector<pollfd> fds;
  for (;;) {
    {
      std::lock_guard<std::mutex> hold(mu);
      if (stopping) break;
    }
    admit(waiting);
    // Those complete go to the workers, those past their deadline or bound are closed.
    const Clock::time_point now = Clock::now();
    Clock::time_point next = now + milliseconds(1000);
    for (size_t i = 0; i < waiting.size();) {
      Connection& c = *waiting[i];
      // A complete request is answered even when its client has shut its side down after it
      // (printf 'GET ...' | nc): only the server's side is needed for the answer.
      if (c.ready(lim)) {
        std::lock_guard<std::mutex> hold(mu);
        work.push_back(std::move(waiting[i]));
        work_ready.notify_one();
      } else if (c.to_close(lim, now)) {
        if (!c.gone && !c.refusal.empty()) send_now(c.fd, c.refusal);
        closed(c.fd, false);
      } else {
        next = std::min(next, c.deadline(lim));
        ++i;
        continue;
      }
      waiting.erase(waiting.begin() + static_cast<std::ptrdiff_t>(i));
    }
    fds.assign(1, pollfd{wake, POLLIN, 0});
    for (const auto& c : waiting) fds.push_back(pollfd{c->fd, POLLIN, 0});
    if (::poll(fds.data(), fds.size(), static_cast<int>(until(next).count()) + 1) < 0 &&
        errno != EINTR)
      break;
    uint64_t drop;
    if (fds[0].revents) (void)!::read(wake, &drop, sizeof drop);
    for (size_t i = 1; i < fds.size(); ++i)
      if (fds[i].revents) read_from(*waiting[i - 1]);
  }
  for (const auto& c : waiting) closed(c->fd, false);
  std::lock_guard<std::mutex> hold(mu);
  for (const auto& c : inbox) ::close(c->fd), --open;
  inbox.clear();
}

// One request of c by httplib; true when the connection stays open for another.
bool HttpServer::Impl::answer_one(Connection& c) {
  ConnectionStream strm(c, lim);
  bool closed_now = false;
  const bool last = ++c.requests >= lim.max_requests_per_connection;
  t_answering = c.fd;
  const bool ok = server.answer(strm, last, closed_now);
  t_answering = -1;
  c.buf = strm.rest();
  c.head = 0, c.need = 0;
  c.since = c.started = Clock::now();
  return ok && !closed_now;
}

void HttpServer::Impl::worker_loop() {
  for (;;) {
    std::unique_ptr<Connection> c;
    {
      std::unique_lock<std::mutex> hold(mu);
      work_ready.wait(hold, [&] { return stopping || !work.empty(); });
      if (stopping) break;
      c = std::move(work.front());
      work.pop_front();
      answering.insert(c->fd);
    }
    const bool again = answer_one(*c);
    bool stop_now;
    {
      std::lock_guard<std::mutex> hold(mu);
      answering.erase(c->fd);
      stop_now = stopping;
    }
    if (again && !stop_now)
      to_gate(std::move(c));
    else
      closed(c->fd, !stop_now);
  }
  std::lock_guard<std::mutex> hold(mu);
  for (const auto& c : work) ::close(c->fd), --open;
  work.clear();
}

HttpServer::HttpServer(const ConnectionLimits& lim) : impl_(std::make_unique<Impl>(*this, lim)) {
  // The accept loop hands each connection on at once (process_and_close_socket): no pool.
  struct Inline : httplib::TaskQueue {
    void enqueue(std::function<void()> fn) override { fn(); }
    void shutdown() override {}
  };
  new_task_queue = [] { return new Inline; };
}

HttpServer::~HttpServer() {
  stop_all();
  impl_->join();
}

bool HttpServer::serve() {
  {
    std::lock_guard<std::mutex> hold(impl_->mu);
    if (impl_->stopping) return true;
    impl_->started = true;
  }
  impl_->start();
  // httplib listens with a backlog of 5: connections arriving faster than its accept loop runs
  // (a flood, or a loaded machine) had their SYNs dropped, and the client's next try came 1 s
  // later. Listening again on the bound socket raises the queue (Linux keeps the socket).
  if (svr_sock_ != INVALID_SOCKET) ::listen(svr_sock_, std::max(128, impl_->lim.max_connections));
  const bool ok = listen_after_bind();
  stop_all();
  impl_->join();
  return ok;
}

void HttpServer::stop_all() {
  stop();
  std::lock_guard<std::mutex> hold(impl_->mu);
  impl_->stopping = true;
  impl_->work_ready.notify_all();
  if (impl_->wake >= 0) impl_->notify_gate();
  for (int sock : impl_->answering) ::shutdown(sock, SHUT_RDWR);  // blocked reads, writes end
}

bool HttpServer::process_and_close_socket(socket_t sock) {
  ::fcntl(sock, F_SETFL, ::fcntl(sock, F_GETFL) | O_NONBLOCK);
  {
    std::lock_guard<std::mutex> hold(impl_->mu);
    if (impl_->stopping) {
      ::close(sock);
      return false;
    }
    ++impl_->open;
  }
  impl_->to_gate(std::make_unique<Connection>(sock));
  return true;
}

bool HttpServer::answer(httplib::Stream& strm, bool last, bool& closed) {
  return process_request(strm, last, closed, nullptr);
}

}  // namespace qkv::serve
