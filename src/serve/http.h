// attn serve's own HTTP/1.1 layer: the request parser (every limit checked as the bytes arrive),
// the router, and the connection server (one event thread reads every request whole, under
// deadlines, before a worker thread sees it). Private to the serve floor (docs/serve.md says why it
// replaced cpp-httplib's server).
//
// What it guarantees, whatever a client sends:
//   - a request line longer than max_request_line is 414, a head over max_header_bytes or with more
//     than max_headers fields is 431, both before more is buffered;
//   - a body is counted as it arrives, whatever its framing: a Content-Length over max_body_bytes is
//     413 before any of it is read, a chunked body is 413 as soon as its decoded size passes the limit,
//     a POST with no length is 411, a Content-Encoding other than identity is 415;
//   - conflicting framing (Content-Length with Transfer-Encoding, two different Content-Lengths, a
//     transfer coding other than chunked) is 400 or 501 and the connection is closed;
//   - the head must arrive within header_timeout_s and the body within body_timeout_s of the request's
//     first byte (408 and close), so a slow client holds no worker and only its own connection;
//   - pipelined requests are answered one by one, in order;
//   - a malformed request gets an answer and a close, never an exception out of the layer.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

namespace attn::serve::http {

struct Limits {
  std::size_t max_request_line = 8192;         // 414 beyond
  std::size_t max_header_bytes = 32 << 10;     // the whole head (431 beyond)
  std::size_t max_headers = 100;               // header fields (431 beyond)
  std::size_t max_body_bytes = 8 << 20;        // decoded body (413 beyond)
  std::size_t max_chunk_line = 1024;           // one chunk-size line with its extensions
  double header_timeout_s = 10;                // from a request's first byte to the end of its head
  double body_timeout_s = 30;                  // from a request's first byte to the end of its body
  double keep_alive_s = 5;                     // an idle connection between requests
  double write_timeout_s = 30;                 // a client that stops reading its response
  std::size_t max_connections = 1024;          // open connections (503 and close beyond)
  std::size_t max_buffered_bytes = 256 << 20;  // request bytes buffered over all connections
  int threads = 64;                            // requests handled at once
};

struct Header {
  std::string name;  // lower case
  std::string value;
};

struct Request {
  std::string method;  // as sent (a token)
  std::string target;  // the request target as sent
  std::string path;    // the target's path, not percent-decoded
  std::string query;   // after '?', not decoded
  int minor = 1;       // HTTP/1.<minor>
  std::vector<Header> headers;
  std::string body;    // decoded (chunked framing removed)
  std::string remote;  // the client's address
  bool keep_alive = true;

  bool has_header(std::string_view name) const;
  std::string header(std::string_view name) const;  // "" when absent
  // The query parameter `name`, percent-decoded ('+' is a space); "" when absent. The bytes are as
  // the client sent them: not necessarily UTF-8.
  std::string get_param_value(std::string_view name) const;
  // True once the client has gone away (closed, or reset). Set by the server; false when unknown.
  std::function<bool()> client_gone;
};

// A streamed body's writer (HTTP/1.1: chunked transfer coding).
struct DataSink {
  std::function<bool(const char*, std::size_t)> write;  // false: the client went away
  std::function<void()> done;
};

struct Response {
  int status = 200;
  std::vector<Header> headers;
  std::string body;
  std::string content_type;
  // A streamed body: called once; writes through the sink; returns false to drop the connection.
  std::function<bool(std::size_t, DataSink&)> stream;

  void set_content(std::string b, std::string type) {
    body = std::move(b);
    content_type = std::move(type);
  }
  void set_header(std::string name, std::string value);
  void set_chunked_content_provider(std::string type, std::function<bool(std::size_t, DataSink&)> fn) {
    content_type = std::move(type);
    stream = std::move(fn);
  }
};

const char* status_text(int status);

// ---- the parser -----------------------------------------------------------------------------------

// A request the parser refuses: the status to answer (400, 408, 411, 413, 414, 415, 417, 431, 501,
// 505), a stable code and a message for people. The connection is closed after the answer.
struct ParseError {
  int status = 400;
  std::string code, message;
};

// Reads one request from bytes as they arrive. feed() returns how many bytes it used; done() once a
// whole request (head and body) is read; error() once it is refused. Bytes after a request's end
// are left for the next parser (pipelining).
class RequestParser {
 public:
  explicit RequestParser(const Limits& limits) : limits_(limits) {}
  std::size_t feed(std::string_view bytes);
  bool head_done() const { return state_ > State::head; }
  bool done() const { return state_ == State::done; }
  const std::optional<ParseError>& error() const { return error_; }
  // True when the head asked for "Expect: 100-continue" and the body is still to come.
  bool wants_continue() const { return expect_continue_ && state_ != State::done && !error_; }
  Request& request() { return req_; }
  std::size_t buffered() const { return line_.size() + req_.body.size(); }

 private:
  enum class State { head, body_length, chunk_size, chunk_data, chunk_data_end, trailers, done };
  void fail(int status, std::string code, std::string message);
  void finish_head();
  bool head_line(std::string_view line);  // false: the head ended
  std::size_t feed_head(std::string_view bytes);
  std::size_t feed_chunked(std::string_view bytes);

  const Limits& limits_;
  State state_ = State::head;
  std::optional<ParseError> error_;
  Request req_;
  std::string line_;            // a partial line (head, chunk size, trailers)
  std::size_t head_bytes_ = 0;  // bytes of the head so far
  bool first_line_ = true;
  uint64_t remaining_ = 0;  // body bytes still to read (Content-Length or the current chunk)
  bool expect_continue_ = false;
};

// Parses one whole request from `bytes` (tests and the fuzz target): the request, or the error.
struct ParseResult {
  std::optional<Request> request;
  std::optional<ParseError> error;
  std::size_t used = 0;  // bytes consumed (the rest belongs to the next request)
};
ParseResult parse_request(std::string_view bytes, const Limits& limits);

// The response's bytes: status line, headers (Content-Length, Connection), body. HEAD: no body.
std::string serialize_head(const Response& res, bool keep_alive, bool head_only, int minor, bool chunked);

// ---- the router -----------------------------------------------------------------------------------

using Handler = std::function<void(Request&, Response&)>;

// Exact (method, path) routes; GET routes answer HEAD too. route() answers 404 for an unknown path
// and 405 (with Allow) for a known path and another method, through the error callback.
class Router {
 public:
  using ErrorFn = std::function<void(Response&, int status, const std::string& code, const std::string& msg)>;
  void add(std::string method, std::string path, Handler h);
  void set_error(ErrorFn fn) { error_ = std::move(fn); }
  void route(Request& req, Response& res) const;
  bool knows(std::string_view path) const;

 private:
  struct Route {
    std::string method, path;
    Handler handler;
  };
  std::vector<Route> routes_;
  ErrorFn error_;
};

// A short, printable, valid-UTF-8 quote of client input for messages: at most `max_bytes` of it,
// cut on a character, invalid bytes and controls written as \xNN, "..." when cut.
std::string quote(std::string_view s, std::size_t max_bytes = 64);

// ---- the connection server ------------------------------------------------------------------------

class Server {
 public:
  using Complete = std::function<void(const Request&, const Response&, double seconds)>;
  using ErrorFn = Router::ErrorFn;

  Server(Limits limits, Handler handler, ErrorFn error, Complete complete = nullptr);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds and listens (throws attn::Error naming the address); returns the bound port.
  int bind(const std::string& host, int port);
  // Serves until stop(): the event thread runs here.
  void run();
  bool running() const { return running_.load(); }
  // Stops accepting, closes idle connections, waits for the requests being handled (streams
  // included) to finish and run() to return. Safe to call more than once.
  void stop();
  const Limits& limits() const { return limits_; }

 private:
  struct Conn;
  void accept_all();
  void on_readable(Conn& c);
  void dispatch(std::unique_ptr<Conn> c);
  void serve_conn(std::unique_ptr<Conn> c);  // on a worker thread
  bool answer(Conn& c, Request& req, Response& res, bool keep_alive);
  void give_back(std::unique_ptr<Conn> c);  // from a worker: watch it again
  void close_conn(std::unique_ptr<Conn> c);
  void refuse(Conn& c, const ParseError& e);
  void expire(std::chrono::steady_clock::time_point now);
  void wake();
  void worker();

  Limits limits_;
  Handler handler_;
  ErrorFn error_;
  Complete complete_;
  int listen_fd_ = -1, epoll_fd_ = -1, wake_fd_ = -1;
  std::atomic<bool> running_{false}, stopping_{false};
  std::unordered_map<int, std::unique_ptr<Conn>> watched_;  // the event thread's connections
  std::atomic<std::size_t> open_{0};
  std::atomic<std::size_t> buffered_{0};
  std::mutex mu_;
  std::condition_variable cv_, idle_cv_;
  std::deque<std::unique_ptr<Conn>> jobs_, returned_;
  std::size_t busy_ = 0;
  std::vector<std::thread> workers_;
  bool quit_ = false;
};

}  // namespace attn::serve::http
