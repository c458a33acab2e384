// `attn view --terminal`: one layer and head as a heatmap in Unicode block
// shading (' ' ░ ▒ ▓ █), rows = queries, columns = keys (two terminal columns
// per key), labels aligned by display width (CJK counts two).
#include <attn/core/error.h>
#include <attn/text/width.h>
#include <attn/viz/view.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace attn::viz {
namespace {

constexpr int kMaxLabelWidth = 20;

// A token as one line of at most kMaxLabelWidth columns: control characters
// become '?', longer tokens end in "…".
std::string label(const std::string& token) {
  std::string out;
  int w = 0;
  for (std::size_t i = 0; i < token.size();) {
    const std::size_t start = i;
    const char32_t c = text::next_code_point(token, i);
    std::string piece = (c < 0x20 || c == 0x7F) ? std::string("?") : token.substr(start, i - start);
    const int pw = text::display_width(piece);
    if (w + pw > kMaxLabelWidth - 1 && i < token.size()) {
      out += "…";
      return out;
    }
    out += piece;
    w += pw;
  }
  return out;
}

std::string fixed(double v, int decimals) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

}  // namespace

std::string terminal_heatmap(const Export& e, const TerminalOptions& o) {
  const AttentionSet& s = o.set.empty() ? e.sets.front() : e.set(o.set);
  const auto L = static_cast<int64_t>(s.layers.size());
  ATTN_CHECK(o.layer >= 0 && o.layer < L, "--layer: expected a layer in 0..", L - 1, " (", s.key, " has ", L,
             " layers); got ", o.layer);
  const Layer& layer = s.layers[static_cast<std::size_t>(o.layer)];
  ATTN_CHECK(o.head >= 0 && o.head < layer.heads, "--head: expected a head in 0..", layer.heads - 1,
             " (layer ", o.layer, " has ", layer.heads, " heads); got ", o.head);
  const int64_t N = layer.rows, M = layer.cols;
  double top = 0;
  for (int64_t i = 0; i < N; ++i)
    for (int64_t j = 0; j < M; ++j) top = std::max(top, layer.at(o.head, i, j));

  static const char* const kShades[] = {" ", "░", "▒", "▓", "█"};
  auto level = [&](double w) {
    if (w <= 0 || top <= 0) return 0;
    return std::clamp(static_cast<int>(std::ceil(4.0 * w / top - 1e-12)), 1, 4);
  };

  std::vector<std::string> row_labels;
  int label_w = 0;
  for (int64_t i = 0; i < N; ++i) {
    row_labels.push_back(std::to_string(i) + " " + label(s.row_tokens[static_cast<std::size_t>(i)]));
    label_w = std::max(label_w, text::display_width(row_labels.back()));
  }

  std::string out;
  out += s.label + ", layer " + std::to_string(o.layer) + " of 0.." + std::to_string(L - 1) + ", head " +
         std::to_string(o.head) + " of 0.." + std::to_string(layer.heads - 1) + ": " + std::to_string(N) +
         " queries (rows) x " + std::to_string(M) + " keys (columns)\n";
  if (!e.layer_names.empty() && o.layer < static_cast<int64_t>(e.layer_names.size()))
    out += "layer name: " + e.layer_names[static_cast<std::size_t>(o.layer)] + "\n";
  out += "shading relative to this head's largest weight " + fixed(top, 4) +
         ":  ' ' = 0   ░ <= 25%   ▒ <= 50%   ▓ <= 75%   █ <= 100%\n\n";

  // Column indices: a tens line when there are more than 10 keys, then units.
  const std::string margin(static_cast<std::size_t>(label_w) + 2, ' ');
  if (M > 10) {
    std::string tens = margin;
    for (int64_t j = 0; j < M; ++j) {
      tens += ' ';
      tens += j >= 10 ? static_cast<char>('0' + (j / 10) % 10) : ' ';
    }
    out += tens + "\n";
  }
  std::string units = margin;
  for (int64_t j = 0; j < M; ++j) {
    units += ' ';
    units += static_cast<char>('0' + j % 10);
  }
  out += units + "\n";

  for (int64_t i = 0; i < N; ++i) {
    std::string line = text::pad(row_labels[static_cast<std::size_t>(i)], label_w) + "  ";
    int64_t best = 0;
    double sum = 0;
    for (int64_t j = 0; j < M; ++j) {
      const double w = layer.at(o.head, i, j);
      sum += w;
      if (w > layer.at(o.head, i, best)) best = j;
      const char* shade = kShades[level(w)];
      line += shade;
      line += shade;
    }
    if (sum == 0)
      line += "   (fully masked)";
    else
      line += "   -> " + std::to_string(best) + " " + label(s.col_tokens[static_cast<std::size_t>(best)]) +
              " " + fixed(layer.at(o.head, i, best), 3);
    out += line + "\n";
  }

  // The keys by index (wrapped), since column headers only show numbers.
  out += "\nkeys:";
  int col = 5;
  for (int64_t j = 0; j < M; ++j) {
    const std::string item =
        "  " + std::to_string(j) + " " + label(s.col_tokens[static_cast<std::size_t>(j)]);
    const int w = text::display_width(item);
    if (col + w > 100) {
      out += "\n     ";
      col = 5;
    }
    out += item;
    col += w;
  }
  out += "\n";
  return out;
}

}  // namespace attn::viz
