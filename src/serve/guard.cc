// The checks every request passes before its route (src/serve/impl.h): the Host header against
// the bound address (DNS rebinding), the API key, and cross-site form posts (CSRF).
#include <algorithm>
#include <cctype>

#include "serve/impl.h"

namespace attn::serve::detail {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool starts_with_ci(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && lower(s.substr(0, prefix.size())) == lower(prefix);
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The host name of a Host header or an origin's authority: "[::1]:8080" -> "::1", "a.b:80" -> "a.b".
std::string host_name(std::string_view authority) {
  if (!authority.empty() && authority.front() == '[') {
    const std::size_t close = authority.find(']');
    return lower(authority.substr(1, close == std::string_view::npos ? std::string_view::npos : close - 1));
  }
  return lower(authority.substr(0, authority.rfind(':')));
}

// Standard base64 (RFC 4648), for HTTP Basic credentials; nullopt when malformed.
std::optional<std::string> base64_decode(std::string_view in) {
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (const char c : in) {
    int v;
    if (c >= 'A' && c <= 'Z')
      v = c - 'A';
    else if (c >= 'a' && c <= 'z')
      v = c - 'a' + 26;
    else if (c >= '0' && c <= '9')
      v = c - '0' + 52;
    else if (c == '+')
      v = 62;
    else if (c == '/')
      v = 63;
    else if (c == '=')
      break;
    else
      return std::nullopt;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xFF);
    }
  }
  return out;
}

bool is_page(const std::string& path) { return path == "/" || path == "/view"; }

}  // namespace

bool is_loopback_host(std::string_view host) {
  const std::string h = lower(host);
  return h == "localhost" || h == "::1" || h == "[::1]" || h.rfind("127.", 0) == 0 ||
         (h.size() > 10 && h.compare(h.size() - 10, 10, ".localhost") == 0);
}

bool equal_in_constant_time(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const std::size_t n = std::max(a.size(), b.size());
  for (std::size_t i = 0; i < n; ++i) {
    const auto x = static_cast<unsigned char>(i < a.size() ? a[i] : 0);
    const auto y = static_cast<unsigned char>(i < b.size() ? b[i] : 0);
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

void Impl::check_host(const http::Request& req) const {
  if (!is_loopback_host(options.host)) return;  // bound beyond loopback: --host opened it
  if (!req.has_header("host")) return;          // HTTP/1.0 (HTTP/1.1 without Host is refused earlier)
  const std::string value = req.header("host");
  const std::string name = host_name(value);
  if (is_loopback_host(name) || name == lower(options.host)) return;
  for (const std::string& h : options.allowed_hosts)
    if (name == lower(h)) return;
  throw HttpError(403,
                  "the Host header '" + http::quote(value) + "' is not this server's: bound to " +
                      options.host +
                      ", it answers to localhost and 127.0.0.1 (add names with --allowed-host)",
                  "", "invalid_host");
}

void Impl::check_key(const http::Request& req, http::Response& res) const {
  const std::string& key = options.api_key;
  if (key.empty() || req.path == "/health" || (req.path == "/metrics" && options.public_metrics)) return;
  const std::string auth = req.header("authorization");
  bool ok = false;
  if (starts_with_ci(auth, "Bearer ")) {
    ok = equal_in_constant_time(trim(std::string_view(auth).substr(7)), key);
  } else if (starts_with_ci(auth, "Basic ")) {
    const std::optional<std::string> cred = base64_decode(trim(std::string_view(auth).substr(6)));
    const std::size_t colon = cred ? cred->find(':') : std::string::npos;
    ok = colon != std::string::npos && equal_in_constant_time(std::string_view(*cred).substr(colon + 1), key);
  }
  if (ok) return;
  res.set_header("WWW-Authenticate",
                 is_page(req.path) ? "Basic realm=\"attn serve\", charset=\"UTF-8\"" : "Bearer");
  throw HttpError(401,
                  auth.empty() ? "this server needs an API key: send the header 'Authorization: Bearer KEY'"
                               : "the API key is not valid (send 'Authorization: Bearer KEY')",
                  "", "invalid_api_key");
}

void Impl::check_origin(const http::Request& req) const {
  const std::string site = lower(req.header("sec-fetch-site"));
  const bool cross_site = site == "cross-site" || site == "same-site";
  if (req.method == "GET" || req.method == "HEAD" || req.method == "OPTIONS") {
    // A page elsewhere may link to the viewer (a navigation) but not make it work in the background.
    if (req.path == "/view" && cross_site && lower(req.header("sec-fetch-mode")) != "navigate")
      throw HttpError(403, "the viewer is not served to other sites' pages (Sec-Fetch-Site: " + site + ")",
                      "", "cross_origin");
    return;
  }
  bool cross = cross_site;
  const std::string origin = req.header("origin");
  if (!origin.empty()) {
    std::string_view o = origin;
    const std::size_t scheme = o.find("://");
    if (scheme == std::string_view::npos) {
      cross = true;  // "null" (a sandboxed page, a file) or malformed
    } else {
      o.remove_prefix(scheme + 3);
      if (lower(o) != lower(req.header("host"))) cross = true;
    }
  }
  if (!cross) return;
  std::string type = lower(trim(req.header("content-type").substr(0, req.header("content-type").find(';'))));
  // A browser sends JSON across sites only after a CORS preflight, which this server never grants;
  // form encodings and text/plain it sends without asking: those are what a hostile page can forge.
  if (type == "application/json") return;
  throw HttpError(403,
                  "a cross-site request (Origin '" + http::quote(origin) + "') with Content-Type '" +
                      http::quote(type) + "' is refused: API clients send 'Content-Type: application/json'",
                  "", "cross_origin");
}

}  // namespace attn::serve::detail
