// The stages document of teach/stages.h, written from one model's StageInputs (stages_models.cc):
// the scores, the scaling, the mask and the softmax recomputed in double from the engine's Q and K
// beside the kernel's captured probabilities; the words the pieces belong to; the tutorial's table.
#include <attn/core/error.h>
#include <attn/teach/stages.h>
#include <attn/text/segment.h>
#include <attn/text/utf8.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <optional>

#include "explain_internal.h"
#include "stages_internal.h"

namespace attn::teach::stages_detail {
namespace {

using json::Value;

constexpr int64_t kShowDims = 8;  // columns of the [N, C] matrices shown (the page says how many there are)

Value num(double d) { return Value::number(d); }
Value row_json(const std::vector<double>& r) {
  Value a = Value::array();
  for (double d : r) a.push_back(num(d));
  return a;
}
Value mat_json(const Mat& m) {
  Value a = Value::array();
  for (int64_t i = 0; i < m.rows; ++i) a.push_back(row_json(m.row(i)));
  return a;
}
Value ints(const std::vector<int64_t>& v) {
  Value a = Value::array();
  for (int64_t x : v) a.push_back(Value::integer(x));
  return a;
}
// Columns `cols` of m, with the matrix's full shape.
Value cols_json(const Mat& m, const std::vector<int64_t>& cols) {
  Value rows = Value::array();
  for (int64_t i = 0; i < m.rows; ++i) {
    Value r = Value::array();
    for (int64_t c : cols) r.push_back(num(m(i, c)));
    rows.push_back(std::move(r));
  }
  Value o = Value::object();
  o.set("shape", ints({m.rows, m.cols}));
  o.set("cols", ints(cols));
  o.set("rows", std::move(rows));
  return o;
}
std::vector<int64_t> first_cols(int64_t n) {
  std::vector<int64_t> c;
  for (int64_t i = 0; i < n; ++i) c.push_back(i);
  return c;
}

// Non-space bytes of a piece's display text: the word-start mark ▁ and white space dropped, <0xNN> one byte.
std::string piece_bytes(const std::string& t) {
  std::string out;
  for (std::size_t i = 0; i < t.size();) {
    if (t.compare(i, 3, "\xE2\x96\x81") == 0) {
      i += 3;
    } else if (t.size() - i >= 6 && t.compare(i, 3, "<0x") == 0 && t[i + 5] == '>') {
      out += static_cast<char>(std::stoi(t.substr(i + 3, 2), nullptr, 16));
      i += 6;
    } else if (t[i] == ' ' || t[i] == '\t' || t[i] == '\n' || t[i] == '\r') {
      ++i;
    } else {
      out += t[i++];
    }
  }
  return out;
}

const text::WordDictionary* jieba() {
  static std::once_flag once;
  static std::optional<text::WordDictionary> dict;
  std::call_once(once, [] {
    if (const auto p = text::find_jieba_dictionary()) dict = text::WordDictionary::load(*p);
  });
  return dict ? &*dict : nullptr;
}

// Softmax over the allowed entries of one row (blocked entries 0; a row with none allowed all 0).
std::vector<double> masked_softmax(const std::vector<double>& s, const std::vector<bool>& allow) {
  double mx = -std::numeric_limits<double>::infinity();
  for (std::size_t j = 0; j < s.size(); ++j)
    if (allow[j]) mx = std::max(mx, s[j]);
  std::vector<double> w(s.size(), 0.0);
  double sum = 0;
  for (std::size_t j = 0; j < s.size(); ++j)
    if (allow[j]) sum += (w[j] = std::exp(s[j] - mx));
  for (double& x : w) x = sum > 0 ? x / sum : 0.0;
  return w;
}

Value tutorial_json() {
  Value t = Value::object();
  t.set("scores", row_json(kTutorialScores));
  t.set("printed_weights", row_json(kTutorialWeights));
  t.set("softmax", row_json(softmax(kTutorialScores)));
  double sum = 0;
  for (double w : kTutorialWeights) sum += w;
  t.set("printed_sum", num(sum));
  t.set("is_softmax", Value::boolean(false));
  return t;
}

// Assigns each piece to the word its first unit falls in, measuring the text without white space
// in `unit`s: bytes (byte-level pieces, exact), or characters (a tokenizer that normalised the text,
// e.g. e5's NFKC turning ， into ,, keeps one character per character). Empty when they do not align.
std::vector<std::vector<int64_t>> align_words(const StageInputs& in, const std::vector<std::string>& words,
                                              bool characters) {
  const auto size = [&](const std::string& s) {
    return characters ? text::decode_utf8(s).size() : s.size();
  };
  std::vector<std::size_t> end;
  std::size_t total = 0;
  std::string joined;
  for (const std::string& w : words) {
    const std::string b = piece_bytes(w);
    joined += b;
    end.push_back(total += size(b));
  }
  std::vector<std::vector<int64_t>> members(words.size());
  std::size_t at = 0, byte = 0;
  for (std::size_t t = 0; t < in.tokens.size(); ++t) {
    if (in.special[t]) continue;
    const std::string b = piece_bytes(in.tokens[t]);
    if (b.empty()) continue;
    if (!characters && joined.compare(byte, b.size(), b) != 0) return {};
    const std::size_t w = static_cast<std::size_t>(std::upper_bound(end.begin(), end.end(), at) - end.begin());
    if (w >= words.size()) return {};
    members[w].push_back(static_cast<int64_t>(t));
    at += size(b);
    byte += b.size();
  }
  if (at != total) return {};
  return members;
}

}  // namespace

json::Value words_json(const StageInputs& in) {
  const text::WordDictionary* d = jieba();
  const std::vector<std::string> words = d ? d->cut(in.text) : text::split_characters(in.text);
  Value out = Value::object();
  out.set("method", Value::string(!text::has_cjk(in.text) ? "words" : d ? "dictionary" : "characters"));
  std::vector<std::vector<int64_t>> members;
  try {
    members = align_words(in, words, false);
    if (members.empty()) members = align_words(in, words, true);
  } catch (const Error&) {  // a piece that is not whole UTF-8 when counted in characters
    members.clear();
  }
  Value list = Value::array();
  for (std::size_t w = 0; w < members.size(); ++w) {
    if (members[w].empty()) continue;  // a word inside a piece that began in the word before
    Value o = Value::object();
    o.set("text", Value::string(words[w]));
    o.set("tokens", ints(members[w]));
    list.push_back(std::move(o));
  }
  if (members.empty()) out.set("method", Value::string("pieces"));  // no word grouping
  out.set("words", std::move(list));
  return out;
}

json::Value stages_json(const StageInputs& in) {
  const int64_t N = static_cast<int64_t>(in.tokens.size()), D = in.d_k, H = in.heads;
  Value j = Value::object();
  j.set("model", Value::string(in.model));
  j.set("kind", Value::string(in.kind));
  j.set("text", Value::string(in.text));
  for (const auto& [k, v] : std::vector<std::pair<const char*, int64_t>>{{"layer", in.layer},
                                                                        {"head", in.head},
                                                                        {"layers", in.layers},
                                                                        {"heads", in.heads},
                                                                        {"kv_heads", in.kv_heads},
                                                                        {"kv_head", in.head / (H / in.kv_heads)},
                                                                        {"d_model", in.d_model},
                                                                        {"d_k", D},
                                                                        {"n", N},
                                                                        {"window", in.window}})
    j.set(k, Value::integer(v));
  j.set("scale", num(in.scale));
  j.set("sqrt_d", num(1.0 / in.scale));
  j.set("causal", Value::boolean(in.causal));
  j.set("norm", Value::string(in.norm));
  j.set("qk", Value::string(in.qk));
  Value toks = Value::array(), ids = Value::array(), sp = Value::array();
  for (int64_t t = 0; t < N; ++t) {
    toks.push_back(Value::string(in.tokens[t]));
    ids.push_back(Value::integer(in.ids[t]));
    sp.push_back(Value::boolean(in.special[t]));
  }
  j.set("tokens", std::move(toks));
  j.set("ids", std::move(ids));
  j.set("special", std::move(sp));
  j.set("segmentation", words_json(in));

  j.set("x", cols_json(in.x, first_cols(std::min(kShowDims, in.d_model))));
  if (in.x_normed.rows) j.set("x_normed", cols_json(in.x_normed, first_cols(std::min(kShowDims, in.d_model))));
  j.set("q", mat_json(in.q));
  j.set("k", mat_json(in.k));
  j.set("v", mat_json(in.v));

  // QKᵀ, ÷√d_k, the mask, softmax (double) beside the captured weights.
  Mat scores(N, N), scaled(N, N);
  Value allow = Value::array(), masked = Value::array(), soft = Value::array(), sums = Value::array();
  const Mat& cap = in.weights[static_cast<std::size_t>(in.head)];
  double max_diff = 0;
  for (int64_t i = 0; i < N; ++i) {
    std::vector<bool> a(static_cast<std::size_t>(N));
    Value arow = Value::array(), mrow = Value::array();
    std::vector<double> srow(static_cast<std::size_t>(N));
    double sum = 0;
    for (int64_t jj = 0; jj < N; ++jj) {
      double s = 0;
      for (int64_t d = 0; d < D; ++d) s += in.q(i, d) * in.k(jj, d);
      scores(i, jj) = s;
      scaled(i, jj) = srow[jj] = s * in.scale;
      a[jj] = (!in.causal || jj <= i) && (in.window <= 0 || jj > i - in.window);
      arow.push_back(Value::boolean(a[jj]));
      mrow.push_back(a[jj] ? num(scaled(i, jj)) : Value());
      sum += cap(i, jj);
    }
    const std::vector<double> w = masked_softmax(srow, a);
    for (int64_t jj = 0; jj < N; ++jj) max_diff = std::max(max_diff, std::fabs(w[jj] - cap(i, jj)));
    allow.push_back(std::move(arow));
    masked.push_back(std::move(mrow));
    soft.push_back(row_json(w));
    sums.push_back(num(sum));
  }
  j.set("scores", mat_json(scores));
  j.set("scaled", mat_json(scaled));
  j.set("allow", std::move(allow));
  j.set("masked", std::move(masked));
  j.set("weights", mat_json(cap));
  j.set("weights_double", std::move(soft));
  j.set("row_sums", std::move(sums));
  j.set("max_abs_diff", num(max_diff));

  // weights × V from the captured weights, beside the engine's head output where it has one.
  Mat out(N, D);
  for (int64_t i = 0; i < N; ++i)
    for (int64_t d = 0; d < D; ++d) {
      double s = 0;
      for (int64_t jj = 0; jj < N; ++jj) s += cap(i, jj) * in.v(jj, d);
      out(i, d) = s;
    }
  j.set("out", mat_json(out));
  j.set("out_engine", mat_json(in.att.cols_slice(in.head * D, D)));
  j.set("out_from_engine", Value::boolean(in.att_from_engine));

  Value heads = Value::array();
  for (const Mat& w : in.weights) heads.push_back(mat_json(w));
  j.set("head_weights", std::move(heads));
  std::vector<int64_t> ccols;  // the first two columns of every head
  for (int64_t h = 0; h < H; ++h)
    for (int64_t d = 0; d < std::min<int64_t>(2, D); ++d) ccols.push_back(h * D + d);
  j.set("concat", cols_json(in.att, ccols));
  const std::vector<int64_t> cs = first_cols(std::min(kShowDims, in.d_model));
  j.set("o", cols_json(in.o, cs));
  j.set("x_after", cols_json(in.x_after, cs));
  j.set("normed_after", cols_json(in.normed_after, cs));
  j.set("tutorial", tutorial_json());
  return j;
}

}  // namespace attn::teach::stages_detail
