// Tests of the explain modes (attn/teach/explain.h): call the library and
// check its text and JSON against numbers computed here from the same inputs
// (softmax, cost formulas, mask rules), never against hard-coded results.
// Layers, heads and positions are numbered from 0.
#include <attn/core/error.h>
#include <attn/io/json.h>
#include <attn/teach/explain.h>
#include <attn/text/width.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace teach = attn::teach;
using attn::text::display_width;

std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> lines;
  std::stringstream ss(s);
  for (std::string l; std::getline(ss, l);) lines.push_back(l);
  return lines;
}

std::vector<std::string> split_ws(const std::string& s) {
  std::vector<std::string> v;
  std::stringstream ss(s);
  for (std::string w; ss >> w;) v.push_back(w);
  return v;
}

bool is_uint(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
}

// A decimal number without sign or exponent, as the tables print them.
bool is_decimal(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789.") == std::string::npos &&
         s.find('.') == s.rfind('.') && s.front() != '.' && s.back() != '.';
}

// The text after `prefix` on the first line that contains it, or "" (and a failure).
std::string after(const std::string& text, const std::string& prefix) {
  const auto p = text.find(prefix);
  if (p == std::string::npos) {
    ADD_FAILURE() << "output lacks '" << prefix << "'";
    return "";
  }
  const auto start = p + prefix.size();
  return text.substr(start, text.find('\n', start) - start);
}

// The lines from the first line containing `from` up to (excluding) the next
// line containing `to`.
std::vector<std::string> section(const std::string& text, const std::string& from, const std::string& to) {
  std::vector<std::string> out;
  bool in = false;
  for (const auto& l : split_lines(text)) {
    if (!in && l.find(from) != std::string::npos) {
      in = true;
      continue;
    }
    if (in && l.find(to) != std::string::npos) break;
    if (in) out.push_back(l);
  }
  return out;
}

std::string fixed(double v, int decimals) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", decimals, v);
  return b;
}

std::vector<double> softmax(const std::vector<double>& s) {
  std::vector<double> w;
  double sum = 0;
  for (double x : s) sum += std::exp(x);
  for (double x : s) w.push_back(std::exp(x) / sum);
  return w;
}

// ---- reading the JSON output ----------------------------------------------------

struct JValue {
  enum Kind { null, boolean, number, string, array, object } kind = null;
  bool b = false;
  double num = 0;
  std::string str;
  std::vector<JValue> items;
  std::vector<std::pair<std::string, JValue>> members;

  const JValue& operator[](const std::string& key) const {
    for (const auto& [k, v] : members)
      if (k == key) return v;
    ADD_FAILURE() << "JSON key '" << key << "' missing";
    static const JValue none;
    return none;
  }
  const JValue& operator[](std::size_t i) const {
    static const JValue none;
    if (i >= items.size()) {
      ADD_FAILURE() << "JSON index " << i << " out of range " << items.size();
      return none;
    }
    return items[i];
  }
  bool has(const std::string& key) const {
    for (const auto& m : members)
      if (m.first == key) return true;
    return false;
  }
  std::vector<double> numbers() const {
    std::vector<double> v;
    for (const auto& x : items) v.push_back(x.num);
    return v;
  }
};

// attn's strict JSON reader does the parsing; JValue is this test's accessor.
JValue to_jvalue(const attn::json::Value& x) {
  JValue v;
  switch (x.type()) {
    case attn::json::Type::null:
      v.kind = JValue::null;
      break;
    case attn::json::Type::boolean:
      v.kind = JValue::boolean, v.b = x.as_bool();
      break;
    case attn::json::Type::number:
      v.kind = JValue::number, v.num = x.as_double();
      break;
    case attn::json::Type::string:
      v.kind = JValue::string, v.str = x.as_string();
      break;
    case attn::json::Type::array:
      v.kind = JValue::array;
      for (const auto& item : x.items()) v.items.push_back(to_jvalue(item));
      break;
    case attn::json::Type::object:
      v.kind = JValue::object;
      for (const auto& [k, m] : x.members()) v.members.emplace_back(k, to_jvalue(m));
      break;
  }
  return v;
}

// The report's JSON as `--json` writes it, read back by attn's strict reader.
JValue json_of(const teach::Report& r) {
  try {
    return to_jvalue(attn::json::parse(teach::json_text(r.json)));
  } catch (const attn::Error& e) {
    ADD_FAILURE() << "invalid JSON: " << e.what();
    return JValue();
  }
}

// The message of the attn::Error that `f` throws ("" and a failure when none).
template <typename F>
std::string error_of(F f) {
  try {
    f();
  } catch (const attn::Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an attn::Error";
  return "";
}

teach::Report walk(const std::string& query = "", const std::vector<std::string>& words = {},
                   uint64_t seed = teach::kDefaultSeed) {
  teach::WalkthroughOptions o;
  o.query = query;
  o.sentence.words = words;
  o.sentence.seed = seed;
  return teach::walkthrough(o);
}

teach::Report scores(const std::vector<double>& s, const std::vector<std::string>& tokens = {}) {
  teach::ScoresOptions o;
  o.scores = s;
  o.tokens = tokens;
  return teach::softmax_scores(o);
}

teach::Report heads(int64_t h) {
  teach::MultiHeadOptions o;
  o.heads = h;
  return teach::multi_head(o);
}

teach::Report mask(const std::string& kind, int64_t length = -1, int64_t window = -1, bool causal = false,
                   const std::vector<std::string>& words = {}) {
  teach::MaskOptions o;
  o.kind = kind;
  o.length = length;
  o.window = window;
  o.causal = causal;
  o.sentence.words = words;
  return teach::mask(o);
}

teach::Report cost(int64_t n, int64_t d, int64_t h, int64_t batch = 1, bool causal = false) {
  teach::CostOptions o;
  o.n = n, o.d = d, o.heads = h, o.batch = batch, o.causal = causal;
  return teach::cost(o);
}

// ---- the default walkthrough -----------------------------------------------------

TEST(ExplainDefault, PrintsEveryStepAndTheEngineAgreement) {
  const teach::Report r = walk();
  for (const char* needle :
       {"今天 下雨 ， 我 没 带 伞", "Query word: 没", "ILLUSTRATIVE", "Step 1.", "Q = X·W_Q", "Step 2.",
        "q · k_j", "Step 3.", "√d_k", "Step 4.", "Step 5.", "Sum of weights = ", "Step 6.", "Which words win",
        "Engine agreement: the engine's exact weights and output agree", "automatic -> ", "reference (fp64)"})
    EXPECT_NE(r.text.find(needle), std::string::npos) << "missing: " << needle;
  EXPECT_NE(r.text.find("(position 4 of 7, counting from 0)"), std::string::npos) << r.text.substr(0, 600);
}

// Parses the rows "  j  word  exp  weight" of step 5.
void parse_step5(const std::string& out, std::vector<double>& exps, std::vector<double>& weights) {
  for (const auto& l : section(out, "Step 5.", "Sum of weights")) {
    const auto cells = split_ws(l);  // "j word exp weight"
    if (cells.size() == 4 && is_uint(cells[0]) && is_decimal(cells[2]) && is_decimal(cells[3])) {
      exps.push_back(std::stod(cells[2]));
      weights.push_back(std::stod(cells[3]));
    }
  }
}

TEST(ExplainDefault, PrintedWeightsAreASoftmaxThatSumsToOne) {
  const teach::Report r = walk();
  std::vector<double> exps, weights;
  parse_step5(r.text, exps, weights);
  ASSERT_EQ(weights.size(), 7u) << r.text;
  double sum = 0, exp_sum = 0;
  for (double e : exps) exp_sum += e;
  for (std::size_t j = 0; j < weights.size(); ++j) {
    sum += weights[j];
    EXPECT_NEAR(weights[j], exps[j] / exp_sum, 1e-4) << "row " << j;  // printed to 4 decimals
  }
  EXPECT_NEAR(sum, 1.0, 7 * 0.5e-4);  // seven values rounded to 4 decimals
  const auto shown = split_ws(after(r.text, "Sum of weights = "));
  ASSERT_FALSE(shown.empty());
  ASSERT_TRUE(is_decimal(shown[0])) << shown[0];
  EXPECT_NEAR(std::stod(shown[0]), 1.0, 1e-6);
}

TEST(ExplainDefault, JsonStepsFollowFromItsQKV) {
  const JValue j = json_of(walk());
  EXPECT_EQ(j["mode"].str, "walkthrough");
  EXPECT_TRUE(j["illustrative_inputs"].b);
  const int64_t qi = static_cast<int64_t>(j["query"]["position"].num);  // from 0
  const JValue &Q = j["Q"], &K = j["K"], &V = j["V"];
  const std::size_t n = K.items.size(), dk = static_cast<std::size_t>(j["d_k"].num);
  ASSERT_EQ(n, 7u);
  ASSERT_EQ(j["sentence"][static_cast<std::size_t>(qi)].str, "没");
  // Q, K, V = X · W (first d_k columns).
  for (const char* name : {"Q", "K", "V"}) {
    const JValue& W = j[std::string("W_") + name];
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t d = 0; d < dk; ++d) {
        double s = 0;
        for (std::size_t f = 0; f < j["X"][i].items.size(); ++f) s += j["X"][i][f].num * W[f][d].num;
        EXPECT_NEAR(j[name][i][d].num, s, 1e-12) << name << "[" << i << "][" << d << "]";
      }
  }
  std::vector<double> scores;
  for (std::size_t k = 0; k < n; ++k) {
    double s = 0;
    for (std::size_t d = 0; d < dk; ++d) s += Q[static_cast<std::size_t>(qi)][d].num * K[k][d].num;
    scores.push_back(s / std::sqrt(static_cast<double>(dk)));
  }
  const auto w = softmax(scores);
  const JValue& st = j["steps"];
  ASSERT_EQ(st["weights"].items.size(), n);
  double sum = 0;
  for (std::size_t k = 0; k < n; ++k) {
    EXPECT_NEAR(st["scaled"][k].num, scores[k], 1e-12);
    EXPECT_NEAR(st["weights"][k].num, w[k], 1e-12);
    sum += st["weights"][k].num;
  }
  EXPECT_NEAR(sum, 1.0, 1e-12);
  for (std::size_t d = 0; d < dk; ++d) {
    double z = 0;
    for (std::size_t k = 0; k < n; ++k) z += w[k] * V[k][d].num;
    EXPECT_NEAR(st["output"][d].num, z, 1e-12);
  }
  // The engine ran both backends and agreed.
  ASSERT_EQ(j["engine"].items.size(), 2u);
  for (const auto& e : j["engine"].items) {
    EXPECT_TRUE(e["agree"].b);
    EXPECT_LE(e["max_abs_diff_weights"].num, e["tolerance"].num);
    for (std::size_t k = 0; k < n; ++k) EXPECT_NEAR(e["weights"][k].num, w[k], 1e-5);
  }
  // The illustration teaches what it says: 没 attends most to 带, then 伞 (derived from the weights above).
  std::size_t top = 0;
  for (std::size_t k = 1; k < n; ++k)
    if (w[k] > w[top]) top = k;
  EXPECT_EQ(j["sentence"][top].str, "带");
  EXPECT_EQ(j["ranking"][0]["word"].str, "带");
  EXPECT_EQ(j["ranking"][1]["word"].str, "伞");
}

TEST(ExplainDefault, QueryByWordOrPositionGivesTheSameOutput) {
  const teach::Report by_word = walk("带"), by_pos = walk("5");  // 带 is position 5, from 0
  EXPECT_EQ(by_word.text, by_pos.text);
  EXPECT_EQ(teach::json_text(by_word.json), teach::json_text(by_pos.json));
  EXPECT_NE(by_word.text.find("Query word: 带"), std::string::npos);
  EXPECT_NE(walk("0").text.find("Query word: 今天"), std::string::npos);
}

TEST(ExplainDefault, GeneratedSentenceIsDeterministicAndPerWord) {
  const std::vector<std::string> words = {"the", "cat", "sat", "on", "the", "mat"};
  const JValue a = json_of(walk("cat", words));
  const JValue b = json_of(walk("cat", words));
  ASSERT_EQ(a["X"].items.size(), 6u);
  EXPECT_EQ(a["embeddings"].str, "generated");
  EXPECT_EQ(a["query"]["position"].num, 1);  // from 0
  for (std::size_t f = 0; f < 8; ++f) {
    EXPECT_EQ(a["X"][0][f].num, b["X"][0][f].num);
    EXPECT_EQ(a["X"][0][f].num, a["X"][4][f].num);  // "the" twice: the same embedding
    EXPECT_GE(a["X"][1][f].num, -1.0);
    EXPECT_LE(a["X"][1][f].num, 1.0);
  }
  const JValue c = json_of(walk("", words, 7));
  bool differs = false;
  for (std::size_t f = 0; f < 8; ++f) differs = differs || c["X"][0][f].num != a["X"][0][f].num;
  EXPECT_TRUE(differs) << "another seed must give other embeddings";
}

TEST(ExplainJson, EscapesQuotesAndBackslashesInWords) {
  const JValue j = json_of(walk("", {"say", "\"hi\"", "c\\d", "伞"}));
  ASSERT_EQ(j["sentence"].items.size(), 4u);
  EXPECT_EQ(j["sentence"][1].str, "\"hi\"");
  EXPECT_EQ(j["sentence"][2].str, "c\\d");
  EXPECT_EQ(j["sentence"][3].str, "伞");
  // A control character inside a word must be written as \u0001 (raw ones make the reader fail).
  const teach::Report r = walk("", {"a\x01"
                                    "b",
                                    "x"});
  EXPECT_NE(teach::json_text(r.json).find("\"a\\u0001b\""), std::string::npos);
  const JValue c = json_of(r);
  ASSERT_EQ(c["sentence"].items.size(), 2u);
  EXPECT_EQ(c["sentence"][0].str,
            "a\x01"
            "b");
}

// ---- scores ------------------------------------------------------------------------

class ExplainScoresTest : public ::testing::TestWithParam<std::vector<double>> {};

TEST_P(ExplainScoresTest, ShowsTheExactSoftmax) {
  const auto& s = GetParam();
  const teach::Report r = scores(s);
  const auto w = softmax(s);
  // "softmax([...]) = [w0, ..., wN-1]" to 2 decimals.
  std::string list = after(r.text, "]) = [");
  ASSERT_FALSE(list.empty()) << r.text;
  ASSERT_EQ(list.back(), ']');
  list.pop_back();
  std::vector<std::string> shown;
  std::stringstream ss(list);
  for (std::string x; std::getline(ss, x, ',');) shown.push_back(split_ws(x).at(0));
  ASSERT_EQ(shown.size(), s.size());
  for (std::size_t j = 0; j < w.size(); ++j) EXPECT_EQ(shown[j], fixed(w[j], 2)) << "position " << j;
  EXPECT_NE(r.text.find("Engine agreement"), std::string::npos);

  const JValue j = json_of(r);
  EXPECT_EQ(j["mode"].str, "softmax");
  const auto jw = j["weights"].numbers();
  ASSERT_EQ(jw.size(), w.size());
  for (std::size_t k = 0; k < w.size(); ++k) EXPECT_NEAR(jw[k], w[k], 1e-15 + 1e-12 * w[k]);
  std::size_t top = 0;
  for (std::size_t k = 1; k < w.size(); ++k)
    if (w[k] > w[top]) top = k;
  EXPECT_EQ(j["ranking"][0]["position"].num, static_cast<double>(top));  // from 0
}

INSTANTIATE_TEST_SUITE_P(
    Lists, ExplainScoresTest,
    ::testing::Values(std::vector<double>{0.2, 2.5, 0.8, 0.3, 0.4, 2.0},  // the tutorial's
                      std::vector<double>{0.1, 0.3, 0.2, 0.5, 0.1, 1.2}, std::vector<double>{-3, 0, 3},
                      std::vector<double>{5}, std::vector<double>{1e-3, -2.75, 40, 39.5},
                      std::vector<double>{699.3, 698.9, 650.1, 698.7}));

TEST(ExplainScores, BriefExampleShows014And017AtPositions1And3) {
  const teach::Report r = scores({0.1, 0.3, 0.2, 0.5, 0.1, 1.2});
  // Step 3 rows: "#  token  e^s  weight  2-decimals".
  std::map<int, std::string> two_dec;
  for (const auto& l : section(r.text, "Step 3.", "Sum of weights")) {
    const auto c = split_ws(l);  // "j position j exp weight 2-decimals"
    if (c.size() == 6 && is_uint(c[0]) && c[1] == "position" && is_decimal(c[5]))
      two_dec[std::stoi(c[0])] = c[5];
  }
  ASSERT_EQ(two_dec.size(), 6u) << r.text;
  const auto w = softmax({0.1, 0.3, 0.2, 0.5, 0.1, 1.2});
  EXPECT_EQ(two_dec[1], fixed(w[1], 2));
  EXPECT_EQ(two_dec[3], fixed(w[3], 2));
  EXPECT_EQ(two_dec[1], "0.14");  // the values the brief names
  EXPECT_EQ(two_dec[3], "0.17");
}

TEST(ExplainScores, TokensNameThePositions) {
  const JValue j = json_of(scores({1, 3, 2}, {"我", "没", "伞"}));
  EXPECT_EQ(j["tokens"][1].str, "没");
  EXPECT_EQ(j["ranking"][0]["word"].str, "没");
}

// ---- multi-head --------------------------------------------------------------------

class ExplainMultiHeadTest : public ::testing::TestWithParam<int> {};

TEST_P(ExplainMultiHeadTest, HeadsConcatAndProjectionFollowFromQKV) {
  const int h = GetParam();
  const JValue j = json_of(heads(h));
  EXPECT_EQ(j["mode"].str, "multi_head");
  const std::size_t dm = static_cast<std::size_t>(j["d_model"].num), dk = dm / static_cast<std::size_t>(h);
  EXPECT_EQ(j["d_k"].num, static_cast<double>(dk));
  EXPECT_EQ(j["shapes"]["per_head_QKV"].numbers(), (std::vector<double>{double(h), 7, double(dk)}));
  const std::size_t qi = static_cast<std::size_t>(j["query"]["position"].num), n = j["K"].items.size();
  std::vector<double> concat;
  for (int hh = 0; hh < h; ++hh) {
    std::vector<double> s;
    for (std::size_t k = 0; k < n; ++k) {
      double dot = 0;
      for (std::size_t d = hh * dk; d < (hh + 1) * dk; ++d) dot += j["Q"][qi][d].num * j["K"][k][d].num;
      s.push_back(dot / std::sqrt(static_cast<double>(dk)));
    }
    const auto w = softmax(s);
    double sum = 0;
    for (std::size_t k = 0; k < n; ++k) {
      EXPECT_NEAR(j["head_weights"][hh][k].num, w[k], 1e-12) << "head " << hh;
      sum += j["head_weights"][hh][k].num;
    }
    EXPECT_NEAR(sum, 1.0, 1e-12);
    for (std::size_t d = hh * dk; d < (hh + 1) * dk; ++d) {
      double z = 0;
      for (std::size_t k = 0; k < n; ++k) z += w[k] * j["V"][k][d].num;
      concat.push_back(z);
    }
  }
  for (std::size_t d = 0; d < dm; ++d) EXPECT_NEAR(j["concat"][d].num, concat[d], 1e-12);
  for (std::size_t c = 0; c < dm; ++c) {
    double o = 0;
    for (std::size_t d = 0; d < dm; ++d) o += concat[d] * j["W_O"][d][c].num;
    EXPECT_NEAR(j["output"][c].num, o, 1e-12);
  }
  for (const auto& e : j["engine"].items) EXPECT_TRUE(e["agree"].b);
}

INSTANTIATE_TEST_SUITE_P(Heads, ExplainMultiHeadTest, ::testing::Values(1, 2, 4, 8));

TEST(ExplainMultiHead, TextShowsHeadsSideBySideWithShapes) {
  const teach::Report r = heads(4);
  for (const char* needle : {"[h=4, N=7, d_k=2]", "concat [8]", "out [8]", "Engine agreement"})
    EXPECT_NE(r.text.find(needle), std::string::npos) << "missing: " << needle;
  // Step 3's table: one weight column per head, side by side, numbered from 0.
  bool side_by_side = false;
  for (const auto& l : split_lines(r.text))
    side_by_side =
        side_by_side || split_ws(l) == std::vector<std::string>{"#", "word", "head", "0",    "head",
                                                                "1", "head", "2",    "head", "3"};
  EXPECT_TRUE(side_by_side) << r.text;
}

// ---- cost ------------------------------------------------------------------------------

struct CostCase {
  int64_t n, d, heads, batch;
  bool causal;
};

class ExplainCostTest : public ::testing::TestWithParam<CostCase> {};

TEST_P(ExplainCostTest, NumbersEqualTheFormulas) {
  const CostCase c = GetParam();
  const teach::Report r = cost(c.n, c.d, c.heads, c.batch, c.causal);
  const JValue j = json_of(r);
  const double B = c.batch, N = c.n, D = c.d, H = c.heads, dk = D / H;
  const double pairs = c.causal ? N * (N + 1) / 2 : N * N;
  EXPECT_EQ(j["d_k"].num, dk);
  EXPECT_EQ(j["pairs_per_head"].num, pairs);
  const JValue& s = j["steps"];
  ASSERT_EQ(s.items.size(), 5u);
  EXPECT_EQ(s[0]["flops"].num, 3 * 2 * B * N * D * D);   // Q, K, V projections
  EXPECT_EQ(s[1]["flops"].num, 2 * B * H * pairs * dk);  // Q·Kᵀ
  EXPECT_EQ(s[2]["flops"].num, 5 * B * H * pairs);       // softmax
  EXPECT_EQ(s[3]["flops"].num, 2 * B * H * pairs * dk);  // P·V
  EXPECT_EQ(s[4]["flops"].num, 2 * B * N * D * D);       // W_O
  double total = 0;
  for (const auto& st : s.items) total += st["flops"].num;
  EXPECT_EQ(j["flops_total"].num, total);
  EXPECT_EQ(j["exp_count"].num, B * H * pairs);
  const JValue& m = j["memory"];
  EXPECT_EQ(m["naive_scores_bytes"].num, B * H * N * N * 4);  // full matrix even when causal
  EXPECT_EQ(m["lse_bytes"].num, B * H * N * 4);
  EXPECT_EQ(m["qkv_bytes"].num, 3 * B * N * D * 4);
  const double br = m["tile"][0].num, bc = m["tile"][1].num;
  EXPECT_EQ(br, std::min(64.0, N));
  EXPECT_EQ(bc, std::min(64.0, N));
  EXPECT_EQ(m["fused_scratch_bytes"].num, m["threads"].num * (br * bc + br * dk + 2 * br) * 4);
  EXPECT_EQ(j["backend"]["backend"].str, "fused");
  EXPECT_FALSE(j["backend"]["reason"].str.empty());

  EXPECT_NE(r.text.find("B·h·N·N·4"), std::string::npos);
  EXPECT_NE(r.text.find("backend: fused"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Sizes, ExplainCostTest,
                         ::testing::Values(CostCase{7, 8, 2, 1, false}, CostCase{4096, 1024, 16, 8, true},
                                           CostCase{100, 96, 3, 2, false}, CostCase{1, 1, 1, 1, true},
                                           CostCase{131072, 4096, 32, 4, true}));

// ---- mask -----------------------------------------------------------------------------

TEST(ExplainMask, CausalGridIsALowerTriangle) {
  const teach::Report r = mask("causal");
  int rows = 0;
  for (const auto& l : section(r.text, "Visibility", "Weights")) {
    const auto cells = split_ws(l);
    if (cells.size() != 10 || cells[0].find_first_not_of("0123456789") != std::string::npos) continue;
    const int i = std::stoi(cells[0]);  // "i word c0 .. c6 count", from 0
    for (int k = 0; k < 7; ++k) EXPECT_EQ(cells[2 + k], k <= i ? "#" : ".") << "row " << i << ", key " << k;
    EXPECT_EQ(cells[9], std::to_string(i + 1));
    ++rows;
  }
  EXPECT_EQ(rows, 7) << r.text;
}

struct MaskCase {
  std::string name;
  std::string kind;
  int length;  // padding, else -1
  int window;  // window, else -1
  bool causal;
  std::vector<std::string> words;  // empty: the default sentence
};

class ExplainMaskTest : public ::testing::TestWithParam<MaskCase> {};

TEST_P(ExplainMaskTest, VisibilityFollowsTheRuleAndRowsSumToOne) {
  const MaskCase c = GetParam();
  const bool causal_flag = c.kind == "window" && c.causal;  // --mask causal is causal by itself
  const JValue j = json_of(mask(c.kind, c.length, c.window, causal_flag, c.words));
  const JValue& vis = j["visible"];
  const std::size_t n = j["sentence"].items.size();
  ASSERT_EQ(vis.items.size(), n);
  for (std::size_t i = 0; i < n; ++i) {
    double sum = 0;
    for (std::size_t k = 0; k < n; ++k) {
      const int64_t ii = static_cast<int64_t>(i), kk = static_cast<int64_t>(k);
      bool expect = true;
      if (c.causal) expect = expect && kk <= ii;
      if (c.length >= 0) expect = expect && kk < c.length;
      if (c.window >= 0) expect = expect && std::llabs(ii - kk) <= c.window;
      EXPECT_EQ(vis[i][k].b, expect) << c.name << ": query " << i << ", key " << k;
      const double w = j["weights"][i][k].num;
      if (!expect) {
        EXPECT_EQ(w, 0.0);
      }
      sum += w;
    }
    const bool any = c.length != 0;
    EXPECT_NEAR(sum, any ? 1.0 : 0.0, 1e-6) << c.name << ": row " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, ExplainMaskTest,
                         ::testing::Values(MaskCase{"causal", "causal", -1, -1, true, {}},
                                           MaskCase{"padding 5", "padding", 5, -1, false, {}},
                                           MaskCase{"padding 0", "padding", 0, -1, false, {}},
                                           MaskCase{"padding 7", "padding", 7, -1, false, {}},
                                           MaskCase{"window 1", "window", -1, 1, false, {}},
                                           MaskCase{"window 2 causal", "window", -1, 2, true, {}},
                                           MaskCase{"window 0", "window", -1, 0, false, {}},
                                           MaskCase{
                                               "causal abcd", "causal", -1, -1, true, {"a", "b", "c", "d"}}));

// ---- errors -------------------------------------------------------------------------------
// (The errors of the flags themselves - unknown options, malformed numbers,
// two modes - are the CLI's: tests/cli/explain_test.cc.)

TEST(ExplainErrors, NameTheBadValue) {
  EXPECT_NE(error_of([] { walk("猫"); }).find("'猫'"), std::string::npos);
  EXPECT_NE(error_of([] { walk("7"); }).find("got 7"), std::string::npos);  // positions 0..6
  EXPECT_NE(error_of([] { walk("-1"); }).find("'-1'"), std::string::npos);
  EXPECT_NE(error_of([] { cost(16, 10, 3); }).find("--heads 3"), std::string::npos);
  EXPECT_NE(error_of([] { heads(3); }).find("got 3"), std::string::npos);
  EXPECT_NE(error_of([] { mask("diagonal"); }).find("'diagonal'"), std::string::npos);
  EXPECT_NE(error_of([] { mask("padding"); }).find("--length"), std::string::npos);
  EXPECT_NE(error_of([] { mask("padding", 8); }).find("got 8"), std::string::npos);
  EXPECT_NE(error_of([] { scores({1, 2}, {"a"}); }).find("got 1"), std::string::npos);
  EXPECT_NE(error_of([] { cost(1000000000, 1000000, 1, 1000000); }).find("overflows"), std::string::npos);
  EXPECT_NE(error_of([] { walk("", std::vector<std::string>(65, "w")); }).find("got 65"), std::string::npos);
}

// ---- table alignment with CJK text ----------------------------------------------------

// A table is the block around a rule line ("----  ---"): from the group or
// header line(s) above it to the next blank line. All its lines must have the
// same display width.
void expect_tables_aligned(const std::string& what, const teach::Report& r) {
  const auto lines = split_lines(r.text);
  auto is_rule = [](const std::string& l) {  // "  ----  --  -----"
    return l.size() > 2 && l.compare(0, 2, "  ") == 0 && l[2] == '-' && l.back() == '-' &&
           l.find_first_not_of(" -") == std::string::npos && l.find("   ") == std::string::npos;
  };
  int tables = 0;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (!is_rule(lines[i])) continue;
    ++tables;
    const int w = display_width(lines[i]);
    std::size_t first = i - 1;  // header; a group line above it is indented too
    if (first > 0 && !lines[first - 1].empty() && lines[first - 1].rfind("  ", 0) == 0) --first;
    for (std::size_t k = first; k < lines.size() && !lines[k].empty(); ++k)
      EXPECT_EQ(display_width(lines[k]), w) << what << ", table " << tables << ", line: '" << lines[k] << "'";
  }
  EXPECT_GE(tables, 1) << what;
}

TEST(ExplainTables, EveryRowHasTheSameDisplayWidth) {
  expect_tables_aligned("walkthrough", walk());
  expect_tables_aligned("query 今天", walk("今天"));
  expect_tables_aligned("scores", scores({1, 2, 3}, {"今天", "，", "ＡＢ"}));
  expect_tables_aligned("multi-head 2", heads(2));
  expect_tables_aligned("cost", cost(512, 64, 8));
  expect_tables_aligned("mask causal", mask("causal"));
  expect_tables_aligned("mask window", mask("window", -1, 1));
  expect_tables_aligned("sentence", walk("", {"我", "没", "带", "伞", "umbrella", "ｕｍｂ"}));
}

// The same in Chinese (--lang zh): translated headers and feature names are CJK too.
TEST(ExplainTables, EveryRowHasTheSameDisplayWidthInChinese) {
  const teach::Lang zh = teach::Lang::zh;
  teach::WalkthroughOptions w;
  w.lang = zh;
  expect_tables_aligned("walkthrough zh", teach::walkthrough(w));
  teach::ScoresOptions s;
  s.scores = {0.2, 2.5, 0.8, 0.3, 0.4, 2.0};
  s.lang = zh;
  expect_tables_aligned("scores zh", teach::softmax_scores(s));
  teach::MultiHeadOptions m;
  m.heads = 4;
  m.lang = zh;
  expect_tables_aligned("multi-head zh", teach::multi_head(m));
  teach::CostOptions c;
  c.n = 4096, c.d = 1024, c.heads = 16, c.causal = true, c.lang = zh;
  expect_tables_aligned("cost zh", teach::cost(c));
  teach::MaskOptions k;
  k.kind = "window", k.window = 1, k.lang = zh;
  expect_tables_aligned("mask window zh", teach::mask(k));
}

}  // namespace
