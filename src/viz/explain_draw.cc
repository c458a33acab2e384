// The explainer's stages drawn without a browser (attn/viz/explain_page.h): the same matrices the
// page shows for each stage, laid out as a grid of cells with numbers, and the SVG writer.
#include <attn/core/error.h>
#include <attn/viz/explain_page.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <optional>

namespace attn::viz {

const std::vector<std::string> kExplainStages = {"tokens",  "x",  "qkv",   "scores", "scaled",  "mask",
                                                 "softmax", "wv", "heads", "concat", "residual"};

namespace {

using json::Value;

struct Titles {
  const char* key;
  const char* zh;
  const char* en;
};
constexpr Titles kTitles[] = {
    {"tokens", "① 词与词元", "1 words and tokens"},
    {"x", "② 嵌入行（这一层的输入）", "2 embedding rows (the layer's input)"},
    {"qkv", "③ 这个头的 Q、K、V", "3 Q, K, V of this head"},
    {"scores", "④ 分数 Q·Kᵀ", "4 scores Q·Kᵀ"},
    {"scaled", "⑤ 缩放：÷√d_k", "5 scale: ÷√d_k"},
    {"mask", "⑥ 掩码", "6 mask"},
    {"softmax", "⑦ 逐行 softmax", "7 softmax row by row"},
    {"wv", "⑧ 权重 × V", "8 weights × V"},
    {"heads", "⑨ 所有头并排", "9 the heads side by side"},
    {"concat", "⑩ 拼接与 W_O", "10 concatenation and W_O"},
    {"residual", "⑪ 残差与归一化", "11 residual and norm"},
    {"m_x", "输入 X", "input X"},
    {"m_xn", "归一化后的 X", "X normalised"},
    {"m_q", "查询 Q", "queries Q"},
    {"m_k", "键 K", "keys K"},
    {"m_v", "值 V", "values V"},
    {"m_scores", "分数 Q·Kᵀ", "scores Q·Kᵀ"},
    {"m_scaled", "缩放后的分数", "scaled scores"},
    {"m_allow", "谁能看到谁（✓ 可见）", "who may see whom (✓ visible)"},
    {"m_masked", "加掩码后的分数", "masked scores"},
    {"m_weights", "注意力权重（右列：行和）", "attention weights (right: row sums)"},
    {"m_out", "输出 权重 × V", "output weights × V"},
    {"m_concat", "拼接", "concatenation"},
    {"m_o", "W_O · 拼接", "W_O · concat"},
    {"m_res", "残差 x + 注意力输出", "residual x + attention output"},
    {"m_norm", "归一化之后", "after the norm"},
    {"m_head", "头 ", "head "},
    {"padding", "⑥ 掩码：填充后的批", "6 mask: the padded batch"},
    {"causality", "注意力不是因果", "Attention is not causality"},
    {"m_pallow", "谁能看到谁（填充的列 ✗）", "who may see whom (the padded columns ✗)"},
    {"m_pmasked", "加掩码后的分数（填充的列 −∞）", "masked scores (the padded columns −∞)"},
    {"m_pweights", "批中的注意力权重（填充的列为 0；右列：行和）",
     "weights in the batch (the padded columns 0; right: row sums)"},
    {"m_punpadded", "这句话单独计算的权重", "the sentence alone"},
    {"p_note", "这句话在一个批里，另一行更长：它的行末补了 ",
     "The sentence in a batch whose other row is longer: its row ends in "},
    {"p_note2", " 个 <pad>。真实词元的权重与单独计算时的最大差：",
     " <pad>. Largest difference of the real tokens' weights from the sentence alone: "},
    {"c_att", "注意力（最后一层 [CLS]，各头平均）", "attention (last layer, [CLS], mean over heads)"},
    {"c_ig", "积分梯度（归因）", "integrated gradients (attribution)"},
    {"c_pred", "预测：", "predicted: "},
    {"c_model", "评论分类器", "the review classifier"},
    {"c_rho", "Spearman 秩相关 ρ（注意力 vs |IG|，非特殊词元 ",
     "Spearman's ρ (attention vs |IG|, non-special tokens: "},
    {"c_rho2", " 个）= ", ") = "},
    {"c_comp", "完备性：Σ IG = ", "completeness: Σ IG = "},
    {"c_comp2", "，f(文本) − f(基线) = ", ", f(text) − f(baseline) = "},
    {"c_comp3", "，误差 ", ", error "},
    {"c_steps", "中点法则 m = ", "midpoint rule m = "},
    {"c_base", "，基线 ", ", baseline "},
    {"c_special", "（特殊词元：不在路径上，不计入 ρ）", " (special tokens: not on the path, not in ρ)"},
    {"layer", "层 ", "layer "},
    {"of", "共", "of"},
    {"cols", "列", "columns"},
};
std::string tr(const std::string& key, bool zh) {
  for (const Titles& t : kTitles)
    if (key == t.key) return zh ? t.zh : t.en;
  throw Error("explain drawing: no title '" + key + "'");
}

struct Matrix {
  std::string title, shape;
  std::vector<std::vector<std::optional<double>>> rows;  // nullopt: blocked (−∞)
  std::vector<std::string> row_labels, col_labels;
  std::string kind = "signed";  // signed | weight | allow
  std::vector<double> sums;
  bool small = false, selected = false;
};

std::string f4(std::optional<double> v) {
  if (!v) return "−∞";
  char b[32];
  std::snprintf(b, sizeof b, "%.4f", std::fabs(*v) < 5e-5 ? 0.0 : *v);
  return b;
}
std::string hex(int r, int g, int b) {
  char s[8];
  std::snprintf(s, sizeof s, "#%02x%02x%02x", std::clamp(r, 0, 255), std::clamp(g, 0, 255),
                std::clamp(b, 0, 255));
  return s;
}
// The page's colours, blended on white (the page uses alpha).
std::string cell_color(const std::string& kind, std::optional<double> v, double scale) {
  if (!v) return "#444444";
  auto blend = [](int r, int g, int b, double a) {
    return hex(static_cast<int>(std::lround(255 + (r - 255) * a)),
               static_cast<int>(std::lround(255 + (g - 255) * a)),
               static_cast<int>(std::lround(255 + (b - 255) * a)));
  };
  if (kind == "allow") return *v != 0 ? "#dff0d8" : "#444444";
  if (kind == "weight") return blend(31, 95, 168, std::min(1.0, *v / scale) * 0.85);
  const double a = std::min(1.0, std::fabs(*v) / scale) * 0.6;
  return *v >= 0 ? blend(214, 96, 77, a) : blend(67, 147, 195, a);
}

std::vector<std::optional<double>> row_of(const Value& r) {
  std::vector<std::optional<double>> out;
  for (std::size_t j = 0; j < r.size(); ++j) {
    const Value& v = r.at(j);
    if (v.is_null())
      out.emplace_back(std::nullopt);
    else if (v.is_bool())
      out.emplace_back(v.as_bool() ? 1.0 : 0.0);
    else
      out.emplace_back(v.as_double());
  }
  return out;
}

class Builder {
 public:
  Builder(const Value& d, bool zh) : d_(d), zh_(zh) {
    const Value& toks = d.at("tokens");
    for (std::size_t i = 0; i < toks.size(); ++i)
      labels_.push_back(toks.at(i).as_string() + "·" + std::to_string(i));
    n_ = static_cast<int64_t>(toks.size());
    dk_ = d.at("d_k").as_int64();
  }

  std::vector<Matrix> matrices(const std::string& s) const {
    std::vector<Matrix> out;
    if (s == "x") {
      out.push_back(part("m_x", d_.at("x")));
      if (d_.find("x_normed")) out.push_back(part("m_xn", d_.at("x_normed")));
    } else if (s == "qkv") {
      for (const char* m : {"q", "k", "v"}) out.push_back(cols(std::string("m_") + m, d_.at(m)));
    } else if (s == "scores" || s == "scaled") {
      out.push_back(square(s == "scores" ? "m_scores" : "m_scaled", d_.at(s), "signed"));
    } else if (s == "mask") {
      out.push_back(square("m_allow", d_.at("allow"), "allow"));
      out.push_back(square("m_masked", d_.at("masked"), "signed"));
    } else if (s == "softmax") {
      Matrix m = square("m_weights", d_.at("weights"), "weight");
      const Value& sums = d_.at("row_sums");
      for (std::size_t i = 0; i < sums.size(); ++i) m.sums.push_back(sums.at(i).as_double());
      out.push_back(std::move(m));
    } else if (s == "wv") {
      out.push_back(cols("m_out", d_.at("out")));
    } else if (s == "heads") {
      const Value& heads = d_.at("head_weights");
      for (std::size_t h = 0; h < heads.size(); ++h) {
        Matrix m = square("m_head", heads.at(h), "weight");
        m.title += std::to_string(h);
        m.small = true;
        m.selected = static_cast<int64_t>(h) == d_.at("head").as_int64();
        out.push_back(std::move(m));
      }
    } else if (s == "concat") {
      Matrix m = part("m_concat", d_.at("concat"));
      m.col_labels.clear();
      const Value& c = d_.at("concat").at("cols");
      for (std::size_t j = 0; j < c.size(); ++j)
        m.col_labels.push_back(std::string("h") + std::to_string(c.at(j).as_int64() / dk_) + ".d" +
                               std::to_string(c.at(j).as_int64() % dk_));
      out.push_back(std::move(m));
      out.push_back(part("m_o", d_.at("o")));
    } else if (s == "residual") {
      out.push_back(part("m_x", d_.at("x")));
      out.push_back(part("m_o", d_.at("o")));
      out.push_back(part("m_res", d_.at("x_after")));
      out.push_back(part("m_norm", d_.at("normed_after")));
    }
    return out;
  }
  const std::vector<std::string>& labels() const { return labels_; }

 private:
  std::string col_shape(int64_t rows, int64_t all, int64_t shown) const {
    std::string s = std::string("[") + std::to_string(rows) + ", " + std::to_string(all) + "]";
    if (shown < all)
      s += "  (" + std::to_string(shown) + " " + tr("of", zh_) + " " + std::to_string(all) + " " +
           tr("cols", zh_) + ")";
    return s;
  }
  // {shape, cols, rows}
  Matrix part(const std::string& title, const Value& p) const {
    Matrix m;
    m.title = tr(title, zh_);
    const Value& c = p.at("cols");
    for (std::size_t j = 0; j < c.size(); ++j)
      m.col_labels.push_back(std::string("d") + std::to_string(c.at(j).as_int64()));
    m.shape = col_shape(p.at("shape").at(0).as_int64(), p.at("shape").at(1).as_int64(),
                        static_cast<int64_t>(c.size()));
    for (std::size_t i = 0; i < p.at("rows").size(); ++i) m.rows.push_back(row_of(p.at("rows").at(i)));
    m.row_labels = labels_;
    return m;
  }
  // [N, d_k] shown in its first 16 columns, as the page does.
  Matrix cols(const std::string& title, const Value& rows) const {
    Matrix m;
    m.title = tr(title, zh_);
    const int64_t shown = std::min<int64_t>(16, dk_);
    for (int64_t j = 0; j < shown; ++j) m.col_labels.push_back(std::string("d") + std::to_string(j));
    m.shape = col_shape(n_, dk_, shown);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      std::vector<std::optional<double>> r = row_of(rows.at(i));
      r.resize(static_cast<std::size_t>(shown));
      m.rows.push_back(std::move(r));
    }
    m.row_labels = labels_;
    return m;
  }

 public:
  // The padded batch's rows: the sentence's N real queries over all N + P keys of its padded row.
  std::vector<Matrix> padding() const {
    const Value& p = d_.at("padding");
    std::vector<std::string> keys;
    for (std::size_t i = 0; i < p.at("tokens").size(); ++i)
      keys.push_back(p.at("tokens").at(i).as_string() + "·" + std::to_string(i));
    const std::vector<std::string> queries(keys.begin(), keys.begin() + p.at("n").as_int64());
    auto rect = [&](const std::string& title, const Value& rows, const std::string& kind,
                    const std::vector<std::string>& cols) {
      Matrix m;
      m.title = tr(title, zh_);
      m.shape = std::string("[") + std::to_string(rows.size()) + ", " + std::to_string(cols.size()) + "]";
      for (std::size_t i = 0; i < rows.size(); ++i) m.rows.push_back(row_of(rows.at(i)));
      m.row_labels = queries;
      m.col_labels = cols;
      m.kind = kind;
      return m;
    };
    std::vector<Matrix> out;
    std::vector<std::string> numbers;  // the ✓/✗ cells are narrow: their columns are numbered only
    for (std::size_t i = 0; i < keys.size(); ++i) numbers.push_back(std::to_string(i));
    out.push_back(rect("m_pallow", p.at("allow"), "allow", numbers));
    out.push_back(rect("m_pmasked", p.at("masked"), "signed", keys));
    Matrix w = rect("m_pweights", p.at("weights"), "weight", keys);
    for (const auto& r : w.rows) {
      double sum = 0;
      for (const auto& v : r) sum += v.value_or(0.0);
      w.sums.push_back(sum);
    }
    out.push_back(std::move(w));
    out.push_back(rect("m_punpadded", p.at("weights_unpadded"), "weight", queries));
    return out;
  }

 private:
  Matrix square(const std::string& title, const Value& rows, const std::string& kind) const {
    Matrix m;
    m.title = tr(title, zh_);
    m.shape = std::string("[") + std::to_string(n_) + ", " + std::to_string(n_) + "]";
    for (std::size_t i = 0; i < rows.size(); ++i) m.rows.push_back(row_of(rows.at(i)));
    m.row_labels = m.col_labels = labels_;
    m.kind = kind;
    return m;
  }

  const Value& d_;
  bool zh_;
  std::vector<std::string> labels_;
  int64_t n_ = 0, dk_ = 0;
};

// At most `n` characters of a UTF-8 label (never cut inside a character).
std::string prefix_chars(const std::string& s, std::size_t n) {
  std::size_t i = 0, chars = 0;
  while (i < s.size() && chars < n) {
    ++i;
    while (i < s.size() && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) ++i;
    ++chars;
  }
  return s.substr(0, i);
}

double scale_of(const Matrix& m) {
  double s = 0;
  for (const auto& r : m.rows)
    for (const auto& v : r)
      if (v) s = std::max(s, std::fabs(*v));
  return s > 0 ? s : 1;
}

DrawItem text(double x, double y, std::string s, double size, bool bold = false, bool mono = false,
              std::string fill = "#000000") {
  DrawItem t;
  t.text = true, t.x = x, t.y = y, t.s = std::move(s), t.size = size, t.bold = bold, t.mono = mono;
  t.fill = std::move(fill);
  return t;
}
DrawItem rect(double x, double y, double w, double h, std::string fill) {
  DrawItem r;
  r.x = x, r.y = y, r.w = w, r.h = h, r.fill = std::move(fill);
  return r;
}

// The matrices one under the other (the heads' small maps side by side), from y down; y and max_w grow.
void draw_matrices(const std::vector<Matrix>& ms, double x0, double& y, double& max_w,
                   std::vector<DrawItem>& out_items) {
  double xh = x0, row_h = 0;
  for (const Matrix& m : ms) {
    const double N = static_cast<double>(m.rows.size());
    const double cw =
        m.small ? std::max(4.0, std::min(12.0, std::floor(160 / N))) : (m.kind == "allow" ? 24 : 58);
    const double ch = m.small ? cw : 18, lw = m.small ? 0 : 130, sc = scale_of(m);
    const double w = lw + cw * static_cast<double>(m.col_labels.size() + (m.sums.empty() ? 0 : 1));
    const double hgt = 24 + (m.small ? 0 : ch) + ch * N + 8;
    const double bx = m.small ? xh : x0, by = y, top = by + 22 + (m.small ? 0 : ch);
    out_items.push_back(text(bx, by + 14, m.title + "  " + m.shape, 13, m.selected));
    if (!m.small)
      for (std::size_t j = 0; j < m.col_labels.size(); ++j)
        out_items.push_back(
            text(bx + lw + static_cast<double>(j) * cw + 2, by + 35, prefix_chars(m.col_labels[j], 6), 10));
    for (std::size_t i = 0; i < m.rows.size(); ++i) {
      const double ry = top + static_cast<double>(i) * ch;
      if (!m.small) out_items.push_back(text(bx + 2, ry + 13, m.row_labels[i], 11));
      for (std::size_t j = 0; j < m.rows[i].size(); ++j) {
        const auto& v = m.rows[i][j];
        const double cx = bx + lw + static_cast<double>(j) * cw;
        out_items.push_back(rect(cx, ry, cw, ch, cell_color(m.kind, v, sc)));
        if (m.small) continue;
        const bool blocked = !v || (m.kind == "allow" && *v == 0);
        out_items.push_back(text(cx + 3, ry + 13, m.kind == "allow" ? (*v != 0 ? "✓" : "✗") : f4(v), 10,
                                 false, true, blocked ? "#eeeeee" : "#000000"));
      }
      if (!m.sums.empty())
        out_items.push_back(text(bx + lw + static_cast<double>(m.rows[i].size()) * cw + 3, ry + 13,
                                 f4(m.sums[i]), 10, true, true));
    }
    if (m.small) {
      xh += w + 14;
      row_h = std::max(row_h, hgt);
      if (xh > 1100) xh = x0, y += row_h, row_h = 0;
      max_w = std::max(max_w, xh);
    } else {
      y += hgt + 10;
      max_w = std::max(max_w, w + 20);
    }
  }
  y += row_h;
}

// A text cut into lines of at most `width` characters (Chinese anywhere, English at spaces).
std::vector<std::string> wrap(const std::string& s, std::size_t width, bool zh) {
  std::vector<std::string> lines;
  std::string line;
  std::size_t chars = 0, i = 0;
  while (i < s.size()) {
    std::size_t j = i + 1;
    while (j < s.size() && (static_cast<unsigned char>(s[j]) & 0xC0) == 0x80) ++j;
    const std::string ch = s.substr(i, j - i);
    i = j;
    if (chars >= width) {
      auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
      std::size_t cut = line.size(), skip = 0;
      if (!zh) {
        cut = line.rfind(' ');
        skip = 1;
        if (cut == std::string::npos || cut == 0) cut = line.size(), skip = 0;
      } else if (word(ch[0])) {  // Chinese breaks anywhere, but not inside a Latin word ("logit")
        while (cut > 0 && word(line[cut - 1])) --cut;
        if (cut == 0) cut = line.size();
      }
      lines.push_back(line.substr(0, cut));
      line = cut < line.size() ? line.substr(cut + skip) : "";
      chars = 0;
      for (std::size_t k = 0; k < line.size(); ++k)
        chars += (static_cast<unsigned char>(line[k]) & 0xC0) != 0x80;
    }
    line += ch;
    ++chars;
  }
  if (!line.empty()) lines.push_back(line);
  return lines;
}

std::string fixed(double v, int digits) {
  char b[48];
  std::snprintf(b, sizeof b, "%.*f", digits, v);
  return b;
}

// "Attention is not causality": per token the [CLS] attention and the integrated gradients as bars with
// their numbers, then the rank correlation, the completeness check and the note.
void draw_causality(const Value& c, bool zh, double x0, double& y, double& max_w,
                    std::vector<DrawItem>& items) {
  const Value &toks = c.at("tokens"), &att = c.at("attention"), &ig = c.at("ig"), &special = c.at("special");
  const std::size_t L = toks.size();
  const int64_t pred = c.at("predicted").as_int64();
  items.push_back(text(x0, y + 14,
                       tr("c_pred", zh) + c.at("labels").at(static_cast<std::size_t>(pred)).as_string() +
                           " (p = " + fixed(c.at("probs").at(static_cast<std::size_t>(pred)).as_double(), 3) +
                           ")",
                       13, true));
  y += 26;
  double amax = 0, gmax = 0;
  for (std::size_t i = 0; i < L; ++i) {
    amax = std::max(amax, att.at(i).as_double());
    gmax = std::max(gmax, std::fabs(ig.at(i).as_double()));
  }
  amax = amax > 0 ? amax : 1, gmax = gmax > 0 ? gmax : 1;
  const double xa = x0 + 140, xg = x0 + 480, bar = 200, row = 18;
  items.push_back(text(xa, y + 14, tr("c_att", zh), 12, true));
  items.push_back(text(xg, y + 14, tr("c_ig", zh), 12, true));
  y += 22;
  for (std::size_t i = 0; i < L; ++i) {
    const bool sp = special.at(i).as_bool();
    const std::string grey = sp ? "#888888" : "#000000";
    const double a = att.at(i).as_double(), g = ig.at(i).as_double(), ry = y + static_cast<double>(i) * row;
    items.push_back(
        text(x0 + 2, ry + 13, toks.at(i).as_string() + "·" + std::to_string(i), 11, false, false, grey));
    items.push_back(rect(xa, ry + 3, std::max(0.5, bar * a / amax), 12, sp ? "#9bb3d1" : "#1f5fa8"));
    items.push_back(text(xa + bar + 6, ry + 13, fixed(a, 4), 10, false, true, grey));
    const double len = std::max(0.5, bar / 2 * std::fabs(g) / gmax), mid = xg + bar / 2;
    items.push_back(rect(g >= 0 ? mid : mid - len, ry + 3, len, 12, g >= 0 ? "#d6604d" : "#4393c3"));
    std::string gs = g >= 0 ? "+" : "";  // appended, not "+" + s (GCC 12's -Wrestrict false positive)
    gs += fixed(g, 4);
    items.push_back(text(xg + bar + 6, ry + 13, gs, 10, false, true, grey));
  }
  y += row * static_cast<double>(L) + 16;
  const double fe = c.at("f_input").as_double(), fb = c.at("f_baseline").as_double();
  std::vector<std::string> lines = {
      tr("c_rho", zh) + std::to_string(c.at("spearman_tokens").as_int64()) + tr("c_rho2", zh) +
          fixed(c.at("spearman").as_double(), 3),
      tr("c_comp", zh) + fixed(c.at("ig_sum").as_double(), 4) + tr("c_comp2", zh) + fixed(fe, 4) + " − " +
          fixed(fb, 4) + " = " + fixed(fe - fb, 4) + tr("c_comp3", zh) +
          fixed(c.at("completeness_error").as_double(), 5),
      tr("c_steps", zh) + std::to_string(c.at("steps").as_int64()) + tr("c_base", zh) +
          c.at("baseline").as_string() + tr("c_special", zh)};
  for (const std::string& l : lines) {
    items.push_back(text(x0, y + 14, l, 13));
    y += 20;
  }
  y += 8;
  for (const std::string& l : wrap(c.at(zh ? "note_zh" : "note_en").as_string(), zh ? 52 : 110, zh)) {
    items.push_back(text(x0, y + 14, l, 13, false, false, "#6b3d00"));
    y += 20;
  }
  max_w = std::max(max_w, xg + bar + 90);
}

}  // namespace

std::vector<std::string> drawing_stages(const json::Value& stages) {
  std::vector<std::string> out = kExplainStages;
  if (stages.find("padding") != nullptr) out.push_back("padding");
  if (stages.find("causality") != nullptr) out.push_back("causality");
  return out;
}

Drawing stage_drawing(const json::Value& d, const std::string& stage, const std::string& lang) {
  ATTN_CHECK(lang == "zh" || lang == "en", "explain drawing: expected the language zh or en; got '", lang,
             "'");
  ATTN_CHECK(std::find(kExplainStages.begin(), kExplainStages.end(), stage) != kExplainStages.end() ||
                 stage == "padding" || stage == "causality",
             "explain drawing: unknown stage '", stage,
             "'; expected one of the page's stages, padding or causality");
  ATTN_CHECK(stage != "padding" || d.find("padding") != nullptr,
             "explain drawing: the stage 'padding' needs a document with padding (--pad P, e5)");
  ATTN_CHECK(
      stage != "causality" || d.find("causality") != nullptr,
      "explain drawing: the stage 'causality' needs a document with the causality panel (--classifier FILE)");
  const bool zh = lang == "zh";
  const Builder b(d, zh);
  Drawing out;
  double y = 10, max_w = 600;
  const double x0 = 10;
  out.items.push_back(
      text(x0, y + 16,
           stage == "causality"  // the classifier's last layer, not the stages' layer and head
               ? tr(stage, zh) + " — " + tr("c_model", zh)
               : tr(stage, zh) + " — " + d.at("model").as_string() + " · " + tr("layer", zh) +
                     std::to_string(d.at("layer").as_int64()) + " · " + tr("m_head", zh) +
                     std::to_string(d.at("head").as_int64()),
           16, true));
  y += 30;
  if (stage == "tokens") {
    double x = x0;
    out.items.push_back(text(x0, y + 14, d.at("text").as_string(), 14));
    y += 24;
    const Value& words = d.at("segmentation").at("words");
    for (std::size_t w = 0; w < words.size(); ++w) {
      std::string s = words.at(w).at("text").as_string() + " [";
      const Value& t = words.at(w).at("tokens");
      for (std::size_t k = 0; k < t.size(); ++k)
        s += (k ? " " : "") + b.labels()[static_cast<std::size_t>(t.at(k).as_int64())];
      s += "]";
      out.items.push_back(text(x, y + 14, s, 13));
      x += 16 + 8.5 * static_cast<double>(s.size());
      if (x > 1100) x = x0, y += 22;
    }
    y += 26;
    x = x0;
    for (const std::string& l : b.labels()) {
      out.items.push_back(text(x, y + 14, l, 12, false, true));
      x += 14 + 7.5 * static_cast<double>(l.size());
      if (x > 1100) x = x0, y += 20;
    }
    y += 30;
    max_w = 1200;
  }
  if (stage == "padding") {
    const Value& p = d.at("padding");
    char diff[32];
    std::snprintf(diff, sizeof diff, "%.2g", p.at("max_abs_diff_unpadded").as_double());
    out.items.push_back(
        text(x0, y + 14, tr("p_note", zh) + std::to_string(p.at("pad").as_int64()) + tr("p_note2", zh) + diff,
             13));
    y += 26;
  }
  if (stage == "causality")
    draw_causality(d.at("causality"), zh, x0, y, max_w, out.items);
  else
    draw_matrices(stage == "padding" ? b.padding() : b.matrices(stage), x0, y, max_w, out.items);
  out.width = static_cast<int64_t>(std::ceil(max_w));
  out.height = static_cast<int64_t>(std::ceil(y + 10));
  return out;
}

std::string drawing_svg(const Drawing& d) {
  auto esc = [](const std::string& s) {
    std::string o;
    for (char c : s) {
      if (c == '&')
        o += "&amp;";
      else if (c == '<')
        o += "&lt;";
      else if (c == '>')
        o += "&gt;";
      else if (c == '"')
        o += "&quot;";
      else
        o += c;
    }
    return o;
  };
  auto num = [](double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.1f", v);
    return std::string(b);
  };
  std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(d.width) +
                  "\" height=\"" + std::to_string(d.height) +
                  "\" font-family=\"system-ui, Noto Sans CJK SC, Source Han Sans SC, WenQuanYi Micro Hei, "
                  "WenQuanYi Zen Hei, PingFang SC, Microsoft YaHei, sans-serif\">\n"
                  "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n";
  for (const DrawItem& it : d.items) {
    if (!it.text) {
      s += "<rect x=\"" + num(it.x) + "\" y=\"" + num(it.y) + "\" width=\"" + num(it.w) + "\" height=\"" +
           num(it.h) + "\" fill=\"" + it.fill + "\" stroke=\"#dddddd\" stroke-width=\"0.5\"/>\n";
    } else {
      s += "<text x=\"" + num(it.x) + "\" y=\"" + num(it.y) + "\" font-size=\"" + num(it.size) + "\"" +
           (it.bold ? " font-weight=\"bold\"" : "") + (it.mono ? " font-family=\"monospace\"" : "") +
           " fill=\"" + it.fill + "\">" + esc(it.s) + "</text>\n";
    }
  }
  return s + "</svg>\n";
}

}  // namespace attn::viz
