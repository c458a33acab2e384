// attn serve's HTTP/1.1 request parser, response heads, router and quoting (src/serve/http.h).
// Pure functions of bytes: the fuzz target fuzz/fuzz_http.cc drives them with arbitrary input.
#include <algorithm>
#include <cctype>
#include <cstdio>

#include "serve/http.h"

namespace attn::serve::http {
namespace {

char lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

std::string to_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = lower(c);
  return out;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (lower(a[i]) != lower(b[i])) return false;
  return true;
}

// RFC 9110 tchar.
bool is_tchar(char c) {
  if (std::isalnum(static_cast<unsigned char>(c))) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool is_token(std::string_view s) { return !s.empty() && std::all_of(s.begin(), s.end(), is_tchar); }

std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Comma-separated list members, trimmed, empty ones skipped.
std::vector<std::string_view> list_items(std::string_view v) {
  std::vector<std::string_view> out;
  while (!v.empty()) {
    const std::size_t comma = v.find(',');
    const std::string_view item = trim_ows(v.substr(0, comma));
    if (!item.empty()) out.push_back(item);
    if (comma == std::string_view::npos) break;
    v.remove_prefix(comma + 1);
  }
  return out;
}

// The length of the valid UTF-8 sequence at s[i], or 0.
std::size_t utf8_len(std::string_view s, std::size_t i) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return 1;
  std::size_t n = 0;
  uint32_t cp = 0, min = 0;
  if ((c & 0xE0) == 0xC0)
    n = 2, cp = c & 0x1F, min = 0x80;
  else if ((c & 0xF0) == 0xE0)
    n = 3, cp = c & 0x0F, min = 0x800;
  else if ((c & 0xF8) == 0xF0)
    n = 4, cp = c & 0x07, min = 0x10000;
  else
    return 0;
  if (i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string percent_decode(std::string_view s, bool plus_is_space) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && hex_value(s[i + 1]) >= 0 && hex_value(s[i + 2]) >= 0) {
      out += static_cast<char>(hex_value(s[i + 1]) * 16 + hex_value(s[i + 2]));
      i += 2;
    } else if (plus_is_space && s[i] == '+') {
      out += ' ';
    } else {
      out += s[i];
    }
  }
  return out;
}

}  // namespace

// ---- Request, Response ----------------------------------------------------------------------------

bool Request::has_header(std::string_view name) const {
  return std::any_of(headers.begin(), headers.end(), [&](const Header& h) { return iequals(h.name, name); });
}

std::string Request::header(std::string_view name) const {
  for (const Header& h : headers)
    if (iequals(h.name, name)) return h.value;
  return "";
}

std::string Request::get_param_value(std::string_view name) const {
  std::string_view q = query;
  while (!q.empty()) {
    const std::size_t amp = q.find('&');
    const std::string_view pair = q.substr(0, amp);
    const std::size_t eq = pair.find('=');
    if (percent_decode(pair.substr(0, eq), true) == name)
      return eq == std::string_view::npos ? "" : percent_decode(pair.substr(eq + 1), true);
    if (amp == std::string_view::npos) break;
    q.remove_prefix(amp + 1);
  }
  return "";
}

void Response::set_header(std::string name, std::string value) {
  for (Header& h : headers)
    if (iequals(h.name, name)) {
      h.value = std::move(value);
      return;
    }
  headers.push_back({std::move(name), std::move(value)});
}

const char* status_text(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 204:
      return "No Content";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 411:
      return "Length Required";
    case 413:
      return "Content Too Large";
    case 414:
      return "URI Too Long";
    case 415:
      return "Unsupported Media Type";
    case 417:
      return "Expectation Failed";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Status";
  }
}

std::string serialize_head(const Response& res, bool keep_alive, bool head_only, int minor, bool chunked) {
  (void)minor;
  std::string out = "HTTP/1.1 " + std::to_string(res.status) + " " + status_text(res.status) + "\r\n";
  if (!res.content_type.empty()) out += "Content-Type: " + res.content_type + "\r\n";
  for (const Header& h : res.headers) out += h.name + ": " + h.value + "\r\n";
  if (res.stream) {
    if (chunked) out += "Transfer-Encoding: chunked\r\n";
  } else {
    out += "Content-Length: " + std::to_string(res.body.size()) + "\r\n";
  }
  out += keep_alive ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
  out += "\r\n";
  if (!head_only && !res.stream) out += res.body;
  return out;
}

std::string quote(std::string_view s, std::size_t max_bytes) {
  std::string out;
  std::size_t i = 0;
  while (i < s.size() && i < max_bytes) {
    const std::size_t n = utf8_len(s, i);
    const auto c = static_cast<unsigned char>(s[i]);
    if (n == 0 || (n == 1 && (c < 0x20 || c == 0x7F))) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
      ++i;
    } else {
      if (i + n > max_bytes) break;
      out.append(s.substr(i, n));
      i += n;
    }
  }
  if (i < s.size()) out += "...";
  return out;
}

// ---- the parser -----------------------------------------------------------------------------------

void RequestParser::fail(int status, std::string code, std::string message) {
  if (!error_) error_ = ParseError{status, std::move(code), std::move(message)};
}

std::size_t RequestParser::feed(std::string_view bytes) {
  std::size_t used = 0;
  while (used < bytes.size() && !error_ && state_ != State::done) {
    const std::string_view rest = bytes.substr(used);
    switch (state_) {
      case State::head:
        used += feed_head(rest);
        break;
      case State::body_length: {
        const std::size_t n = static_cast<std::size_t>(std::min<uint64_t>(remaining_, rest.size()));
        req_.body.append(rest.substr(0, n));
        remaining_ -= n;
        used += n;
        if (remaining_ == 0) state_ = State::done;
        break;
      }
      default:
        used += feed_chunked(rest);
        break;
    }
  }
  return used;
}

std::size_t RequestParser::feed_head(std::string_view bytes) {
  std::size_t used = 0;
  while (used < bytes.size() && state_ == State::head && !error_) {
    const std::size_t nl = bytes.find('\n', used);
    const std::size_t end = nl == std::string_view::npos ? bytes.size() : nl + 1;
    line_.append(bytes.substr(used, end - used));
    head_bytes_ += end - used;
    used = end;
    if (first_line_ && line_.size() > limits_.max_request_line + 2) {
      fail(414, "uri_too_long",
           "the request line is longer than " + std::to_string(limits_.max_request_line) + " bytes");
      break;
    }
    if (head_bytes_ > limits_.max_header_bytes) {
      fail(431, "headers_too_large",
           "the request head is larger than " + std::to_string(limits_.max_header_bytes) + " bytes");
      break;
    }
    if (nl == std::string_view::npos) break;
    std::string_view line = line_;
    line.remove_suffix(1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const bool more = head_line(line);
    line_.clear();
    if (!more && !error_) finish_head();
  }
  return used;
}

bool RequestParser::head_line(std::string_view line) {
  if (first_line_) {
    if (line.empty()) return true;  // RFC 9112 2.2: empty lines before the request line are ignored
    first_line_ = false;
    const std::size_t sp1 = line.find(' ');
    const std::size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
    if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
      fail(400, "bad_request_line",
           "the request line must be 'METHOD TARGET HTTP/1.1'; got '" + quote(line) + "'");
      return true;
    }
    const std::string_view method = line.substr(0, sp1), target = line.substr(sp1 + 1, sp2 - sp1 - 1),
                           version = line.substr(sp2 + 1);
    if (!is_token(method) || method.size() > 32) {
      fail(400, "bad_method", "the method must be a token such as GET or POST; got '" + quote(method) + "'");
      return true;
    }
    if (version == "HTTP/1.1") {
      req_.minor = 1;
    } else if (version == "HTTP/1.0") {
      req_.minor = 0;
      req_.keep_alive = false;
    } else if (version.size() == 8 && version.substr(0, 5) == "HTTP/" && std::isdigit(version[5]) &&
               version[6] == '.' && std::isdigit(version[7])) {
      fail(505, "http_version_not_supported",
           "this server speaks HTTP/1.0 and HTTP/1.1; got " + quote(version));
      return true;
    } else {
      fail(400, "bad_request_line", "the request line must end with HTTP/1.1; got '" + quote(version) + "'");
      return true;
    }
    for (const char c : target)
      if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7F) {
        fail(400, "bad_target", "the request target holds a control character");
        return true;
      }
    req_.method.assign(method);
    req_.target.assign(target);
    std::string_view t = target;
    if (t.size() > 7 &&
        (iequals(t.substr(0, 7), "http://") || (t.size() > 8 && iequals(t.substr(0, 8), "https://")))) {
      // absolute-form: the path starts at the first '/' after the authority
      const std::size_t start = t.find("//") + 2;
      const std::size_t slash = t.find_first_of("/?", start);
      t = slash == std::string_view::npos ? std::string_view("/") : t.substr(slash);
      if (!t.empty() && t.front() == '?') {
        req_.path = "/";
        req_.query.assign(t.substr(1));
        return true;
      }
    } else if (t == "*" && method == "OPTIONS") {
      req_.path = "*";
      return true;
    } else if (t.empty() || t.front() != '/') {
      fail(400, "bad_target", "the request target must be a path starting with '/'; got '" + quote(t) + "'");
      return true;
    }
    t = t.substr(0, t.find('#'));
    const std::size_t q = t.find('?');
    req_.path.assign(t.substr(0, q));
    if (q != std::string_view::npos) req_.query.assign(t.substr(q + 1));
    return true;
  }
  if (line.empty()) return false;
  if (line.front() == ' ' || line.front() == '\t') {
    fail(400, "bad_header", "a header line starts with white space (obsolete line folding is not accepted)");
    return true;
  }
  const std::size_t colon = line.find(':');
  if (colon == std::string_view::npos) {
    fail(400, "bad_header", "a header line has no colon: '" + quote(line) + "'");
    return true;
  }
  const std::string_view name = line.substr(0, colon), value = trim_ows(line.substr(colon + 1));
  if (!is_token(name)) {
    fail(400, "bad_header",
         "a header name must be a token (no spaces before the colon); got '" + quote(name) + "'");
    return true;
  }
  for (const char c : value)
    if ((static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7F) {
      fail(400, "bad_header", "the header " + quote(name) + " holds a control character");
      return true;
    }
  if (req_.headers.size() >= limits_.max_headers) {
    fail(431, "too_many_headers",
         "the request has more than " + std::to_string(limits_.max_headers) + " header fields");
    return true;
  }
  req_.headers.push_back({to_lower(name), std::string(value)});
  return true;
}

void RequestParser::finish_head() {
  if (first_line_) return fail(400, "bad_request_line", "the request has no request line");
  int hosts = 0;
  std::vector<std::string_view> te, cl;
  std::string_view encoding, expect;
  for (const Header& h : req_.headers) {
    if (h.name == "host")
      ++hosts;
    else if (h.name == "transfer-encoding")
      for (std::string_view i : list_items(h.value)) te.push_back(i);
    else if (h.name == "content-length") {
      const auto items = list_items(h.value);
      if (items.empty()) return fail(400, "bad_content_length", "Content-Length is empty");
      for (std::string_view i : items) cl.push_back(i);
    } else if (h.name == "content-encoding")
      for (std::string_view i : list_items(h.value))
        if (!iequals(i, "identity")) encoding = i;
    if (h.name == "connection")
      for (std::string_view i : list_items(h.value)) {
        if (iequals(i, "close"))
          req_.keep_alive = false;
        else if (iequals(i, "keep-alive") && req_.minor == 0)
          req_.keep_alive = true;
      }
    if (h.name == "expect") expect = h.value;
  }
  if (req_.minor == 1 && hosts == 0)
    return fail(400, "missing_host", "an HTTP/1.1 request must have a Host header");
  if (hosts > 1) return fail(400, "bad_host", "the request has " + std::to_string(hosts) + " Host headers");
  if (!te.empty()) {
    if (!cl.empty())
      return fail(400, "conflicting_framing", "the request has both Transfer-Encoding and Content-Length");
    if (req_.minor == 0)
      return fail(400, "conflicting_framing", "an HTTP/1.0 request cannot use Transfer-Encoding");
    if (te.size() != 1 || !iequals(te[0], "chunked"))
      return fail(501, "unsupported_transfer_encoding",
                  "the only transfer coding accepted is 'chunked'; got '" + quote(te.back()) + "'");
  }
  uint64_t length = 0;
  for (std::size_t i = 0; i < cl.size(); ++i) {
    if (cl[i] != cl[0])
      return fail(400, "conflicting_framing", "the request has different Content-Length values");
    if (!std::all_of(cl[i].begin(), cl[i].end(), [](char c) { return c >= '0' && c <= '9'; }))
      return fail(400, "bad_content_length",
                  "Content-Length must be a decimal number; got '" + quote(cl[i]) + "'");
  }
  if (!cl.empty()) {
    std::string_view d = cl[0];
    while (d.size() > 1 && d.front() == '0') d.remove_prefix(1);
    if (d.size() > 18)
      length = UINT64_MAX;
    else
      for (char c : d) length = length * 10 + static_cast<uint64_t>(c - '0');
    if (length > limits_.max_body_bytes)
      return fail(413, "body_too_large",
                  "the request body has " + (d.size() > 18 ? quote(d, 24) : std::string(d)) +
                      " bytes; the limit is " + std::to_string(limits_.max_body_bytes) +
                      " bytes (--max-body-bytes)");
  }
  if (!encoding.empty())
    return fail(415, "unsupported_content_encoding",
                "compressed request bodies are not accepted; send the body without Content-Encoding (got '" +
                    quote(encoding) + "')");
  if (!expect.empty()) {
    if (!iequals(expect, "100-continue"))
      return fail(417, "expectation_failed",
                  "the only expectation accepted is '100-continue'; got '" + quote(expect) + "'");
    expect_continue_ = req_.minor == 1;
  }
  if (!te.empty()) {
    state_ = State::chunk_size;
  } else if (!cl.empty()) {
    remaining_ = length;
    state_ = length == 0 ? State::done : State::body_length;
  } else if (req_.method == "POST" || req_.method == "PUT" || req_.method == "PATCH") {
    return fail(411, "length_required",
                "a " + req_.method + " request needs a Content-Length or a chunked body");
  } else {
    state_ = State::done;
  }
}

std::size_t RequestParser::feed_chunked(std::string_view bytes) {
  std::size_t used = 0;
  while (used < bytes.size() && !error_ && state_ != State::done) {
    if (state_ == State::chunk_data) {
      const std::size_t n = static_cast<std::size_t>(std::min<uint64_t>(remaining_, bytes.size() - used));
      req_.body.append(bytes.substr(used, n));
      remaining_ -= n;
      used += n;
      if (remaining_ == 0) state_ = State::chunk_data_end;
      continue;
    }
    // A line: the chunk size, the CRLF after a chunk's data, or a trailer.
    const std::size_t nl = bytes.find('\n', used);
    const std::size_t end = nl == std::string_view::npos ? bytes.size() : nl + 1;
    line_.append(bytes.substr(used, end - used));
    used = end;
    const std::size_t limit = state_ == State::trailers ? limits_.max_header_bytes : limits_.max_chunk_line;
    if (line_.size() > limit) {
      fail(400, "bad_chunk",
           "a chunk-size or trailer line is longer than " + std::to_string(limit) + " bytes");
      break;
    }
    if (nl == std::string_view::npos) break;
    std::string_view line = line_;
    line.remove_suffix(1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (state_ == State::chunk_data_end) {
      if (!line.empty()) fail(400, "bad_chunk", "a chunk's data is longer than its size says");
      state_ = State::chunk_size;
    } else if (state_ == State::trailers) {
      head_bytes_ += line_.size();
      if (head_bytes_ > limits_.max_header_bytes)
        fail(431, "headers_too_large",
             "the request's trailers make its head larger than " + std::to_string(limits_.max_header_bytes) +
                 " bytes");
      else if (line.empty())
        state_ = State::done;
    } else {  // chunk_size
      const std::string_view digits = line.substr(0, line.find_first_of("; \t"));
      uint64_t size = 0;
      if (digits.empty() || digits.size() > 15 ||
          !std::all_of(digits.begin(), digits.end(), [](char c) { return hex_value(c) >= 0; })) {
        fail(400, "bad_chunk", "a chunk size must be a hexadecimal number; got '" + quote(line, 32) + "'");
      } else {
        for (char c : digits) size = size * 16 + static_cast<uint64_t>(hex_value(c));
        if (size == 0) {
          state_ = State::trailers;
        } else if (req_.body.size() + size > limits_.max_body_bytes) {
          fail(413, "body_too_large",
               "the chunked request body grows past the limit of " + std::to_string(limits_.max_body_bytes) +
                   " bytes (--max-body-bytes)");
        } else {
          remaining_ = size;
          state_ = State::chunk_data;
        }
      }
    }
    line_.clear();
  }
  return used;
}

ParseResult parse_request(std::string_view bytes, const Limits& limits) {
  RequestParser p(limits);
  ParseResult r;
  r.used = p.feed(bytes);
  if (p.error())
    r.error = *p.error();
  else if (p.done())
    r.request = std::move(p.request());
  return r;
}

// ---- the router -----------------------------------------------------------------------------------

void Router::add(std::string method, std::string path, Handler h) {
  routes_.push_back({std::move(method), std::move(path), std::move(h)});
}

bool Router::knows(std::string_view path) const {
  return std::any_of(routes_.begin(), routes_.end(), [&](const Route& r) { return r.path == path; });
}

void Router::route(Request& req, Response& res) const {
  std::string allow;
  for (const Route& r : routes_) {
    if (r.path != req.path) continue;
    if (r.method == req.method || (req.method == "HEAD" && r.method == "GET")) return r.handler(req, res);
    allow += (allow.empty() ? "" : ", ") + r.method;
  }
  if (allow.empty()) {
    error_(res, 404, "unknown_url",
           "no route for " + quote(req.method, 16) + " " + quote(req.path) +
               "; the endpoints are listed in docs/serve.md");
  } else {
    if (allow.find("GET") != std::string::npos) allow += ", HEAD";
    res.set_header("Allow", allow);
    error_(res, 405, "method_not_allowed",
           quote(req.path) + " answers " + allow + "; got " + quote(req.method, 16));
  }
}

}  // namespace attn::serve::http
