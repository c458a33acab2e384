// Fuzzes attn serve's HTTP/1.1 request parser and router (src/serve/http_parse.cc): arbitrary
// bytes are parsed as pipelined requests and routed. Checked: the parser never reads past its input
// or stalls on a whole request; a refusal carries a 4xx/5xx status, a code and a valid-UTF-8
// message; the same bytes fed in two parts give the same result as fed whole; every routed answer
// serializes.
#include <attn/io/json.h>

#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "serve/http.h"

namespace http = attn::serve::http;

namespace {

http::Limits small_limits() {
  http::Limits l;
  l.max_request_line = 256;
  l.max_header_bytes = 1024;
  l.max_headers = 16;
  l.max_body_bytes = 2048;
  l.max_chunk_line = 64;
  return l;
}

void check_error(const http::ParseError& e) {
  FUZZ_ASSERT(e.status >= 400 && e.status <= 505, "refused with status %d", e.status);
  FUZZ_ASSERT(!e.code.empty(), "refused (%d) without a code", e.status);
  FUZZ_ASSERT(attn::json::find_invalid_utf8(e.message) == std::string::npos, "message not UTF-8: %s",
              e.message.c_str());
  FUZZ_ASSERT(e.message.size() < 2048, "message of %zu bytes", e.message.size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const http::Limits limits = small_limits();
  http::Router router;
  router.add("GET", "/health",
             [](http::Request&, http::Response& res) { res.set_content("{}", "application/json"); });
  router.add("POST", "/v1/embeddings", [](http::Request& q, http::Response& res) {
    res.set_content(q.body, "application/json");
    (void)q.get_param_value("text");
  });
  router.set_error([](http::Response& res, int status, const std::string& code, const std::string& msg) {
    FUZZ_ASSERT(attn::json::find_invalid_utf8(msg) == std::string::npos, "router message not UTF-8");
    res.status = status;
    res.set_content(code + ": " + msg, "text/plain");
  });

  // Pipelined requests, one after the other.
  std::string_view rest = in;
  for (int i = 0; i < 32 && !rest.empty(); ++i) {
    const http::ParseResult r = http::parse_request(rest, limits);
    FUZZ_ASSERT(r.used <= rest.size(), "used %zu of %zu bytes", r.used, rest.size());
    if (r.error) {
      check_error(*r.error);
      break;
    }
    if (!r.request) break;  // incomplete
    FUZZ_ASSERT(r.used > 0, "a whole request from no bytes");
    FUZZ_ASSERT(r.request->body.size() <= limits.max_body_bytes, "body of %zu bytes", r.request->body.size());
    http::Request q = *r.request;
    http::Response res;
    router.route(q, res);
    const std::string head = http::serialize_head(res, q.keep_alive, q.method == "HEAD", q.minor, false);
    FUZZ_ASSERT(head.rfind("HTTP/1.1 ", 0) == 0, "bad response head");
    rest.remove_prefix(r.used);
  }

  // Fed in two parts, the first request parses as it does whole.
  if (size > 1) {
    const std::size_t split = data[0] % size;
    http::RequestParser p(limits);
    std::size_t used = p.feed(in.substr(0, split));
    if (!p.done() && !p.error()) {
      FUZZ_ASSERT(used == split, "stopped at %zu of %zu bytes without an end", used, split);
      used += p.feed(in.substr(split));
    }
    const http::ParseResult whole = http::parse_request(in, limits);
    FUZZ_ASSERT(p.done() == whole.request.has_value(), "split and whole disagree on completion");
    FUZZ_ASSERT(p.error().has_value() == whole.error.has_value(), "split and whole disagree on refusal");
    if (whole.error)
      FUZZ_ASSERT(p.error()->status == whole.error->status, "split and whole disagree on status");
    if (whole.request) {
      FUZZ_ASSERT(used == whole.used, "split used %zu, whole %zu", used, whole.used);
      FUZZ_ASSERT(p.request().body == whole.request->body, "split and whole bodies differ");
    }
  }
  return 0;
}
