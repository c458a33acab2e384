// `attn view` on the bad exports of the regression corpus
// (tests/io/data/bad/view_*.export.json, python/reference/make_bad_files.py):
// each must end with exit status 1 and "attn view: error: <the problem>" —
// never a crash, an "unexpected error" (std::bad_alloc, ...) or a page.
#include <dirent.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "testing/cli_runner.h"
#include "testing/testing.h"

namespace {

struct BadExport {
  std::string file;  // under tests/io/data/bad/
  std::string args;  // extra arguments after "view FILE"
  std::string expected;
};
void PrintTo(const BadExport& b, std::ostream* os) { *os << b.file << " " << b.args; }

const std::vector<BadExport>& corpus() {
  static const std::vector<BadExport> files = {
      {"view_empty.export.json", "--terminal", "malformed JSON (0 bytes): json: at byte 0"},
      {"view_truncated.export.json", "--terminal", "malformed JSON (28 bytes)"},
      {"view_not_object.export.json", "--terminal", "expected a JSON object"},
      {"view_deep_nesting.export.json", "--terminal", "nesting of at most 128"},
      {"view_invalid_utf8_token.export.json", "--terminal",
       "expected valid UTF-8 in a string; got byte 0xc3"},
      {"view_nan_literal.export.json", "--terminal", "malformed JSON"},
      {"view_infinity.export.json", "--terminal", "expected a number within the range of a double"},
      {"view_no_attention.export.json", "--terminal", "missing \"attention\""},
      {"view_no_layers.export.json", "--terminal", "\"attention\" has no layers"},
      {"view_tokens_empty.export.json", "--terminal", "\"tokens\" is empty"},
      {"view_tokens_not_strings.export.json", "--terminal", "tokens[0] must be a string; got number"},
      {"view_rows_vs_tokens.export.json", "--terminal", "expected 2 rows (one per query token); got 3"},
      {"view_cols_vs_tokens.export.json", "--terminal", "expected 2 columns (one per key token); got 3"},
      {"view_cross_shape.export.json", "--terminal",
       "expected 2 columns (one per encoder (source) token); got 1"},
      {"view_batch_2.export.json", "--terminal", "expected batch size 1"},
      {"view_no_heads.export.json", "--terminal", "expected a non-empty array of heads"},
      {"view_heads_differ.export.json", "--terminal",
       "attention layer 1 has 2 heads; expected 1 like layer 0"},
      {"view_many_heads_few_bytes.export.json", "--terminal",
       "head 0: expected a [2000, 2000] matrix; got number"},
      {"view_nan_as_null.export.json", "--terminal",
       "expected a number; got null (NaN or infinity written as null?)"},
      {"view_negative_weight.export.json", "--terminal", "weight -0.5 is negative"},
      {"view_row_sum.export.json", "--terminal", "weights sum to 0.7; expected 1 within 0.001"},
      {"view_weight_string.export.json", "--terminal", "expected a number; got string"},
      {"view_mixed_layouts.export.json", "--terminal", "mixes the self-attention layout"},
      {"view_encdec_no_attention.export.json", "--terminal", "encoder-decoder layout without attention"},
      {"view_layer_names_count.export.json", "--terminal", "\"layer_names\" has 2 names; expected 1"},
      {"view_model_not_string.export.json", "--terminal", "\"model\" must be a string; got number"},
      // A valid export with a layer, head or set it does not have.
      {"view_valid.export.json", "--terminal --layer 5", "--layer: expected a layer in 0..0"},
      {"view_valid.export.json", "--terminal --head 3", "--head: expected a head in 0..0"},
      {"view_valid.export.json", "--terminal --set cross_attention", "export has no \"cross_attention\""},
  };
  return files;
}

class ViewBadCorpus : public ::testing::TestWithParam<BadExport> {};

TEST_P(ViewBadCorpus, ClearErrorNoCrash) {
  const BadExport& b = GetParam();
  const std::string path = attn::testing::source_path("tests/io/data/bad/" + b.file);
  const attn::testing::CliRun r = attn::testing::run_attn("view '" + path + "' " + b.args);
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("attn view: error: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(b.expected), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
}

INSTANTIATE_TEST_SUITE_P(Files, ViewBadCorpus, ::testing::ValuesIn(corpus()),
                         [](const ::testing::TestParamInfo<BadExport>& info) {
                           std::string n = info.param.file + "_" + info.param.args;
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
