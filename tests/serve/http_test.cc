// attn serve's HTTP layer (src/serve/http.h) as a hostile client meets it: the parser on bytes,
// then a real Server on an ephemeral loopback port over raw sockets. Each test asserts the status,
// that the server still answers afterwards, and where memory could grow, that RSS grew by less than
// a stated bound. No model is loaded (the model endpoints answer 503 "loading"), so the tests run in
// seconds; every wait is bounded.
#include "serve/http.h"

#include <arpa/inet.h>
#include <attn/io/json.h>
#include <attn/serve/server.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace attn::serve {
namespace {

using http::Limits;
using http::parse_request;

// ---- the parser on bytes --------------------------------------------------------------------------

TEST(HttpParse, ReadsARequestAndLeavesThePipelinedNext) {
  const std::string two =
      "GET /view?model=m&text=a%20b+c HTTP/1.1\r\nHost: x\r\nX-A:  1 \r\n\r\n"
      "POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}";
  const auto a = parse_request(two, Limits{});
  ASSERT_TRUE(a.request) << (a.error ? a.error->message : "incomplete");
  EXPECT_EQ(a.request->method, "GET");
  EXPECT_EQ(a.request->path, "/view");
  EXPECT_EQ(a.request->get_param_value("text"), "a b c");
  EXPECT_EQ(a.request->header("x-a"), "1");
  EXPECT_EQ(a.request->header("X-A"), "1");
  ASSERT_LT(a.used, two.size());
  const auto b = parse_request(std::string_view(two).substr(a.used), Limits{});
  ASSERT_TRUE(b.request);
  EXPECT_EQ(b.request->method, "POST");
  EXPECT_EQ(b.request->body, "{}");
  EXPECT_EQ(a.used + b.used, two.size());
}

TEST(HttpParse, ByteByByteEqualsWhole) {
  const std::string req =
      "POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
      "4;ext=1\r\nabcd\r\n3\r\nefg\r\n0\r\nTrailer: t\r\n\r\n";
  Limits limits;
  http::RequestParser p(limits);
  std::size_t used = 0;
  for (char c : req) used += p.feed(std::string_view(&c, 1));
  ASSERT_TRUE(p.done());
  EXPECT_EQ(used, req.size());
  EXPECT_EQ(p.request().body, "abcdefg");
  const auto whole = parse_request(req, limits);
  ASSERT_TRUE(whole.request);
  EXPECT_EQ(whole.request->body, "abcdefg");
}

int status_of(const std::string& bytes, Limits limits = {}) {
  const auto r = parse_request(bytes, limits);
  if (r.error) return r.error->status;
  return r.request ? 200 : 0;  // 0: incomplete
}

TEST(HttpParse, RefusesBadFramingWithTheRightStatus) {
  Limits small;
  small.max_body_bytes = 100;
  const std::string post = "POST /v1/embeddings HTTP/1.1\r\nHost: x\r\n";
  EXPECT_EQ(status_of(post + "Content-Length: 101\r\n\r\n", small), 413);
  EXPECT_EQ(status_of(post + "Content-Length: 100000000000000000000000\r\n\r\n", small), 413);
  EXPECT_EQ(status_of(post + "Content-Length: -1\r\n\r\n", small), 400);
  EXPECT_EQ(status_of(post + "Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}", small), 400);
  EXPECT_EQ(status_of(post + "Content-Length: 2\r\nContent-Length: 2\r\n\r\n{}", small), 200);
  EXPECT_EQ(status_of(post + "Content-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n", small), 400);
  EXPECT_EQ(status_of(post + "Transfer-Encoding: gzip, chunked\r\n\r\n", small), 501);
  EXPECT_EQ(status_of(post + "Content-Length: 2\r\nContent-Encoding: gzip\r\n\r\n{}", small), 415);
  EXPECT_EQ(status_of(post + "\r\n", small), 411);
  EXPECT_EQ(status_of(post + "Expect: magic\r\nContent-Length: 2\r\n\r\n{}", small), 417);
  // A chunked body is counted as it arrives: refused at the chunk that passes the limit.
  EXPECT_EQ(status_of(post + "Transfer-Encoding: chunked\r\n\r\n40\r\n" + std::string(64, 'a') + "\r\n40\r\n",
                      small),
            413);
  EXPECT_EQ(status_of(post + "Transfer-Encoding: chunked\r\n\r\nzz\r\n", small), 400);
  EXPECT_EQ(status_of(post + "Transfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n", small), 400);
}

TEST(HttpParse, RefusesBadHeadsWithTheRightStatus) {
  Limits l;
  l.max_request_line = 100;
  l.max_headers = 10;
  l.max_header_bytes = 2048;
  EXPECT_EQ(status_of("GET /" + std::string(200, 'a') + " HTTP/1.1\r\n", l), 414);
  std::string many = "GET / HTTP/1.1\r\nHost: x\r\n";
  for (int i = 0; i < 11; ++i) many += "X-" + std::to_string(i) + ": v\r\n";
  EXPECT_EQ(status_of(many + "\r\n", l), 431);
  EXPECT_EQ(status_of("GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(4000, 'v'), l), 431);
  EXPECT_EQ(status_of("GET / HTTP/1.1\r\n\r\n", l), 400);  // no Host
  EXPECT_EQ(status_of("GET / HTTP/1.0\r\n\r\n", l), 200);  // 1.0 needs none
  EXPECT_EQ(status_of("GET / HTTP/1.1\r\nHost: x\r\nNoColon\r\n\r\n", l), 400);
  EXPECT_EQ(status_of("GET / HTTP/1.1\r\nHost: x\r\nA : b\r\n\r\n", l), 400);
  EXPECT_EQ(status_of("GET / HTTP/1.1\r\nHost: x\r\nA: b\r\n  folded\r\n\r\n", l), 400);
  EXPECT_EQ(status_of("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", l), 400);
  EXPECT_EQ(status_of("GET / HTTP/2.0\r\n\r\n", l), 505);
  EXPECT_EQ(status_of("GET nopath HTTP/1.1\r\nHost: x\r\n\r\n", l), 400);
  EXPECT_EQ(status_of("G\xff / HTTP/1.1\r\nHost: x\r\n\r\n", l), 400);
  EXPECT_EQ(status_of("GET / HTTP/1.1\r\nHost: x\r\nA: b\x01\r\n\r\n", l), 400);
  EXPECT_EQ(status_of("GET / HTTP/1.1\r\nHost: x\r\n", l), 0);  // not yet whole
}

TEST(HttpParse, QuoteIsShortValidUtf8) {
  EXPECT_EQ(http::quote("abc"), "abc");
  EXPECT_EQ(http::quote("a\xff\x01"), "a\\xFF\\x01");
  const std::string long_cjk = [] {
    std::string s;
    for (int i = 0; i < 100; ++i) s += "你";
    return s;
  }();
  const std::string q = http::quote(long_cjk, 64);
  EXPECT_EQ(json::find_invalid_utf8(q), std::string::npos);
  EXPECT_LE(q.size(), 64u + 3u);
  EXPECT_EQ(q.substr(q.size() - 3), "...");
}

TEST(HttpRouter, AnswersUnknownPathsAndMethods) {
  http::Router r;
  int called = 0;
  r.add("GET", "/health", [&](http::Request&, http::Response& res) { ++called, res.status = 200; });
  r.add("POST", "/v1/embeddings", [&](http::Request&, http::Response&) { ++called; });
  r.set_error([](http::Response& res, int status, const std::string& code, const std::string&) {
    res.status = status;
    res.body = code;
  });
  const auto go = [&](const char* method, const char* path) {
    http::Request q;
    q.method = method;
    q.path = path;
    http::Response res;
    r.route(q, res);
    return res;
  };
  EXPECT_EQ(go("HEAD", "/health").status, 200);
  EXPECT_EQ(go("GET", "/nope").status, 404);
  const http::Response m = go("GET", "/v1/embeddings");
  EXPECT_EQ(m.status, 405);
  ASSERT_EQ(m.headers.size(), 1u);
  EXPECT_EQ(m.headers[0].value, "POST");
  EXPECT_EQ(called, 1);
}

// ---- a real server over raw sockets ---------------------------------------------------------------

long rss_kib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return 0;
}

struct Live {
  Server server;
  explicit Live(ServerOptions o) : server(prep(std::move(o))) { server.start(); }
  static ServerOptions prep(ServerOptions o) {
    o.host = "127.0.0.1";
    o.port = 0;
    if (o.embed.empty() && o.generate.empty() && o.classify.empty()) o.embed = "minilm";  // never loaded
    return o;
  }
  int connect() const {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(server.port()));
    ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    timeval tv{10, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
  }
  std::string host() const { return "127.0.0.1:" + std::to_string(server.port()); }
};

bool send_str(int fd, std::string_view s) {
  while (!s.empty()) {
    const ssize_t n = ::send(fd, s.data(), s.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    s.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

// Everything until the server closes (or 10 s pass).
std::string read_all(int fd) {
  std::string out;
  char buf[8192];
  while (true) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

// One request on a fresh connection, "Connection: close" added; the raw response.
std::string roundtrip(const Live& s, const std::string& head_and_body) {
  const int fd = s.connect();
  send_str(fd, head_and_body);
  std::string out = read_all(fd);
  ::close(fd);
  return out;
}

int status(const std::string& response) {
  if (response.size() < 12 || response.rfind("HTTP/1.1 ", 0) != 0) return -1;
  return std::stoi(response.substr(9, 3));
}

std::string body_of(const std::string& response) {
  const std::size_t p = response.find("\r\n\r\n");
  return p == std::string::npos ? "" : response.substr(p + 4);
}

// The error body is valid JSON with a non-null code; returns the code.
std::string error_code(const std::string& response) {
  const std::string body = body_of(response);
  EXPECT_EQ(json::find_invalid_utf8(body), std::string::npos);
  const json::Value v = json::parse(body);
  const json::Value* e = v.find("error");
  EXPECT_TRUE(e != nullptr) << body;
  if (!e) return "";
  const json::Value* code = e->find("code");
  EXPECT_TRUE(code && code->is_string()) << body;
  return code && code->is_string() ? code->as_string() : "";
}

std::string get(const Live& s, const std::string& target, const std::string& extra = "") {
  return roundtrip(
      s, "GET " + target + " HTTP/1.1\r\nHost: " + s.host() + "\r\n" + extra + "Connection: close\r\n\r\n");
}

void expect_alive(const Live& s) {
  const std::string r = get(s, "/health");
  EXPECT_EQ(status(r), 503) << r;  // answers ("loading": no model is loaded in these tests)
}

TEST(HttpServe, MalformedPathsGet404AndTheServerLives) {
  Live s(ServerOptions{});
  for (const std::string& path :
       {std::string("/%ff"), std::string("/\xff\xfe"), "/" + std::string(300, 'a'), [] {
          std::string p = "/";
          for (int i = 0; i < 100; ++i) p += "\xe7\x8c\xab";  // 猫, 300 bytes
          return p;
        }()}) {
    const std::string r = get(s, path);
    EXPECT_EQ(status(r), 404) << r;
    EXPECT_EQ(error_code(r), "unknown_url");
    EXPECT_LT(r.size(), 1024u);
  }
  expect_alive(s);
}

TEST(HttpServe, BodiesAreBoundedWhateverTheirFraming) {
  ServerOptions o;
  o.limits.max_body_bytes = 64 << 10;
  Live s(o);
  const long before = rss_kib();
  const std::string post = "POST /v1/embeddings HTTP/1.1\r\nHost: " + s.host() + "\r\n";
  {  // chunked: 16 MiB offered; refused once it passes 64 KiB
    const int fd = s.connect();
    send_str(fd, post + "Transfer-Encoding: chunked\r\n\r\n");
    const std::string chunk = "10000\r\n" + std::string(0x10000, 'a') + "\r\n";
    for (int i = 0; i < 256 && send_str(fd, chunk); ++i) {
    }
    const std::string r = read_all(fd);
    ::close(fd);
    EXPECT_EQ(status(r), 413) << r.substr(0, 200);
    EXPECT_EQ(error_code(r), "body_too_large");
  }
  EXPECT_EQ(status(roundtrip(s, post + "Content-Length: 100000000000000000000000\r\n\r\n")), 413);
  EXPECT_EQ(status(roundtrip(s, post + "Content-Length: -5\r\n\r\n")), 400);
  {  // no length, body until EOF: 411, answered at once
    const int fd = s.connect();
    send_str(fd, post + "\r\n{\"input\": \"x\"}");
    ::shutdown(fd, SHUT_WR);
    const std::string r = read_all(fd);
    ::close(fd);
    EXPECT_EQ(status(r), 411) << r;
    EXPECT_EQ(error_code(r), "length_required");
  }
  const std::string gz = roundtrip(s, post + "Content-Encoding: gzip\r\nContent-Length: 4\r\n\r\nabcd");
  EXPECT_EQ(status(gz), 415);
  EXPECT_EQ(error_code(gz), "unsupported_content_encoding");
  const std::string both =
      roundtrip(s, post + "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n0\r\n\r\n");
  EXPECT_EQ(status(both), 400);
  EXPECT_EQ(error_code(both), "conflicting_framing");
  // A JSON body under the limit with curl's default form type is read (503: no model loaded).
  const std::string json_body = "{\"input\": \"" + std::string(20000, 'a') + "\"}";
  const std::string form =
      roundtrip(s, post + "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: " +
                       std::to_string(json_body.size()) + "\r\nConnection: close\r\n\r\n" + json_body);
  EXPECT_EQ(status(form), 503) << form.substr(0, 300);
  EXPECT_EQ(error_code(form), "loading");
  EXPECT_LT(rss_kib() - before, 32 << 10) << "RSS grew by more than 32 MiB";
  expect_alive(s);
}

TEST(HttpServe, HeadsAreBounded) {
  Live s(ServerOptions{});
  const long before = rss_kib();
  {  // a flood of headers: 431 once the head passes 32 KiB, without reading the rest
    const int fd = s.connect();
    send_str(fd, "GET /health HTTP/1.1\r\nHost: " + s.host() + "\r\n");
    std::string lines;
    for (int i = 0; i < 1000; ++i) lines += "X-" + std::to_string(i) + ": v\r\n";
    for (int i = 0; i < 100 && send_str(fd, lines); ++i) {
    }
    const std::string r = read_all(fd);
    ::close(fd);
    EXPECT_EQ(status(r), 431) << r.substr(0, 200);
  }
  EXPECT_EQ(status(get(s, "/" + std::string(10000, 'a'))), 414);
  EXPECT_EQ(status(roundtrip(s, "GET /health HTTP/1.1\r\nConnection: close\r\n\r\n")), 400);
  EXPECT_EQ(status(roundtrip(s, "GET /health HTTP/1.1\r\nHost: x\r\nbad header\r\n\r\n")), 400);
  EXPECT_LT(rss_kib() - before, 32 << 10);
  expect_alive(s);
}

TEST(HttpServe, SlowClientsAreCutOffAndHoldNoWorker) {
  ServerOptions o;
  o.limits.header_timeout_s = 1;
  o.limits.http_threads = 2;
  Live s(o);
  // 24 connections each sending a byte every 100 ms: more than the worker threads.
  std::vector<int> slow;
  for (int i = 0; i < 24; ++i) slow.push_back(s.connect());
  const std::string head = "GET /health HTTP/1.1\r\nHost: " + s.host() + "\r\nX-Slow: ";
  const auto t0 = std::chrono::steady_clock::now();
  std::size_t sent = 0;
  std::vector<double> normal_ms;
  while (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(2500)) {
    for (int fd : slow) ::send(fd, head.data() + std::min(sent, head.size() - 1), 1, MSG_NOSIGNAL);
    ++sent;
    const auto a = std::chrono::steady_clock::now();
    const std::string r = get(s, "/health");
    normal_ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
    EXPECT_EQ(status(r), 503) << r;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  for (double ms : normal_ms) EXPECT_LT(ms, 1000) << "a normal request waited behind slow clients";
  // Each slow connection was answered 408 and closed by its header deadline.
  for (int fd : slow) {
    const std::string r = read_all(fd);
    EXPECT_EQ(status(r), 408) << r.substr(0, 100);
    ::close(fd);
  }
}

TEST(HttpServe, PipelinedRequestsAreAnsweredInOrder) {
  Live s(ServerOptions{});
  const int fd = s.connect();
  const std::string h = "Host: " + s.host() + "\r\n";
  send_str(fd, "GET /health HTTP/1.1\r\n" + h + "\r\nGET /nope HTTP/1.1\r\n" + h +
                   "\r\nGET /v1/models HTTP/1.1\r\n" + h + "Connection: close\r\n\r\n");
  const std::string all = read_all(fd);
  ::close(fd);
  const std::size_t a = all.find("HTTP/1.1 503"), b = all.find("HTTP/1.1 404"), c = all.find("HTTP/1.1 200");
  ASSERT_NE(a, std::string::npos) << all;
  ASSERT_NE(b, std::string::npos) << all;
  ASSERT_NE(c, std::string::npos) << all;
  EXPECT_LT(a, b);
  EXPECT_LT(b, c);
}

TEST(HttpServe, HalfClosedClientGetsItsAnswer) {
  Live s(ServerOptions{});
  const int fd = s.connect();
  send_str(fd, "GET /v1/models HTTP/1.1\r\nHost: " + s.host() + "\r\n\r\n");
  ::shutdown(fd, SHUT_WR);
  const std::string r = read_all(fd);
  ::close(fd);
  EXPECT_EQ(status(r), 200) << r;
}

TEST(HttpServe, NoRangeOnApiEndpointsAndHeadHasNoBody) {
  Live s(ServerOptions{});
  const std::string r = get(s, "/v1/models", "Range: bytes=0-1,0-1,0-1\r\n");
  EXPECT_EQ(status(r), 200);
  EXPECT_EQ(r.find("multipart"), std::string::npos);
  const std::string h =
      roundtrip(s, "HEAD /v1/models HTTP/1.1\r\nHost: " + s.host() + "\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(status(h), 200);
  EXPECT_EQ(body_of(h), "");
  const std::string m = get(s, "/v1/embeddings");
  EXPECT_EQ(status(m), 405);
  EXPECT_EQ(error_code(m), "method_not_allowed");
}

TEST(HttpServe, ApiKeyIsRequiredButNotForHealth) {
  ServerOptions o;
  o.api_key = "secret-key-1";
  Live s(o);
  const std::string none = get(s, "/v1/models");
  EXPECT_EQ(status(none), 401);
  EXPECT_EQ(error_code(none), "invalid_api_key");
  EXPECT_NE(none.find("WWW-Authenticate: Bearer"), std::string::npos);
  EXPECT_EQ(status(get(s, "/v1/models", "Authorization: Bearer wrong-key-1\r\n")), 401);
  EXPECT_EQ(status(get(s, "/v1/models", "Authorization: Bearer secret-key-12\r\n")), 401);
  EXPECT_EQ(status(get(s, "/v1/models", "Authorization: Bearer secret-key-1\r\n")), 200);
  // HTTP Basic with the key as the password (a browser's login prompt for the page).
  EXPECT_EQ(status(get(s, "/v1/models", "Authorization: Basic dXNlcjpzZWNyZXQta2V5LTE=\r\n")),
            200);  // user:secret-key-1
  const std::string page = get(s, "/");
  EXPECT_EQ(status(page), 401);
  EXPECT_NE(page.find("WWW-Authenticate: Basic"), std::string::npos);
  expect_alive(s);  // /health needs no key
  EXPECT_EQ(status(get(s, "/metrics")), 401);
  ServerOptions p = o;
  p.public_metrics = true;
  Live pub(p);
  EXPECT_EQ(status(get(pub, "/metrics")), 200);
}

TEST(HttpServe, ForeignHostsAndCrossSiteFormPostsAreRefused) {
  Live s(ServerOptions{});
  const std::string rebound =
      roundtrip(s, "GET /v1/models HTTP/1.1\r\nHost: evil.example:8080\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(status(rebound), 403);
  EXPECT_EQ(error_code(rebound), "invalid_host");
  EXPECT_EQ(status(roundtrip(s, "GET /v1/models HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")),
            200);
  ServerOptions proxied;
  proxied.allowed_hosts = {"proxy.internal"};
  Live p(proxied);  // a reverse proxy's name, given with --allowed-host
  EXPECT_EQ(status(roundtrip(
                p, "GET /v1/models HTTP/1.1\r\nHost: Proxy.Internal:443\r\nConnection: close\r\n\r\n")),
            200);
  EXPECT_EQ(
      status(roundtrip(p, "GET /v1/models HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n")),
      403);
  const std::string post =
      "POST /v1/embeddings HTTP/1.1\r\nHost: " + s.host() + "\r\nContent-Length: 2\r\nConnection: close\r\n";
  const std::string forged =
      roundtrip(s, post + "Origin: http://evil.example\r\nContent-Type: text/plain\r\n\r\n{}");
  EXPECT_EQ(status(forged), 403);
  EXPECT_EQ(error_code(forged), "cross_origin");
  EXPECT_EQ(
      status(roundtrip(
          s,
          post + "Sec-Fetch-Site: cross-site\r\nContent-Type: application/x-www-form-urlencoded\r\n\r\n{}")),
      403);
  // JSON across sites needs a CORS preflight, which is never granted; same-origin and curl pass.
  EXPECT_EQ(
      status(roundtrip(s, post + "Origin: http://evil.example\r\nContent-Type: application/json\r\n\r\n{}")),
      503);
  EXPECT_EQ(
      status(roundtrip(s, post + "Origin: http://" + s.host() + "\r\nContent-Type: text/plain\r\n\r\n{}")),
      503);
  EXPECT_EQ(status(roundtrip(s, post + "\r\n{}")), 503);
}

TEST(HttpServe, ConnectionsOverTheLimitMakeRoomFromSlowOnes) {
  ServerOptions o;
  o.limits.max_connections = 4;
  Live s(o);
  std::vector<int> idle;
  for (int i = 0; i < 4; ++i) idle.push_back(s.connect());
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  EXPECT_EQ(status(get(s, "/v1/models")), 200);
  for (int fd : idle) ::close(fd);
}

}  // namespace
}  // namespace attn::serve
