// The seeded generator of `attn quiz` and the engine helpers its questions use.
#include <attn/core/error.h>
#include <attn/ops/attention.h>

#include <cmath>

#include "quiz_internal.h"

namespace attn::teach::quiz {

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::numeric:
      return "numeric";
    case Kind::structure:
      return "structure";
    case Kind::path:
      return "path";
  }
  return "?";
}

const char* kind_title(Kind k, Lang lang) {
  if (lang == Lang::en) return kind_name(k);
  switch (k) {
    case Kind::numeric:
      return "数值";
    case Kind::structure:
      return "结构";
    case Kind::path:
      return "路径";
  }
  return "?";
}

Choice choice(Lang lang, const std::string& en, const std::string& zh, std::vector<std::string> aliases) {
  Choice c;
  c.text = tr(lang, en, zh);
  c.aliases = std::move(aliases);
  c.aliases.push_back(en);
  c.aliases.push_back(zh);
  return c;
}

std::optional<Kind> parse_kind(const std::string& s) {
  if (s == "numeric") return Kind::numeric;
  if (s == "structure") return Kind::structure;
  if (s == "path") return Kind::path;
  ATTN_CHECK(s == "all", "--kind: expected numeric, structure, path or all; got '", s, "'");
  return std::nullopt;
}

// ---- random numbers ---------------------------------------------------------------

uint64_t Rng::next() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double Rng::uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

int64_t Rng::range(int64_t lo, int64_t hi) {
  ATTN_CHECK(lo <= hi, "quiz: empty random range [", lo, ", ", hi, "]");
  const uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
  return lo + static_cast<int64_t>(next() % span);  // the bias is negligible for these tiny spans
}

double Rng::normal() {
  const double u1 = 1.0 - uniform();  // (0, 1]
  const double u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

double Rng::rounded(double lo, double hi, int decimals) {
  const double p = std::pow(10.0, decimals);
  double x = std::round((lo + (hi - lo) * uniform()) * p) / p;
  if (x == 0) x = 0;  // no -0
  return x;
}

// ---- the quiz ---------------------------------------------------------------------

std::vector<Question> generate(std::optional<Kind> kind, int64_t count, uint64_t seed, Lang lang) {
  ATTN_CHECK(count >= 1, "--count must be >= 1; got ", count);
  Rng rng(seed);
  std::vector<Question> out;
  static const Kind kAll[] = {Kind::numeric, Kind::structure, Kind::path};
  for (int64_t i = 0; i < count; ++i) {
    // With every kind, the kinds take turns, so any 3 consecutive questions cover all.
    const Kind k = kind ? *kind : kAll[i % 3];
    switch (k) {
      case Kind::numeric:
        out.push_back(numeric_question(rng, lang));
        out.back().lang = lang;
        break;
      case Kind::structure:
        out.push_back(structure_question(rng, lang));
        out.back().lang = lang;
        break;
      case Kind::path:
        out.push_back(path_question(rng, lang));
        out.back().lang = lang;
        break;
    }
  }
  return out;
}

// ---- the engine -------------------------------------------------------------------

std::vector<double> engine_softmax(const std::vector<double>& scores, double scale) {
  const int64_t n = static_cast<int64_t>(scores.size());
  std::vector<double> eye(static_cast<std::size_t>(n * n), 0.0);
  for (int64_t j = 0; j < n; ++j) eye[static_cast<std::size_t>(j * n + j)] = 1;
  const Tensor q = Tensor::from(scores, {1, 1, 1, n});  // q: [1, 1, 1, n], q·k_j = scores[j]
  const Tensor k = Tensor::from(eye, {1, 1, n, n});     // k: [1, 1, n, n] identity
  AttentionOptions o;
  o.scale = scale;
  o.backend = Backend::reference;  // fp64
  o.capture.enabled = true;
  const std::vector<double> w = attention(q, k, k, o).weights.to_vector();  // weights: [1, 1, 1, n]

  // The same by arithmetic: exp(scale·s_j − max) / sum.
  double mx = scores[0] * scale, sum = 0;
  for (double s : scores) mx = std::max(mx, s * scale);
  for (double s : scores) sum += std::exp(s * scale - mx);
  for (int64_t j = 0; j < n; ++j) {
    const double expect = std::exp(scores[static_cast<std::size_t>(j)] * scale - mx) / sum;
    const double diff = std::fabs(expect - w[static_cast<std::size_t>(j)]);
    ATTN_CHECK(diff <= 1e-12, "quiz: the engine's softmax weight of position ", j, " is ",
               w[static_cast<std::size_t>(j)], "; arithmetic gives ", expect,
               " (expected |difference| <= 1e-12)");
  }
  return w;
}

std::vector<bool> engine_visible(const MaskSpec& m, int64_t row) {
  const Tensor q = Tensor::zeros({1, 1, m.lq, 1}, DType::f64);   // q: [1, 1, Lq, 1]
  const Tensor kv = Tensor::zeros({1, 1, m.lk, 1}, DType::f64);  // k, v: [1, 1, Lk, 1]
  AttentionOptions o;
  o.causal = m.causal;
  o.align = m.bottom_right ? attn::Align::bottom_right : attn::Align::top_left;
  o.window_left = m.window_left;
  o.window_right = m.window_right;
  o.backend = Backend::reference;
  o.capture.enabled = true;
  o.capture.rows = {row};
  const std::vector<double> w = attention(q, kv, kv, o).weights.to_vector();  // weights: [1, 1, 1, Lk]
  std::vector<bool> visible(w.size());
  for (std::size_t j = 0; j < w.size(); ++j) visible[j] = w[j] > 0;
  return visible;
}

}  // namespace attn::teach::quiz
