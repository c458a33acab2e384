// The reader and the terminal heatmap on the bad exports of the regression
// corpus (tests/io/data/bad/view_*.export.json, python/reference/make_bad_files.py):
// each must end in attn::Error naming the problem — never a crash or another
// exception (std::bad_alloc, ...), and never an export that renders.
#include <attn/core/error.h>
#include <attn/io/files.h>
#include <attn/viz/export.h>
#include <attn/viz/view.h>
#include <dirent.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "testing/testing.h"

namespace attn::viz {
namespace {

struct BadExport {
  std::string file;      // under tests/io/data/bad/
  TerminalOptions view;  // what `attn view FILE --terminal [--layer L] [--head H] [--set KEY]` asks
  std::string expected;
};
void PrintTo(const BadExport& b, std::ostream* os) {
  *os << b.file << " set '" << b.view.set << "' layer " << b.view.layer << " head " << b.view.head;
}

TerminalOptions view(const std::string& set, int64_t layer, int64_t head) {
  TerminalOptions o;
  o.set = set;
  o.layer = layer;
  o.head = head;
  return o;
}
const TerminalOptions kFirst = view("", 0, 0);  // --terminal: the first set, layer 0, head 0

const std::vector<BadExport>& corpus() {
  static const std::vector<BadExport> files = {
      {"view_empty.export.json", kFirst, "malformed JSON (0 bytes): json: at byte 0"},
      {"view_truncated.export.json", kFirst, "malformed JSON (28 bytes)"},
      {"view_not_object.export.json", kFirst, "expected a JSON object"},
      {"view_deep_nesting.export.json", kFirst, "nesting of at most 128"},
      {"view_invalid_utf8_token.export.json", kFirst, "expected valid UTF-8 in a string; got byte 0xc3"},
      {"view_nan_literal.export.json", kFirst, "malformed JSON"},
      {"view_infinity.export.json", kFirst, "expected a number within the range of a double"},
      {"view_no_attention.export.json", kFirst, "missing \"attention\""},
      {"view_no_layers.export.json", kFirst, "\"attention\" has no layers"},
      {"view_tokens_empty.export.json", kFirst, "\"tokens\" is empty"},
      {"view_tokens_not_strings.export.json", kFirst, "tokens[0] must be a string; got number"},
      {"view_rows_vs_tokens.export.json", kFirst, "expected 2 rows (one per query token); got 3"},
      {"view_cols_vs_tokens.export.json", kFirst, "expected 2 columns (one per key token); got 3"},
      {"view_cross_shape.export.json", kFirst, "expected 2 columns (one per encoder (source) token); got 1"},
      {"view_batch_2.export.json", kFirst, "expected batch size 1"},
      {"view_no_heads.export.json", kFirst, "expected a non-empty array of heads"},
      {"view_heads_differ.export.json", kFirst, "attention layer 1 has 2 heads; expected 1 like layer 0"},
      {"view_many_heads_few_bytes.export.json", kFirst, "head 0: expected a [2000, 2000] matrix; got number"},
      {"view_nan_as_null.export.json", kFirst,
       "expected a number; got null (NaN or infinity written as null?)"},
      {"view_negative_weight.export.json", kFirst, "weight -0.5 is negative"},
      {"view_row_sum.export.json", kFirst, "weights sum to 0.7; expected 1 within 0.001"},
      {"view_weight_string.export.json", kFirst, "expected a number; got string"},
      {"view_mixed_layouts.export.json", kFirst, "mixes the self-attention layout"},
      {"view_encdec_no_attention.export.json", kFirst, "encoder-decoder layout without attention"},
      {"view_layer_names_count.export.json", kFirst, "\"layer_names\" has 2 names; expected 1"},
      {"view_model_not_string.export.json", kFirst, "\"model\" must be a string; got number"},
      // A valid export with a layer, head or set it does not have.
      {"view_valid.export.json", view("", 5, 0), "--layer: expected a layer in 0..0"},
      {"view_valid.export.json", view("", 0, 3), "--head: expected a head in 0..0"},
      {"view_valid.export.json", view("cross_attention", 0, 0), "export has no \"cross_attention\""},
  };
  return files;
}

class ViewBadCorpus : public ::testing::TestWithParam<BadExport> {};

TEST_P(ViewBadCorpus, ClearErrorNoCrash) {
  const BadExport& b = GetParam();
  const std::string bytes =
      io::read_file(attn::testing::source_path("tests/io/data/bad/" + b.file), "bad export");
  // Only attn::Error may come out (another exception fails the test as unexpected).
  EXPECT_ERROR_CONTAINS(terminal_heatmap(parse_export(bytes), b.view), {b.expected});
}

INSTANTIATE_TEST_SUITE_P(Files, ViewBadCorpus, ::testing::ValuesIn(corpus()),
                         [](const ::testing::TestParamInfo<BadExport>& info) {
                           const TerminalOptions& v = info.param.view;
                           std::string n = info.param.file + "_" + v.set + "_" + std::to_string(v.layer) +
                                           "_" + std::to_string(v.head);
                           std::replace_if(
                               n.begin(), n.end(), [](char c) { return !std::isalnum(c); }, '_');
                           return n;
                         });

TEST(ViewBadCorpus, TableListsEveryExport) {
  std::set<std::string> on_disk, listed;
  const std::string dir = attn::testing::source_path("tests/io/data/bad");
  DIR* d = opendir(dir.c_str());
  ASSERT_NE(d, nullptr) << dir;
  while (const dirent* e = readdir(d)) {
    const std::string n = e->d_name;
    if (n.size() > 12 && n.compare(n.size() - 12, 12, ".export.json") == 0) on_disk.insert(n);
  }
  closedir(d);
  for (const BadExport& b : corpus()) {
    listed.insert(b.file);
    EXPECT_TRUE(on_disk.count(b.file)) << "listed but missing: " << b.file;
  }
  for (const std::string& f : on_disk) EXPECT_TRUE(listed.count(f)) << "no table entry for " << f;
}

}  // namespace
}  // namespace attn::viz
