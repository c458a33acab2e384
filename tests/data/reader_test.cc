// Readers on crafted files: plain text with per-file labels, TSV, CSV (RFC
// 4180 quoting), JSONL; every error names the file and line; truncation and
// blank lines are counted; deduplication.
#include <attn/core/error.h>
#include <attn/data/reader.h>
#include <gtest/gtest.h>

#include "text/text_test_util.h"

namespace attn::data {
namespace {

using testing::TempDir;

// Runs `fn`, expecting an attn::Error whose message contains every part.
template <typename Fn>
void expect_error(Fn&& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected one mentioning '" << parts.front() << "'";
  } catch (const Error& e) {
    for (const std::string& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

TEST(ReadText, LabelsPerFileBomCrlfAndBlankLines) {
  TempDir dir;
  const std::string pos =
      dir.file("pos.txt", "\xEF\xBB\xBFgood  one\r\n\n   \nfine\xE3\x80\x80\xE5\xA5\xBD\n");
  const std::string neg = dir.file("neg.txt", "bad\nworse");  // no final newline
  const Dataset ds = read_text_files({{neg, 0, "neg"}, {pos, 1, "pos"}});
  ASSERT_EQ(ds.size(), 4);
  EXPECT_EQ(ds.label_names, (std::vector<std::string>{"neg", "pos"}));
  EXPECT_EQ(ds.examples[0].text, "bad");
  EXPECT_EQ(ds.examples[1].text, "worse");
  EXPECT_EQ(ds.examples[1].line, 2);
  EXPECT_EQ(ds.examples[2].text, "good one");  // BOM stripped, CRLF, spaces collapsed
  EXPECT_EQ(ds.examples[2].label, 1);
  EXPECT_EQ(ds.examples[2].file, 1);
  EXPECT_EQ(ds.examples[3].text, "fine \xE5\xA5\xBD");  // U+3000 is a space
  EXPECT_EQ(ds.examples[3].line, 4);
  EXPECT_EQ(ds.report.empty_skipped, 2);
  EXPECT_EQ(ds.report.records, 4);
  EXPECT_EQ(ds.class_counts(), (std::vector<int64_t>{2, 2}));
}

TEST(ReadText, Errors) {
  TempDir dir;
  const std::string empty = dir.file("empty.txt", "");
  const std::string bom_only = dir.file("bom.txt", "\xEF\xBB\xBF");
  const std::string blank = dir.file("blank.txt", "\n  \n");
  const std::string bad = dir.file("bad.txt", "fine\nstill fine\nab\xED\xA0\x80z\n");
  expect_error([&] { read_text_files({{empty, 0}}); }, {"empty.txt", "is empty"});
  expect_error([&] { read_text_files({{bom_only, 0}}); }, {"bom.txt", "only a BOM"});
  expect_error([&] { read_text_files({{blank, 0}}); }, {"blank.txt", "no examples"});
  expect_error([&] { read_text_files({{dir.path("missing.txt"), 0}}); }, {"missing.txt", "cannot open"});
  expect_error(
      [&] {
        read_text_files({{bad, 0}});
      },
      {"bad.txt line 3, byte 2 of the line (byte 18 of the file)", "surrogate"});
  // A BOM shifts the file offset but not the line offset.
  const std::string bad_bom = dir.file("bad_bom.txt", "\xEF\xBB\xBFok\n\xC0\xAF\n");
  expect_error([&] { read_text_files({{bad_bom, 0}}); }, {"line 2, byte 0 of the line (byte 6 of the file)"});
  expect_error([&] { read_text_files({{bad, 0}, {bad, -1}}); }, {"label every file"});
  ReadOptions strict;
  strict.skip_empty = false;
  const std::string gap = dir.file("gap.txt", "a\n\nb\n");
  expect_error([&] { read_text_files({{gap, 0}}, strict); }, {"gap.txt' line 2", "empty text"});
}

TEST(ReadText, LongLinesAreTruncatedAndCounted) {
  TempDir dir;
  const std::string f = dir.file("long.txt",
                                 "short\n\xE5\xA5\xBD\xE5\xA5\xBD\xE5\xA5\xBD\xE5\xA5\xBD\xE5\xA5\xBD\n"
                                 "abcdefgh\nabcd\n");
  ReadOptions o;
  o.max_chars = 4;
  const Dataset ds = read_text_files({{f, -1}}, o);
  ASSERT_EQ(ds.size(), 4);
  EXPECT_EQ(ds.examples[0].text, "shor");
  EXPECT_EQ(ds.examples[1].text,
            "\xE5\xA5\xBD\xE5\xA5\xBD\xE5\xA5\xBD\xE5\xA5\xBD");  // 4 code points, not bytes
  EXPECT_EQ(ds.examples[2].text, "abcd");
  EXPECT_EQ(ds.examples[3].text, "abcd");  // exactly the limit: not cut
  EXPECT_EQ(ds.report.truncated, 3);
  EXPECT_NE(ds.report.first_truncated.find("line 1"), std::string::npos);
  EXPECT_NE(ds.report.describe().find("3 truncated"), std::string::npos);
  EXPECT_TRUE(ds.label_names.empty());
  EXPECT_EQ(ds.examples[0].label, -1);
}

TEST(ReadTable, TsvWithHeader) {
  TempDir dir;
  const std::string f =
      dir.file("a.tsv", "id\ttext\tlabel\n1\tgreat  book\tpos\n2\t\"quoted\" stays\tneg\n\n3\tmeh\tpos\n");
  TableSpec spec;
  spec.format = TableFormat::tsv;
  spec.text_column = "text";
  spec.label_column = "label";
  const Dataset ds = read_table(f, spec);
  ASSERT_EQ(ds.size(), 3);
  EXPECT_EQ(ds.label_names, (std::vector<std::string>{"neg", "pos"}));  // discovered, sorted
  EXPECT_EQ(ds.examples[0].text, "great book");
  EXPECT_EQ(ds.examples[0].label, 1);
  EXPECT_EQ(ds.examples[1].text, "\"quoted\" stays");  // TSV has no quoting
  EXPECT_EQ(ds.examples[1].label, 0);
  EXPECT_EQ(ds.examples[2].line, 5);
  EXPECT_EQ(ds.report.empty_skipped, 1);
}

TEST(ReadTable, TsvPairsWithoutHeaderAndBom) {
  TempDir dir;
  // Like tatoeba-cmn: BOM, English \t Chinese \t attribution.
  const std::string f = dir.file(
      "cmn.txt", "\xEF\xBB\xBFHi.\t\xE5\x97\xA8\xE3\x80\x82\tCC-BY 2.0 #1\nRun.\t\xE8\xB7\x91\tCC-BY #2\n");
  TableSpec spec;
  spec.header = false;
  spec.text_column = "0";
  spec.pair_column = "1";
  const Dataset ds = read_table(f, spec);
  ASSERT_EQ(ds.size(), 2);
  EXPECT_EQ(ds.examples[0].text, "Hi.");
  EXPECT_EQ(ds.examples[0].pair, "\xE5\x97\xA8\xE3\x80\x82");
  EXPECT_EQ(ds.examples[1].pair, "\xE8\xB7\x91");
  spec.text_column = "3";
  expect_error([&] { read_table(f, spec); }, {"column 3 does not exist", "3 fields"});
  spec.text_column = "text";
  expect_error([&] { read_table(f, spec); }, {"without a header, columns are 0-based indices"});
}

TEST(ReadTable, CsvQuoting) {
  TempDir dir;
  const std::string f = dir.file("a.csv",
                                 "label,review\r\n"
                                 "pos,\"Good, really \"\"good\"\"\"\r\n"
                                 "neg,\"two\r\nlines\"\r\n"
                                 "pos,plain\r\n"
                                 "neg,\"\"\r\n"
                                 "pos,last");
  TableSpec spec;
  spec.format = TableFormat::csv;
  spec.text_column = "review";
  spec.label_column = "label";
  spec.labels = {"neg", "pos"};
  const Dataset ds = read_table(f, spec);
  ASSERT_EQ(ds.size(), 4);
  EXPECT_EQ(ds.examples[0].text, "Good, really \"good\"");
  EXPECT_EQ(ds.examples[0].label, 1);
  EXPECT_EQ(ds.examples[1].text, "two lines");  // the line break inside quotes is whitespace
  EXPECT_EQ(ds.examples[1].line, 3);
  EXPECT_EQ(ds.examples[2].text, "plain");
  EXPECT_EQ(ds.examples[2].line, 5);
  EXPECT_EQ(ds.examples[3].text, "last");
  EXPECT_EQ(ds.examples[3].line, 7);
  EXPECT_EQ(ds.report.empty_skipped, 1);  // the quoted empty review
}

struct BadTable {
  const char* name;
  TableFormat format;
  std::string bytes;
  std::vector<std::string> message;
};

class ReadTableErrors : public ::testing::TestWithParam<BadTable> {};

TEST_P(ReadTableErrors, NameFileAndLine) {
  TempDir dir;
  const BadTable& c = GetParam();
  const std::string f = dir.file("t.dat", c.bytes);
  TableSpec spec;
  spec.format = c.format;
  spec.text_column = "text";
  spec.label_column = "label";
  spec.max_classes = 2;
  expect_error([&] { read_table(f, spec); }, c.message);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ReadTableErrors,
    ::testing::Values(
        BadTable{"csv_third_label",
                 TableFormat::csv,
                 "text,label\na,pos\nb,neg\nc,neutral\n",
                 {"t.dat' line 4", "'neutral'", "class number 3", "allows 2"}},
        BadTable{"tsv_third_label",
                 TableFormat::tsv,
                 "text\tlabel\na\tpos\nb\tneg\nc\tpos\nd\tmixed\n",
                 {"line 5", "'mixed'"}},
        BadTable{"jsonl_third_label",
                 TableFormat::jsonl,
                 "{\"text\": \"a\", \"label\": 1}\n{\"text\": \"b\", \"label\": 0}\n{\"text\": \"c\", "
                 "\"label\": 2}\n",
                 {"line 3", "'2'"}},
        BadTable{"csv_missing_column",
                 TableFormat::csv,
                 "review,label\na,pos\n",
                 {"no column 'text'", "review, label"}},
        BadTable{"csv_field_count",
                 TableFormat::csv,
                 "text,label\na,pos\nb,neg,extra\n",
                 {"line 3", "expected 2 comma-separated fields", "got 3"}},
        BadTable{
            "tsv_field_count", TableFormat::tsv, "text\tlabel\na\n", {"line 2", "expected 2 tab-separated"}},
        BadTable{"csv_quote_in_unquoted",
                 TableFormat::csv,
                 "text,label\nsay \"hi\",pos\n",
                 {"line 2", "quote inside an unquoted field"}},
        BadTable{"csv_after_closing_quote",
                 TableFormat::csv,
                 "text,label\n\"hi\"x,pos\n",
                 {"line 2", "after a closing quote"}},
        BadTable{"csv_unterminated",
                 TableFormat::csv,
                 "text,label\na,pos\n\"open,pos\nmore\n",
                 {"line 3", "not closed"}},
        BadTable{"jsonl_missing_member",
                 TableFormat::jsonl,
                 "{\"text\": \"a\", \"label\": \"x\"}\n{\"label\": \"y\"}\n",
                 {"line 2", "no member 'text'"}},
        BadTable{"jsonl_not_object", TableFormat::jsonl, "[1, 2]\n", {"line 1", "expected a JSON object"}},
        BadTable{"jsonl_bad_json",
                 TableFormat::jsonl,
                 "{\"text\": \"a\", \"label\": \"x\"}\n{\"text\": \"a\",}\n",
                 {"line 2", "json: at byte"}},
        BadTable{"jsonl_text_not_string",
                 TableFormat::jsonl,
                 "{\"text\": 5, \"label\": \"x\"}\n",
                 {"line 1", "must be a string"}},
        BadTable{"jsonl_label_array",
                 TableFormat::jsonl,
                 "{\"text\": \"a\", \"label\": [1]}\n",
                 {"line 1", "string, an integer or a boolean"}},
        BadTable{"empty_file", TableFormat::csv, "", {"t.dat", "is empty"}},
        BadTable{"header_only", TableFormat::csv, "text,label\n", {"no examples"}},
        BadTable{"blank_only", TableFormat::jsonl, "\n\n", {"no examples"}},
        BadTable{"invalid_utf8",
                 TableFormat::csv,
                 "text,label\n\"a\xF5\x80\x80\x80\",pos\n",
                 {"t.dat line 2, byte 2", "above U+10FFFF"}}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(ReadTable, FixedLabelsRejectUnknown) {
  TempDir dir;
  const std::string f = dir.file("a.csv", "text,label\na,pos\nb,Pos\n");
  TableSpec spec;
  spec.format = TableFormat::csv;
  spec.text_column = "text";
  spec.label_column = "label";
  spec.labels = {"neg", "pos"};
  expect_error([&] { read_table(f, spec); }, {"line 3", "'Pos' is not one of the 2 labels ['neg', 'pos']"});
}

TEST(ReadTable, JsonlLabelsAndPairs) {
  TempDir dir;
  const std::string f =
      dir.file("a.jsonl",
               "{\"src\": \"Hi.\", \"tgt\": \"\\u55e8\", \"y\": true}\n"
               "\n"
               "{\"y\": false, \"tgt\": \"\xE8\xB7\x91\", \"src\": \"Run.\", \"extra\": [1]}\n");
  TableSpec spec;
  spec.format = TableFormat::jsonl;
  spec.text_column = "src";
  spec.pair_column = "tgt";
  spec.label_column = "y";
  const Dataset ds = read_table(f, spec);
  ASSERT_EQ(ds.size(), 2);
  EXPECT_EQ(ds.label_names, (std::vector<std::string>{"false", "true"}));
  EXPECT_EQ(ds.examples[0].pair, "\xE5\x97\xA8");
  EXPECT_EQ(ds.examples[0].label, 1);
  EXPECT_EQ(ds.examples[1].text, "Run.");
  EXPECT_EQ(ds.examples[1].line, 3);
  EXPECT_EQ(ds.examples[1].label, 0);
}

TEST(Deduplicate, KeepsFirstAndDropsConflicts) {
  TempDir dir;
  const std::string pos = dir.file("pos.txt", "a\nb\na\nc\nb\n");
  const std::string neg = dir.file("neg.txt", "d\nc\nd\n");
  const Dataset ds = read_text_files({{neg, 0}, {pos, 1}});
  DedupReport rep;
  const Dataset out = deduplicate(ds, &rep);
  // neg: d, c, d; pos: a, b, a, c, b. "c" has both labels -> all copies go.
  std::vector<std::string> texts = out.texts();
  EXPECT_EQ(texts, (std::vector<std::string>{"d", "a", "b"}));
  EXPECT_EQ(out.labels(), (std::vector<int32_t>{0, 1, 1}));
  EXPECT_EQ(rep.duplicates_removed, 3);  // d, a, b
  EXPECT_EQ(rep.conflicting_texts, 1);
  EXPECT_EQ(rep.conflicting_removed, 2);
  EXPECT_EQ(out.label_names, ds.label_names);
}

TEST(ReadRealData, ReviewsAndTatoebaCounts) {
  ATTN_REQUIRE_REAL_DATA("reviews-zh/pos.txt");
  ATTN_REQUIRE_REAL_DATA("tatoeba-cmn/cmn.txt");
  const Dataset reviews = read_text_files({{testing::real_data_path("reviews-zh/neg.txt"), 0, "neg"},
                                           {testing::real_data_path("reviews-zh/pos.txt"), 1, "pos"}});
  // The README counts lines; the reader skips the blank ones (and reports them).
  EXPECT_EQ(reviews.size() + reviews.report.empty_skipped, 16548 + 18576);
  EXPECT_EQ(reviews.report.truncated, 0);
  DedupReport rep;
  const Dataset unique = deduplicate(reviews, &rep);
  std::printf("reviews: %s; dedup: %s; %lld unique (neg %lld, pos %lld)\n", reviews.report.describe().c_str(),
              rep.describe().c_str(), static_cast<long long>(unique.size()),
              static_cast<long long>(unique.class_counts()[0]),
              static_cast<long long>(unique.class_counts()[1]));
  EXPECT_GT(rep.duplicates_removed, 0);
  TableSpec spec;
  spec.header = false;
  spec.text_column = "0";
  spec.pair_column = "1";
  const Dataset cmn = read_table(testing::real_data_path("tatoeba-cmn/cmn.txt"), spec);
  // 29,156 lines, the last one blank.
  EXPECT_EQ(cmn.size(), 29155);
  EXPECT_EQ(cmn.report.empty_skipped, 1);
  EXPECT_EQ(cmn.examples[0].text, "Hi.");  // the BOM is gone
}

}  // namespace
}  // namespace attn::data
