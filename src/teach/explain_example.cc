// The worked example's inputs and the helpers every explain mode shares.
#include <attn/core/error.h>
#include <attn/ops/attention.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>

#include "explain_internal.h"

namespace attn::teach {

// ---- matrices ---------------------------------------------------------------

std::vector<double> Mat::row(int64_t r) const {
  return std::vector<double>(v.begin() + r * cols, v.begin() + (r + 1) * cols);
}

Mat Mat::cols_slice(int64_t first, int64_t count) const {
  Mat m(rows, count);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < count; ++c) m(r, c) = (*this)(r, first + c);
  return m;
}

json::Value Mat::json() const { return matrix(v, rows, cols); }

Mat matmul(const Mat& a, const Mat& b) {
  ATTN_CHECK(a.cols == b.rows, "explain: matmul of [", a.rows, ", ", a.cols, "] by [", b.rows, ", ", b.cols,
             "] needs matching inner sizes");
  Mat c(a.rows, b.cols);
  for (int64_t i = 0; i < a.rows; ++i)
    for (int64_t j = 0; j < b.cols; ++j) {
      double s = 0;
      for (int64_t k = 0; k < a.cols; ++k) s += a(i, k) * b(k, j);
      c(i, j) = s;
    }
  return c;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// ---- the example --------------------------------------------------------------

namespace {

// Feature (row of X, row of every W) and projected-dimension names. The first
// four dimensions form head 0 (the walkthrough's d_k = 4), the last four head 1.
const std::vector<std::string> kFeatures = {"time",     "weather", "punct",  "person",
                                            "negation", "action",  "object", "rain"};
const std::vector<std::string> kDims = {"action", "object",  "rain",  "person",
                                        "time",   "weather", "punct", "negation"};

using Rows = std::map<std::string, std::vector<double>>;

// A [features, 8] matrix from named rows; missing rows are zero.
Mat from_rows(const Rows& rows) {
  Mat m(static_cast<int64_t>(kFeatures.size()), static_cast<int64_t>(kDims.size()));
  for (const auto& [name, values] : rows) {
    const auto f = std::find(kFeatures.begin(), kFeatures.end(), name) - kFeatures.begin();
    for (std::size_t c = 0; c < values.size(); ++c) m(f, static_cast<int64_t>(c)) = values[c];
  }
  return m;
}

void set_projections(Example& ex) {
  ex.features = kFeatures;
  ex.dims = kDims;
  // W_Q: what a word looks for. Head 0 (action, object, rain, person) finds
  // grammatical partners; head 1 (time, weather, punct, negation) finds context.
  ex.WQ = from_rows({
      {"time", {0, 0, 1, 0, 0, 2, 0, 0}},        // 今天: what happened (rain, weather)?
      {"weather", {0, 0, 0, 0, 2, 0, 0, 0}},     // 下雨: when?
      {"person", {2, 0, 0, 0, 0, 0, 0, 0}},      // 我: what did I do?
      {"negation", {3, 2, 0, 0, 1, 2, 0, 0}},    // 没: which action/object is negated, and why?
      {"action", {0, 2, 0, 1.5, 0, 0, 0, 0}},    // 带: bring what, who brings?
      {"object", {1.5, 0, 1.5, 0, 0, 1, 0, 0}},  // 伞: what is done with it, is it raining?
      {"rain", {0, 1, 0, 0, 0, 0, 0, 0}},        // rain-related words look for objects
  });
  // W_K: what a word offers to be found by.
  ex.WK = from_rows({
      {"time", {0, 0, 0, 0, 1.5, 0, 0, 0}},
      {"weather", {0, 0, 0, 0, 0, 1.5, 0, 0}},
      {"punct", {0, 0, 0, 0, 0, 0, 1, 0}},
      {"person", {0, 0, 0, 1.5, 0, 0, 0, 0}},
      {"negation", {0, 0, 0, 0, 0, 0, 0, 1}},
      {"action", {1.5, 0, 0, 0, 0, 0, 0, 0}},
      {"object", {0, 1.5, 0, 0, 0, 0, 0, 0}},
      {"rain", {0, 0, 1, 0, 0, 0, 0, 0}},
  });
  // W_V: what a word passes on: each feature to the dimension of the same name.
  Rows v;
  for (std::size_t d = 0; d < kDims.size(); ++d) {
    std::vector<double> r(kDims.size(), 0.0);
    r[d] = 1;
    v[kDims[d]] = r;
  }
  ex.WV = from_rows(v);
  // W_O: each value dimension back to the feature of the same name.
  const int64_t n = static_cast<int64_t>(kDims.size());
  ex.WO = Mat(n, n);
  for (int64_t d = 0; d < n; ++d)
    ex.WO(d, std::find(kFeatures.begin(), kFeatures.end(), kDims[d]) - kFeatures.begin()) = 1;
}

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

Example default_example() {
  Example ex;
  ex.words = {"今天", "下雨", "，", "我", "没", "带", "伞"};
  ex.gloss = "it rained today, I didn't bring an umbrella";
  ex.hand_chosen = true;
  set_projections(ex);
  // Embeddings over (time, weather, punct, person, negation, action, object, rain).
  const std::vector<std::vector<double>> x = {
      {1, 0, 0, 0, 0, 0, 0, 0},    // 今天 today
      {0, 1, 0, 0, 0, 0.5, 0, 1},  // 下雨 to rain: weather, a verb, rain
      {0, 0, 1, 0, 0, 0, 0, 0},    // ， comma
      {0, 0, 0, 1, 0, 0, 0, 0},    // 我 I
      {0, 0, 0, 0, 1, 0, 0, 0},    // 没 not (past)
      {0, 0, 0, 0, 0, 1, 0, 0},    // 带 to bring
      {0, 0, 0, 0, 0, 0, 1, 0.8},  // 伞 umbrella: an object, rain-related
  };
  ex.X = Mat(static_cast<int64_t>(x.size()), static_cast<int64_t>(kFeatures.size()));
  for (std::size_t i = 0; i < x.size(); ++i)
    std::copy(x[i].begin(), x[i].end(), ex.X.v.begin() + i * x[i].size());
  return ex;
}

std::vector<double> generated_embedding(const std::string& word, uint64_t seed, int64_t d) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a, 64 bit
  for (const char c : word) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  uint64_t state = h ^ (seed * 0x9e3779b97f4a7c15ull);
  std::vector<double> e(static_cast<std::size_t>(d));
  for (double& x : e) {
    const double u = static_cast<double>(splitmix64(state) >> 11) * 0x1.0p-53;  // [0, 1)
    x = std::round((2 * u - 1) * 100) / 100;                                    // [-1, 1], 2 decimals
    if (x == 0) x = 0;                                                          // no -0
  }
  return e;
}

Example sentence_example(const std::vector<std::string>& words, uint64_t seed) {
  ATTN_CHECK(!words.empty(), "--sentence: expected at least one word; got none");
  Example ex;
  ex.words = words;
  ex.hand_chosen = false;
  ex.seed = seed;
  set_projections(ex);
  const int64_t d = static_cast<int64_t>(kFeatures.size());
  ex.X = Mat(static_cast<int64_t>(words.size()), d);
  for (std::size_t i = 0; i < words.size(); ++i) {
    const auto e = generated_embedding(words[i], seed, d);
    std::copy(e.begin(), e.end(), ex.X.v.begin() + static_cast<int64_t>(i) * d);
  }
  return ex;
}

Example example_of(const Sentence& s) {
  if (s.words.empty()) return default_example();
  ATTN_CHECK(s.words.size() <= kMaxSentenceWords, "--sentence: expected at most ", kMaxSentenceWords,
             " tokens; got ", s.words.size());
  return sentence_example(s.words, s.seed);
}

int64_t default_query(const Example& ex) {
  for (int64_t i = 0; i < ex.n(); ++i)
    if (ex.words[static_cast<std::size_t>(i)] == "没") return i;
  return 0;  // another sentence without 没: its first word
}

int64_t resolve_query(const Example& ex, const std::string& query) {
  if (query.empty()) return default_query(ex);
  for (int64_t i = 0; i < ex.n(); ++i)
    if (ex.words[static_cast<std::size_t>(i)] == query) return i;
  const bool numeric = query.find_first_not_of("0123456789") == std::string::npos;
  if (numeric) {
    int64_t pos = 0;
    try {
      pos = std::stoll(query);
    } catch (const std::exception&) {
      pos = -1;
    }
    ATTN_CHECK(pos >= 0 && pos < ex.n(), "--query: position (from 0) must be in [0, ", ex.n() - 1,
               "] for the sentence [", join_words(ex.words), "]; got ", query);
    return pos;
  }
  ATTN_CHECK(false, "--query: expected a word of the sentence [", join_words(ex.words), "] or a position 0..",
             ex.n() - 1, "; got '", query, "'");
  return 0;
}

// ---- JSON values ----------------------------------------------------------------

json::Value jv(double v) { return json::Value::number(v == 0 ? 0.0 : v); }

json::Value numbers(const std::vector<double>& v) {
  json::Value a = json::Value::array();
  for (double x : v) a.push_back(jv(x));
  return a;
}

json::Value integers(const std::vector<int64_t>& v) {
  json::Value a = json::Value::array();
  for (int64_t x : v) a.push_back(jv(x));
  return a;
}

json::Value strings(const std::vector<std::string>& v) {
  json::Value a = json::Value::array();
  for (const auto& x : v) a.push_back(jv(x));
  return a;
}

json::Value matrix(const std::vector<double>& v, int64_t rows, int64_t cols) {
  ATTN_CHECK(static_cast<int64_t>(v.size()) == rows * cols, "json: matrix of ", rows, " x ", cols, " needs ",
             rows * cols, " values; got ", v.size());
  json::Value a = json::Value::array();
  for (int64_t r = 0; r < rows; ++r)
    a.push_back(numbers(std::vector<double>(v.begin() + r * cols, v.begin() + (r + 1) * cols)));
  return a;
}

void put(json::Value& object, std::vector<json::Value::Member> members) {
  for (auto& [k, v] : members) object.set(std::move(k), std::move(v));
}

std::string json_text(const json::Value& v) {
  json::DumpOptions o;
  o.indent = 2;
  o.scalar_arrays_inline = true;
  return json::dump(v, o);
}

// ---- text helpers -------------------------------------------------------------

std::string fmt(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  std::string s = buf;
  if (s[0] == '-' && s.find_first_not_of("-0.") == std::string::npos) s.erase(0, 1);
  return s;
}

std::string fmt_input(double v) {
  std::string s = fmt(v, 2);
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  return s;
}

std::string shape_text(const std::vector<std::string>& dims) { return "[" + join_words(dims, ", ") + "]"; }

std::string with_commas(int64_t v) {
  std::string digits = std::to_string(v < 0 ? -v : v), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return v < 0 ? "-" + out : out;
}

std::string human_bytes(double bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (bytes >= 1024 && u < 6) bytes /= 1024, ++u;
  return u == 0 ? fmt(bytes, 0) + " B" : fmt(bytes, 1) + " " + kUnits[u];
}

std::string human_count(double v) {
  static const char* kUnits[] = {"", " k", " M", " G", " T", " P", " E"};
  int u = 0;
  while (std::fabs(v) >= 1000 && u < 6) v /= 1000, ++u;
  return u == 0 ? fmt(v, 0) : fmt(v, 1) + kUnits[u];
}

std::string bar(double fraction, int width) {
  const int n = static_cast<int>(std::lround(std::clamp(fraction, 0.0, 1.0) * width));
  std::string s;
  for (int i = 0; i < n; ++i) s += "█";
  return s;
}

std::string join_words(const std::vector<std::string>& words, const std::string& sep) {
  std::string s;
  for (std::size_t i = 0; i < words.size(); ++i) s += (i ? sep : "") + words[i];
  return s;
}

// ---- report -------------------------------------------------------------------

void Page::title(const std::string& s) {
  text += s + "\n" + std::string(static_cast<std::size_t>(text::display_width(s)), '=') + "\n\n";
}

void Page::heading(const std::string& s) {
  text += s + "\n" + std::string(static_cast<std::size_t>(text::display_width(s)), '-') + "\n";
}

void Page::para(const std::string& s) { text += s + "\n\n"; }

void Page::line(const std::string& s) { text += s + "\n"; }

void Page::table(const text::Table& t) { text += t.render("  ") + "\n"; }

// ---- the engine -----------------------------------------------------------------

Tensor to_tensor4(const Mat& m, DType dt) {
  Tensor t = Tensor::from(m.v, {1, 1, m.rows, m.cols});  // f64
  return dt == DType::f64 ? t : t.to(dt);
}

namespace {

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

}  // namespace

double engine_tolerance(double base, double max_abs_logit, double max_abs_value) {
  return base * std::max(1.0, max_abs_logit) * std::max(1.0, max_abs_value);
}

std::vector<EngineRun> engine_check(const Mat& Q, const Mat& K, const Mat& V, double scale, int64_t query,
                                    const std::vector<double>& weights, const std::vector<double>& output) {
  std::vector<EngineRun> runs;
  struct Config {
    DType dtype;
    Backend backend;
    double tolerance;
  };
  double max_logit = 0, max_v = 0;
  for (int64_t j = 0; j < K.rows; ++j)
    max_logit = std::max(max_logit, std::fabs(scale * dot(Q.row(query), K.row(j))));
  if (!output.empty())
    for (double x : V.v) max_v = std::max(max_v, std::fabs(x));
  // fp32 rounds every input and sum (about 6e-8 relative); fp64 only the sums.
  for (const Config& c :
       {Config{DType::f32, Backend::automatic, engine_tolerance(1e-5, max_logit, max_v)},
        Config{DType::f64, Backend::reference, engine_tolerance(1e-12, max_logit, max_v)}}) {
    const Tensor q = to_tensor4(Q, c.dtype);  // q: [1, 1, Lq, D]
    const Tensor k = to_tensor4(K, c.dtype);  // k: [1, 1, Lk, D]
    const Tensor v = to_tensor4(V, c.dtype);  // v: [1, 1, Lk, D]
    AttentionOptions o;
    o.scale = scale;
    o.backend = c.backend;
    o.capture.enabled = true;
    o.capture.rows = {query};
    const BackendChoice choice = choose_backend(q, k, v, o);
    const AttentionResult res = attention(q, k, v, o);
    EngineRun run;
    run.backend = std::string(backend_name(choice.backend)) + (c.dtype == DType::f32 ? " (fp32)" : " (fp64)");
    if (c.backend == Backend::automatic) run.backend = "automatic -> " + run.backend;
    run.weights = res.weights.to_vector();                                        // weights: [1, 1, 1, Lk]
    run.output = res.out.select(0, 0).select(0, 0).select(0, query).to_vector();  // out row: [D]
    run.max_diff_weights = max_abs_diff(run.weights, weights);
    run.compared_output = !output.empty();
    run.max_diff_output = run.compared_output ? max_abs_diff(run.output, output) : 0.0;
    run.tolerance = c.tolerance;
    ATTN_CHECK(run.max_diff_weights <= c.tolerance && run.max_diff_output <= c.tolerance,
               "explain: the engine (", run.backend,
               ") disagrees with the step-by-step arithmetic: max |weight "
               "difference| = ",
               run.max_diff_weights, ", max |output difference| = ", run.max_diff_output,
               "; expected both <= ", c.tolerance);
    runs.push_back(std::move(run));
  }
  return runs;
}

std::string backend_text(Lang lang, const std::string& backend) {
  const std::string prefix = "automatic -> ";
  if (lang == Lang::zh && backend.rfind(prefix, 0) == 0)
    return "自动选择 -> " + backend.substr(prefix.size());
  return backend;
}

json::Value report_engine(Page& r, const std::vector<EngineRun>& runs, const std::string& what) {
  text::Table t({{r.t("engine backend", "引擎后端"), text::Align::left},
                 {r.t("max |diff| weights", "权重最大 |差|"), text::Align::right},
                 {r.t("max |diff| output", "输出最大 |差|"), text::Align::right},
                 {r.t("tolerance", "容差"), text::Align::right},
                 {"", text::Align::left}});
  json::Value arr = json::Value::array();
  for (const auto& run : runs) {
    char w[32], o[32], tol[32];
    std::snprintf(w, sizeof w, "%.1e", run.max_diff_weights);
    std::snprintf(o, sizeof o, "%.1e", run.max_diff_output);
    if (!run.compared_output) std::snprintf(o, sizeof o, "-");
    std::snprintf(tol, sizeof tol, "%.1e", run.tolerance);
    t.row({backend_text(r.lang, run.backend), w, o, tol, r.t("agree", "一致")});
    json::Value j = json::Value::object();
    j.set("backend", jv(run.backend));
    j.set("weights", jv(numbers(run.weights)));
    j.set("output", jv(numbers(run.output)));
    j.set("max_abs_diff_weights", jv(run.max_diff_weights));
    j.set("max_abs_diff_output", jv(run.compared_output ? jv(run.max_diff_output) : json::Value()));
    j.set("tolerance", jv(run.tolerance));
    j.set("agree", jv(true));
    arr.push_back(std::move(j));
  }
  r.table(t);
  double m = 0;
  for (const auto& run : runs) m = std::max({m, run.max_diff_weights, run.max_diff_output});
  char b[32];
  std::snprintf(b, sizeof b, "%.1e", m);
  r.para(
      r.t("Engine agreement: the engine's exact weights and output agree with the step-by-step\narithmetic " +
              what + " (max |difference| " + b + ").",
          "引擎一致：引擎给出的精确权重和输出与上面的逐步计算" + what + "相符（最大 |差| " + b + "）。"));
  return arr;
}

// ---- language helpers -----------------------------------------------------------

std::string feature_name(Lang lang, const std::string& name) {
  if (lang != Lang::zh) return name;
  static const std::vector<std::pair<std::string, std::string>> kZh = {
      {"time", "时间"},     {"weather", "天气"}, {"punct", "标点"},  {"person", "人称"},
      {"negation", "否定"}, {"action", "动作"},  {"object", "物体"}, {"rain", "雨"}};
  for (const auto& [en, zh] : kZh)
    if (en == name) return zh;
  return name;
}

std::vector<std::string> feature_names(Lang lang, const std::vector<std::string>& names) {
  std::vector<std::string> out;
  for (const auto& n : names) out.push_back(feature_name(lang, n));
  return out;
}

std::string list_text(Lang lang, const std::vector<std::string>& items) {
  std::string s;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0)
      s += i + 1 == items.size() ? (lang == Lang::zh ? " 和 " : " and ") : (lang == Lang::zh ? "、" : ", ");
    s += items[i];
  }
  return s;
}

std::vector<double> softmax(const std::vector<double>& v) {
  double mx = -std::numeric_limits<double>::infinity(), sum = 0;
  for (double x : v) mx = std::max(mx, x);
  std::vector<double> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) sum += out[i] = std::exp(v[i] - mx);
  for (double& x : out) x /= sum;
  return out;
}

}  // namespace attn::teach
