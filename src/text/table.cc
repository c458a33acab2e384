#include <attn/core/error.h>
#include <attn/text/table.h>

#include <algorithm>

namespace attn::text {
namespace {
constexpr int kGap = 2;  // spaces between columns
}  // namespace

Table::Table(std::vector<Column> columns) : columns_(std::move(columns)) {
  ATTN_CHECK(!columns_.empty(), "table: needs at least one column; got 0");
}

Table& Table::group(const std::string& label, int first, int count) {
  ATTN_CHECK(first >= 0 && count >= 1 && first + count <= num_columns(), "table: group '", label,
             "' must span columns inside [0, ", num_columns(), "); got first ", first, ", count ", count);
  groups_.push_back({label, first, count});
  return *this;
}

Table& Table::row(std::vector<std::string> cells) {
  ATTN_CHECK(static_cast<int>(cells.size()) == num_columns(), "table: a row needs ", num_columns(),
             " cells; got ", cells.size());
  rows_.push_back(std::move(cells));
  return *this;
}

std::vector<std::string> Table::lines(const std::string& indent) const {
  const int n = num_columns();
  std::vector<int> width(n, 0);
  for (int c = 0; c < n; ++c) {
    width[c] = display_width(columns_[c].header);
    for (const auto& r : rows_) width[c] = std::max(width[c], display_width(r[c]));
  }
  // Widen the last column of a group when its label is wider than the span.
  for (const Group& g : groups_) {
    int span = kGap * (g.count - 1);
    for (int c = g.first; c < g.first + g.count; ++c) span += width[c];
    const int need = display_width(g.label);
    if (need > span) width[g.first + g.count - 1] += need - span;
  }
  int total = kGap * (n - 1);
  for (int w : width) total += w;

  std::vector<std::string> out;
  if (!groups_.empty()) {
    std::vector<const Group*> at(n, nullptr);
    for (const Group& g : groups_) at[g.first] = &g;
    std::string line;
    for (int c = 0; c < n;) {
      if (c > 0) line += std::string(kGap, ' ');
      if (at[c]) {
        const Group& g = *at[c];
        int span = kGap * (g.count - 1);
        for (int k = g.first; k < g.first + g.count; ++k) span += width[k];
        line += pad(g.label, span, Align::center);
        c += g.count;
      } else {
        line += std::string(width[c], ' ');
        ++c;
      }
    }
    out.push_back(indent + pad(line, total));
  }
  auto emit = [&](const std::vector<std::string>& cells) {
    std::string line;
    for (int c = 0; c < n; ++c) {
      if (c > 0) line += std::string(kGap, ' ');
      line += pad(cells[c], width[c], columns_[c].align);
    }
    out.push_back(indent + line);
  };
  std::vector<std::string> head(n), rule(n);
  for (int c = 0; c < n; ++c) {
    head[c] = columns_[c].header;
    rule[c] = std::string(width[c], '-');
  }
  emit(head);
  emit(rule);
  for (const auto& r : rows_) emit(r);
  return out;
}

std::string Table::render(const std::string& indent) const {
  std::string s;
  for (const auto& l : lines(indent)) s += l + "\n";
  return s;
}

}  // namespace attn::text
