// Plain-text tables for the terminal: columns aligned by display width (CJK
// characters count two columns, see width.h), a dashed rule under the
// header, optional group labels spanning several columns above the header.
//
//   word   q·k_j   weight
//   ----   -----   ------
//   今天   0.000   0.0475
//
// Every rendered line has the same display width (trailing cells are padded).
#pragma once

#include <attn/text/width.h>

#include <string>
#include <vector>

namespace attn::text {

class Table {
 public:
  struct Column {
    std::string header;
    Align align = Align::right;
  };

  explicit Table(std::vector<Column> columns);

  // A label spanning `count` columns starting at `first`, printed above the headers.
  Table& group(const std::string& label, int first, int count);
  // Appends a row; it must have one cell per column (throws attn::Error otherwise).
  Table& row(std::vector<std::string> cells);

  int num_columns() const { return static_cast<int>(columns_.size()); }
  int num_rows() const { return static_cast<int>(rows_.size()); }

  // The table as lines (no newline characters), each prefixed by `indent`.
  std::vector<std::string> lines(const std::string& indent = "  ") const;
  // lines() joined with '\n', ending in '\n'.
  std::string render(const std::string& indent = "  ") const;

 private:
  struct Group {
    std::string label;
    int first, count;
  };
  std::vector<Column> columns_;
  std::vector<Group> groups_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace attn::text
