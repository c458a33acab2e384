// Request parsing and response helpers of the server (src/serve/impl.h).
#include <attn/core/error.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "serve/impl.h"

namespace attn::serve::detail {

json::Value parse_body(const http::Request& req) {
  const std::size_t bad = json::find_invalid_utf8(req.body);
  if (bad != std::string::npos)
    throw bad_request("the request body is not valid UTF-8 (at byte " + std::to_string(bad) + ")", "",
                      "invalid_utf8");
  json::Value v;
  try {
    json::ParseOptions po;
    po.max_depth = 32;
    v = json::parse(req.body, po);
  } catch (const Error& e) {
    throw bad_request(std::string("the request body is not valid JSON: ") + e.what(), "", "invalid_json");
  }
  if (!v.is_object())
    throw bad_request(std::string("the request body must be a JSON object; got ") + json::type_name(v.type()),
                      "", "invalid_json");
  return v;
}

std::string excerpt(std::string_view s, std::size_t max_bytes) {
  const std::string q = http::quote(s, max_bytes);  // "..." when cut
  return s.size() <= max_bytes ? q : q + " (" + std::to_string(s.size()) + " bytes)";
}

const json::Value* member(const json::Value& body, const char* name) {
  const json::Value* v = body.find(name);
  return v == nullptr || v->is_null() ? nullptr : v;
}

namespace {
HttpError wrong_type(const char* name, const char* expected, const json::Value& v) {
  return bad_request(std::string("'") + name + "' must be " + expected + "; got " + json::type_name(v.type()),
                     name, "invalid_type");
}
}  // namespace

std::optional<std::string> opt_string(const json::Value& body, const char* name) {
  const json::Value* v = member(body, name);
  if (!v) return std::nullopt;
  if (!v->is_string()) throw wrong_type(name, "a string", *v);
  return v->as_string();
}

std::optional<int64_t> opt_integer(const json::Value& body, const char* name, int64_t lo, int64_t hi,
                                   const std::string& limit_note) {
  const json::Value* v = member(body, name);
  if (!v) return std::nullopt;
  if (!v->is_integer()) throw wrong_type(name, "an integer", *v);
  const int64_t i = v->as_int64();
  if (i < lo || i > hi)
    throw bad_request(std::string("'") + name + "' must be in [" + std::to_string(lo) + ", " +
                          std::to_string(hi) + "]" + limit_note + "; got " + std::to_string(i),
                      name, "invalid_value");
  return i;
}

std::optional<double> opt_number(const json::Value& body, const char* name, double lo, double hi) {
  const json::Value* v = member(body, name);
  if (!v) return std::nullopt;
  if (!v->is_number()) throw wrong_type(name, "a number", *v);
  const double d = v->as_double();
  if (!(d >= lo && d <= hi)) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "'%s' must be in [%g, %g]; got %g", name, lo, hi, d);
    throw bad_request(buf, name, "invalid_value");
  }
  return d;
}

std::optional<bool> opt_bool(const json::Value& body, const char* name) {
  const json::Value* v = member(body, name);
  if (!v) return std::nullopt;
  if (!v->is_bool()) throw wrong_type(name, "true or false", *v);
  return v->as_bool();
}

std::optional<AttentionSpec> opt_attention(const json::Value& body, const std::string& name) {
  const json::Value* v = member(body, name.c_str());
  if (!v) return std::nullopt;
  if (v->is_bool()) {
    if (!v->as_bool()) return std::nullopt;
    return AttentionSpec{};
  }
  if (!v->is_object()) throw wrong_type(name.c_str(), "an object {\"layers\": [...], \"heads\": [...]}", *v);
  AttentionSpec spec;
  for (const auto& [key, val] : v->members()) {
    std::vector<int64_t>* out = key == "layers" ? &spec.layers : key == "heads" ? &spec.heads : nullptr;
    if (out == nullptr)
      throw bad_request("'" + name + "' takes \"layers\" and \"heads\"; got \"" + excerpt(key) + "\"", name,
                        "invalid_value");
    if (val.is_null()) continue;
    if (!val.is_array() || val.size() > 1024)
      throw bad_request("'" + name + "." + key + "' must be a list of at most 1024 indices (from 0)",
                        name + "." + key, "invalid_type");
    for (const json::Value& i : val.items()) {
      if (!i.is_integer() || i.as_int64() < 0)
        throw bad_request(
            "'" + name + "." + key + "' must hold indices numbered from 0; got " + excerpt(json::dump(i)),
            name + "." + key, "invalid_value");
      // Each index once: a repeated one would copy the same weights again (64 x 64 repeats of layer 0
      // and head 0 were ~2 GiB).
      if (std::find(out->begin(), out->end(), i.as_int64()) != out->end())
        throw bad_request("'" + name + "." + key + "' lists " + key.substr(0, key.size() - 1) + " " +
                              std::to_string(i.as_int64()) + " more than once; list each index once",
                          name + "." + key, "duplicate_index");
      out->push_back(i.as_int64());
    }
  }
  return spec;
}

int64_t attention_values(const AttentionSpec& spec, int64_t layers, int64_t heads, int64_t rows,
                         int64_t cols) {
  for (const int64_t l : spec.layers)
    if (l >= layers)
      throw bad_request("attention.layers: layer " + std::to_string(l) + " does not exist; the model has " +
                            std::to_string(layers) + " layers (0 to " + std::to_string(layers - 1) + ")",
                        "attention.layers", "invalid_value");
  for (const int64_t h : spec.heads)
    if (h >= heads)
      throw bad_request("attention.heads: head " + std::to_string(h) + " does not exist; the model has " +
                            std::to_string(heads) + " heads (0 to " + std::to_string(heads - 1) + ")",
                        "attention.heads", "invalid_value");
  const auto nl = spec.layers.empty() ? layers : static_cast<int64_t>(spec.layers.size());
  const auto nh = spec.heads.empty() ? heads : static_cast<int64_t>(spec.heads.size());
  return nl * nh * rows * cols;  // at most 1024 x 1024 x rows x cols: no overflow for any context
}

void check_attention_values(int64_t values, int64_t max_values, const std::string& what) {
  if (values > max_values)
    throw bad_request("the attention asked for holds " + what + std::to_string(values) +
                          " numbers; the limit is " + std::to_string(max_values) +
                          " (--max-attention-values): ask for fewer layers or heads, or a shorter text",
                      "attention", "attention_too_large");
}

std::string check_model(const json::Value& body, const std::string& what, const std::string& id,
                        const std::vector<std::string>& aliases) {
  const std::optional<std::string> m = opt_string(body, "model");
  if (id.empty())
    throw HttpError(404,
                    "this server has no " + what + " model (start it with --" +
                        (what == "embedding"        ? "embed"
                         : what == "classification" ? "classify"
                                                    : "generate") +
                        ")",
                    "model", "model_not_found");
  if (!m || *m == id) return id;
  for (const std::string& a : aliases)
    if (*m == a) return id;
  throw HttpError(
      404, "the model '" + excerpt(*m) + "' does not exist here; the " + what + " model is '" + id + "'",
      "model", "model_not_found");
}

viz::Export filter_export(viz::Export e, const AttentionSpec& spec, int64_t max_values) {
  int64_t values = 0;
  for (viz::AttentionSet& set : e.sets) {
    const auto L = static_cast<int64_t>(set.layers.size());
    std::vector<int64_t> layers = spec.layers;
    if (layers.empty())
      for (int64_t l = 0; l < L; ++l) layers.push_back(l);
    std::vector<viz::Layer> kept;
    for (const int64_t l : layers) {
      if (l >= L)
        throw bad_request("attention.layers: layer " + std::to_string(l) + " does not exist; the model has " +
                              std::to_string(L) + " layers (0 to " + std::to_string(L - 1) + ")",
                          "attention.layers", "invalid_value");
      const viz::Layer& src = set.layers[static_cast<std::size_t>(l)];
      std::vector<int64_t> heads = spec.heads;
      if (heads.empty())
        for (int64_t h = 0; h < src.heads; ++h) heads.push_back(h);
      viz::Layer out;
      out.heads = static_cast<int64_t>(heads.size());
      out.rows = src.rows;
      out.cols = src.cols;
      for (const int64_t h : heads) {
        if (h >= src.heads)
          throw bad_request("attention.heads: head " + std::to_string(h) + " does not exist; the model has " +
                                std::to_string(src.heads) + " heads (0 to " + std::to_string(src.heads - 1) +
                                ")",
                            "attention.heads", "invalid_value");
        const auto n = static_cast<std::size_t>(src.rows * src.cols);
        const auto first = src.w.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(h) * n);
        out.w.insert(out.w.end(), first, first + static_cast<std::ptrdiff_t>(n));
      }
      values += out.heads * out.rows * out.cols;
      kept.push_back(std::move(out));
    }
    set.layers = std::move(kept);
    if (&set == &e.sets.front()) {
      // The kept layers' own names where the export has them (Gemma 3's say which layers slide).
      std::vector<std::string> names;
      for (const int64_t l : layers)
        names.push_back(static_cast<std::size_t>(l) < e.layer_names.size()
                            ? e.layer_names[static_cast<std::size_t>(l)]
                            : "layer " + std::to_string(l));
      e.layer_names = std::move(names);
    }
  }
  if (e.sets.size() != 1) e.layer_names.clear();
  check_attention_values(values, max_values, "");
  return e;
}

json::Value export_value(const viz::Export& e) { return json::parse(viz::export_json(e)); }

namespace {
// The code of an error that names none (every error body carries one).
std::string default_code(int status) {
  switch (status) {
    case 400:
      return "invalid_request";
    case 401:
      return "invalid_api_key";
    case 403:
      return "forbidden";
    case 404:
      return "not_found";
    case 405:
      return "method_not_allowed";
    case 408:
      return "request_timeout";
    case 413:
      return "body_too_large";
    case 429:
      return "rate_limited";
    case 500:
      return "internal_error";
    case 503:
      return "unavailable";
    default:
      return "http_" + std::to_string(status);
  }
}
}  // namespace

std::string error_body(const HttpError& e) {
  // Messages may quote client input: at most 1 KiB of a message, always valid UTF-8.
  const std::string_view what = e.what();
  const bool clean = what.size() <= 1024 && json::find_invalid_utf8(what) == std::string::npos;
  std::string out = "{\"error\":{\"message\":";
  json::write_string(out, clean ? std::string(what) : http::quote(what, 1024));
  out += ",\"type\":";
  json::write_string(out, e.type);
  out += ",\"param\":";
  if (e.param.empty())
    out += "null";
  else
    json::write_string(out, http::quote(e.param, 128));
  out += ",\"code\":";
  json::write_string(out, e.code.empty() ? default_code(e.status) : e.code);
  out += "}}";
  return out;
}

void send_json(http::Response& res, int status, const std::string& body) {
  res.status = status;
  res.set_content(body, "application/json");
}

void send_error(http::Response& res, const HttpError& e) {
  if (e.retry_after_s > 0) res.set_header("Retry-After", std::to_string(e.retry_after_s));
  send_json(res, e.status, error_body(e));
}

std::string base64(const void* data, std::size_t n) {
  static const char* t = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const auto* p = static_cast<const unsigned char*>(data);
  std::string out;
  out.reserve((n + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 2 < n; i += 3) {
    const uint32_t v = (p[i] << 16) | (p[i + 1] << 8) | p[i + 2];
    out += t[v >> 18];
    out += t[(v >> 12) & 63];
    out += t[(v >> 6) & 63];
    out += t[v & 63];
  }
  if (i < n) {
    const uint32_t v = (p[i] << 16) | (i + 1 < n ? p[i + 1] << 8 : 0);
    out += t[v >> 18];
    out += t[(v >> 12) & 63];
    out += i + 1 < n ? t[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

void append_float(std::string& out, float v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

int64_t unix_time() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string new_id(const char* prefix) {
  static std::atomic<uint64_t> counter{0};
  const uint64_t n = counter.fetch_add(1) + 1;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s-%llx%06llx", prefix, static_cast<unsigned long long>(unix_time()),
                static_cast<unsigned long long>(n));
  return buf;
}

}  // namespace attn::serve::detail
