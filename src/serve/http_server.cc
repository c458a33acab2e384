// attn serve's connection server (src/serve/http.h): one event thread accepts connections and reads
// every request whole (RequestParser: limits and framing) under its deadlines; a pool of worker
// threads runs the handler and writes the response; a kept-alive connection goes back to the event
// thread. A slow or hostile client therefore holds only its own connection, never a worker.
#include <arpa/inet.h>
#include <attn/core/error.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "serve/http.h"

namespace attn::serve::http {

using Clock = std::chrono::steady_clock;

struct Server::Conn {
  int fd = -1;
  std::string remote;
  std::string in;  // bytes read and not yet given to a parser
  std::unique_ptr<RequestParser> parser;
  bool reading = false;  // bytes of a request have arrived
  bool closing = false;  // answered with an error: draining until the client closes
  bool eof = false;      // the client closed its side
  bool sent_continue = false;
  Clock::time_point since;  // the request's first byte, or when the connection became idle
  bool fresh = true;        // no request on it yet
  std::size_t counted = 0;  // bytes counted in Server::buffered_
};

namespace {

bool send_all(int fd, std::string_view data, double timeout_s) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd, POLLOUT, 0};
      const int r = ::poll(&p, 1, static_cast<int>(timeout_s * 1000));
      if (r <= 0 || (p.revents & (POLLERR | POLLHUP | POLLNVAL))) return false;
      continue;
    }
    return false;
  }
  return true;
}

std::string address_of(const sockaddr_storage& a) {
  char buf[INET6_ADDRSTRLEN] = {0};
  if (a.ss_family == AF_INET)
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(a).sin_addr, buf, sizeof buf);
  else if (a.ss_family == AF_INET6)
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(a).sin6_addr, buf, sizeof buf);
  return buf;
}

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

Server::Server(Limits limits, Handler handler, ErrorFn error, Complete complete)
    : limits_(limits),
      handler_(std::move(handler)),
      error_(std::move(error)),
      complete_(std::move(complete)) {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur > 64)
    limits_.max_connections = std::min<std::size_t>(limits_.max_connections, rl.rlim_cur - 64);
}

Server::~Server() {
  stop();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

int Server::bind(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  const int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &res);
  ATTN_CHECK(rc == 0 && res, "serve: cannot resolve the address '", host, "': ", ::gai_strerror(rc));
  int fd = -1;
  std::string why;
  for (addrinfo* a = res; a && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, 1024) != 0) {
      why = std::strerror(errno);
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(res);
  ATTN_CHECK(fd >= 0, "serve: cannot listen on ", host, ":", port, " (", why,
             "; in use, or not an address of this machine)");
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  sockaddr_storage sa{};
  socklen_t len = sizeof sa;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  listen_fd_ = fd;
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  ATTN_CHECK(epoll_fd_ >= 0 && wake_fd_ >= 0, "serve: cannot create the event loop: ", std::strerror(errno));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = listen_fd_;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
  ev.data.fd = wake_fd_;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
  return sa.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6&>(sa).sin6_port)
                                  : ntohs(reinterpret_cast<sockaddr_in&>(sa).sin_port);
}

void Server::wake() {
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(wake_fd_, &one, sizeof one);
}

void Server::run() {
  ATTN_CHECK(listen_fd_ >= 0, "serve: run() before bind()");
  running_.store(true);
  for (int i = 0; i < limits_.threads; ++i) workers_.emplace_back([this] { worker(); });
  epoll_event events[256];
  bool listening = true;
  auto last_expire = Clock::now();
  while (true) {
    const int n = ::epoll_wait(epoll_fd_, events, 256, 100);
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == listen_fd_) {
        if (listening) accept_all();
      } else if (fd == wake_fd_) {
        uint64_t v;
        [[maybe_unused]] const ssize_t r = ::read(wake_fd_, &v, sizeof v);
      } else if (auto it = watched_.find(fd); it != watched_.end()) {
        on_readable(*it->second);
      }
    }
    // Connections the workers gave back (kept alive): watch them again.
    std::deque<std::unique_ptr<Conn>> back;
    {
      std::lock_guard<std::mutex> lk(mu_);
      back.swap(returned_);
    }
    for (auto& c : back) {
      epoll_event ev{};
      ev.events = EPOLLIN | EPOLLRDHUP;
      ev.data.fd = c->fd;
      const int fd = c->fd;
      if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
        close_conn(std::move(c));
        continue;
      }
      watched_[fd] = std::move(c);
      // Bytes of the next request may have arrived while the worker wrote (or were buffered).
      on_readable(*watched_[fd]);
    }
    const auto now = Clock::now();
    if (now - last_expire > std::chrono::milliseconds(50)) {
      expire(now);
      last_expire = now;
    }
    if (stopping_.load()) {
      if (listening) {
        ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listen_fd_, nullptr);
        ::close(listen_fd_);
        listen_fd_ = -1;
        listening = false;
      }
      std::vector<int> fds;
      for (auto& [fd, c] : watched_) fds.push_back(fd);
      for (int fd : fds) {
        auto c = std::move(watched_[fd]);
        watched_.erase(fd);
        close_conn(std::move(c));
      }
      std::lock_guard<std::mutex> lk(mu_);
      if (busy_ == 0 && jobs_.empty() && returned_.empty()) break;
    }
  }
  {
    std::lock_guard<std::mutex> lk(mu_);
    quit_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
  workers_.clear();
  {
    std::lock_guard<std::mutex> lk(mu_);
    running_.store(false);
  }
  idle_cv_.notify_all();
}

void Server::stop() {
  if (!running_.load()) {
    stopping_.store(true);
    return;
  }
  stopping_.store(true);
  wake();
  std::unique_lock<std::mutex> lk(mu_);
  idle_cv_.wait(lk, [&] { return !running_.load(); });
}

void Server::accept_all() {
  while (true) {
    sockaddr_storage sa{};
    socklen_t len = sizeof sa;
    const int fd =
        ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&sa), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;  // EAGAIN, or out of descriptors: try again on the next event
    if (open_.load() >= limits_.max_connections) {
      // Make room: the connection that has spent longest on an unfinished request head, if it has
      // spent over a second on it (a slow client); otherwise this one is refused.
      Conn* oldest = nullptr;
      for (auto& [k, c] : watched_)
        if (!c->closing && (c->reading || c->fresh) && seconds_since(c->since) > 1 &&
            (!oldest || c->since < oldest->since))
          oldest = c.get();
      if (oldest) {
        const int ofd = oldest->fd;
        auto c = std::move(watched_[ofd]);
        watched_.erase(ofd);
        close_conn(std::move(c));
      } else {
        Response res;
        error_(
            res, 503, "too_many_connections",
            "the server has " + std::to_string(limits_.max_connections) + " connections open; retry later");
        res.set_header("Retry-After", "1");
        const std::string bytes = serialize_head(res, false, false, 1, false);
        [[maybe_unused]] const ssize_t n =
            ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        ::close(fd);
        continue;
      }
    }
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    auto c = std::make_unique<Conn>();
    c->fd = fd;
    c->remote = address_of(sa);
    c->parser = std::make_unique<RequestParser>(limits_);
    c->since = Clock::now();
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.fd = fd;
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
      ::close(fd);
      continue;
    }
    open_.fetch_add(1);
    watched_[fd] = std::move(c);
  }
}

void Server::on_readable(Conn& c) {
  char buf[64 << 10];
  const int fd = c.fd;
  while (true) {
    // Whatever is buffered first: the parser takes bytes only up to the end of one request.
    if (!c.closing && !c.in.empty()) {
      if (!c.reading) {
        c.reading = true;
        c.since = Clock::now();
      }
      const std::size_t used = c.parser->feed(c.in);
      c.in.erase(0, used);
    }
    const std::size_t now_buffered = c.in.size() + c.parser->buffered();
    buffered_.fetch_add(now_buffered);  // modular: adds the difference
    buffered_.fetch_sub(c.counted);
    c.counted = now_buffered;
    if (c.closing) {
      c.in.clear();
    } else if (c.parser->error()) {
      refuse(c, *c.parser->error());
    } else if (c.parser->done()) {
      auto own = std::move(watched_[fd]);
      watched_.erase(fd);
      ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
      dispatch(std::move(own));
      return;
    } else if (buffered_.load() > limits_.max_buffered_bytes) {
      refuse(c,
             ParseError{503, "server_busy", "the server holds too many request bytes at once; retry later"});
    } else if (c.parser->wants_continue() && !c.sent_continue && c.in.empty()) {
      c.sent_continue = true;
      static const char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
      [[maybe_unused]] const ssize_t n =
          ::send(fd, kContinue, sizeof kContinue - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    if (c.eof) break;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n > 0) {
      c.in.append(buf, static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    c.eof = true;  // closed (n == 0) or reset
    break;
  }
  // The client closed its side before a whole request arrived (or while draining): done with it.
  auto own = std::move(watched_[fd]);
  watched_.erase(fd);
  close_conn(std::move(own));
}

void Server::refuse(Conn& c, const ParseError& e) {
  Response res;
  error_(res, e.status, e.code, e.message);
  const std::string bytes = serialize_head(res, false, false, 1, false);
  [[maybe_unused]] const ssize_t n = ::send(c.fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  // Close gently: stop sending, read and drop what the client still sends (a body we refused) for a
  // moment, so that the answer is not lost to a reset.
  ::shutdown(c.fd, SHUT_WR);
  c.closing = true;
  c.since = Clock::now();
  c.in.clear();
  if (complete_) {
    Request r;
    r.method = c.parser->request().method;
    r.path = c.parser->request().path;
    complete_(r, res, 0);
  }
}

void Server::expire(Clock::time_point now) {
  std::vector<int> gone;
  for (auto& [fd, c] : watched_) {
    const double s = std::chrono::duration<double>(now - c->since).count();
    if (c->closing) {
      if (s > 2) gone.push_back(fd);
    } else if (c->reading) {
      if (!c->parser->head_done() && s > limits_.header_timeout_s)
        refuse(*c, ParseError{408, "request_timeout",
                              "the request head did not arrive within " +
                                  std::to_string(static_cast<int>(limits_.header_timeout_s)) + " s"});
      else if (c->parser->head_done() && s > limits_.body_timeout_s)
        refuse(*c, ParseError{408, "request_timeout",
                              "the request body did not arrive within " +
                                  std::to_string(static_cast<int>(limits_.body_timeout_s)) + " s"});
    } else if (s > (c->fresh ? limits_.header_timeout_s : limits_.keep_alive_s)) {
      gone.push_back(fd);
    }
  }
  for (int fd : gone) {
    auto c = std::move(watched_[fd]);
    watched_.erase(fd);
    close_conn(std::move(c));
  }
}

void Server::close_conn(std::unique_ptr<Conn> c) {
  if (!c) return;
  buffered_.fetch_sub(c->counted);
  ::close(c->fd);  // also takes it out of the epoll set
  open_.fetch_sub(1);
}

void Server::dispatch(std::unique_ptr<Conn> c) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    jobs_.push_back(std::move(c));
  }
  cv_.notify_one();
}

void Server::worker() {
  while (true) {
    std::unique_ptr<Conn> c;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return quit_ || !jobs_.empty(); });
      if (jobs_.empty()) return;
      c = std::move(jobs_.front());
      jobs_.pop_front();
      ++busy_;
    }
    serve_conn(std::move(c));
    {
      std::lock_guard<std::mutex> lk(mu_);
      --busy_;
    }
    wake();
  }
}

void Server::give_back(std::unique_ptr<Conn> c) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    returned_.push_back(std::move(c));
  }
  wake();
}

void Server::serve_conn(std::unique_ptr<Conn> c) {
  while (true) {
    Request& req = c->parser->request();
    req.remote = c->remote;
    const int fd = c->fd;
    const int minor = req.minor;
    auto probed = std::make_shared<bool>(false);
    req.client_gone = [fd, minor, probed] {
      pollfd p{fd, POLLIN | POLLRDHUP, 0};
      if (::poll(&p, 1, 0) <= 0) return false;
      if (p.revents & (POLLERR | POLLHUP | POLLNVAL)) return true;
      char b;
      const ssize_t n = ::recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
      if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))) return false;  // more requests
      // End of input: the client closed, or only half-closed and still reads. An interim answer
      // (RFC 9110 15.2: clients accept 1xx before the final one) tells which: a closed client
      // resets the connection, which the next call sees.
      if (minor == 0 || *probed) return false;
      *probed = true;
      static const char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
      return ::send(fd, kContinue, sizeof kContinue - 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0 && errno != EAGAIN;
    };
    const auto t0 = Clock::now();
    Response res;
    try {
      handler_(req, res);
    } catch (const std::exception& e) {
      res = Response{};
      error_(res, 500, "internal_error", std::string("internal error: ") + e.what());
    } catch (...) {
      res = Response{};
      error_(res, 500, "internal_error", "internal error");
    }
    const bool keep = req.keep_alive && !stopping_.load() && !c->eof;
    const bool ok = answer(*c, req, res, keep);
    if (complete_) complete_(req, res, seconds_since(t0));
    if (!ok || !keep) {
      close_conn(std::move(c));
      return;
    }
    // The next request: pipelined bytes already read, or wait for more on the event thread.
    c->parser = std::make_unique<RequestParser>(limits_);
    c->reading = false;
    c->fresh = false;
    c->sent_continue = false;
    c->since = Clock::now();
    if (!c->in.empty()) {
      c->reading = true;
      const std::size_t used = c->parser->feed(c->in);
      c->in.erase(0, used);
      if (c->parser->done()) continue;
    }
    give_back(std::move(c));
    return;
  }
}

bool Server::answer(Conn& c, Request& req, Response& res, bool keep_alive) {
  const bool head_only = req.method == "HEAD";
  const bool chunked = res.stream && req.minor == 1;
  // A streamed reply to an HTTP/1.0 client ends when the connection closes.
  if (res.stream && !chunked) keep_alive = false;
  const std::string bytes = serialize_head(res, keep_alive, head_only, req.minor, chunked);
  if (!send_all(c.fd, bytes, limits_.write_timeout_s)) return false;
  if (!res.stream || head_only) return true;
  bool alive = true, finished = false;
  DataSink sink;
  const double timeout = limits_.write_timeout_s;
  const int fd = c.fd;
  sink.write = [&](const char* data, std::size_t n) {
    if (!alive) return false;
    if (n == 0) return true;
    if (chunked) {
      char size[32];
      std::snprintf(size, sizeof size, "%zx\r\n", n);
      std::string frame = size;
      frame.append(data, n);
      frame += "\r\n";
      alive = send_all(fd, frame, timeout);
    } else {
      alive = send_all(fd, std::string_view(data, n), timeout);
    }
    return alive;
  };
  sink.done = [&] {
    if (finished || !alive) return;
    finished = true;
    if (chunked) alive = send_all(fd, "0\r\n\r\n", timeout);
  };
  bool keep = false;
  try {
    keep = res.stream(0, sink);
  } catch (...) {
    keep = false;
  }
  return keep && alive && finished && keep_alive;
}

}  // namespace attn::serve::http
