// WordPiece tokenizer on a tiny hand-written vocabulary: each step of BERT's
// pipeline, truncation, padding, errors. (Parity with Hugging Face on the real
// all-MiniLM-L6-v2 vocabulary is in tokenizer_parity_test.cc.)
#include <attn/text/wordpiece.h>

#include <functional>

#include "io/io_test_util.h"
#include "testing/testing.h"

namespace attn::text {
namespace {

const std::vector<std::string> kVocab = {
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "un",  "##aff", "##able", ",",   "!",
    "cafe",  "中",    "国",    "a",     "##b",    "##c",   "x",     "##y", "'",     "s",      "ος",  "σ",
    "ο",     "##σ",   "(",     ")",     "ß",      "i",     "-",     "aa",  "##a",   "naive",  "##ο",
};

WordPieceTokenizer tiny(WordPieceOptions o = {}) { return WordPieceTokenizer::from_vocab(kVocab, o); }

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

struct Case {
  const char* name;
  std::string text;
  std::vector<std::string> tokens;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class WordPieceTiny : public ::testing::TestWithParam<Case> {};

TEST_P(WordPieceTiny, Tokens) {
  const Case& c = GetParam();
  EXPECT_EQ(tiny().tokenize(c.text), c.tokens);
}

INSTANTIATE_TEST_SUITE_P(
    Steps, WordPieceTiny,
    ::testing::Values(
        Case{"Empty", "", {}}, Case{"OnlySpaces", " \t\n ", {}},
        Case{"Lowercase", "Hello WORLD", {"hello", "world"}},
        Case{"Punctuation", "hello,world!", {"hello", ",", "world", "!"}},
        Case{"Subwords", "unaffable", {"un", "##aff", "##able"}},
        Case{"NoMatchIsUnk", "unaffablez", {"[UNK]"}}, Case{"GreedyLongest", "aaa", {"aa", "##a"}},
        Case{"AccentsStripped", "Café", {"cafe"}},
        Case{"DecomposedAccents", "cafe\xcc\x81", {"cafe"}},  // e + U+0301
        Case{"Diaeresis", "na\xc3\xafve", {"naive"}},         // ï
        Case{"ChineseSplit", "中国", {"中", "国"}}, Case{"ChineseInsideWord", "a中a", {"a", "中", "a"}},
        Case{"ControlDropped", "hel\x01lo", {"hello"}},
        Case{"FormatDropped", "hel\xc2\xadlo", {"hello"}},  // soft hyphen (Cf)
        Case{"NulAndReplacementDropped", std::string("hel\0lo", 6) + "\xef\xbf\xbd", {"hello"}},
        Case{"UnicodeSpace", "hello\xe3\x80\x80world", {"hello", "world"}},  // U+3000
        Case{"GreekFinalSigmaNotContextual", "ΟΣ", {"ο", "##σ"}}, Case{"SharpS", "ß", {"ß"}},
        Case{"DottedCapitalI", "İ", {"i"}}, Case{"Apostrophe", "a's", {"a", "'", "s"}},
        Case{"SpecialTokensInText", "hello[SEP]world [MASK]", {"hello", "[SEP]", "world", "[MASK]"}},
        Case{"SpecialTokenCaseMatters", "[sep]", {"[UNK]", "[UNK]", "[UNK]"}}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(WordPiece, UnicodePunctuationIsSplitEvenWhenUnknown) {
  // U+2014 is category Pd: split off as its own word, which is not in the vocabulary.
  EXPECT_EQ(tiny().tokenize("a\xe2\x80\x94"
                            "a"),
            (std::vector<std::string>{"a", "[UNK]", "a"}));
  // '(' and ')' are ASCII punctuation.
  EXPECT_EQ(tiny().tokenize("(a)"), (std::vector<std::string>{"(", "a", ")"}));
}

TEST(WordPiece, WordLongerThanLimitIsUnk) {
  WordPieceOptions o;
  o.max_input_chars_per_word = 4;
  EXPECT_EQ(tiny(o).tokenize("aaaa aaaaa"), (std::vector<std::string>{"aa", "##a", "##a", "[UNK]"}));
  // The limit counts code points, not bytes: four 2-byte characters pass, five do not.
  EXPECT_EQ(tiny(o).tokenize("ΟΟΟΟ"), (std::vector<std::string>{"ο", "##ο", "##ο", "##ο"}));
  EXPECT_EQ(tiny(o).tokenize("ΟΟΟΟΟ"), (std::vector<std::string>{"[UNK]"}));
  EXPECT_EQ(tiny().tokenize(std::string(101, 'a')), (std::vector<std::string>{"[UNK]"}));
}

TEST(WordPiece, CasedOptions) {
  WordPieceOptions o;
  o.lowercase = false;
  EXPECT_EQ(tiny(o).tokenize("Hello hello"), (std::vector<std::string>{"[UNK]", "hello"}));
  EXPECT_EQ(tiny(o).tokenize("Café"), (std::vector<std::string>{"[UNK]"}))
      << "cased: accents kept by default";
  o.strip_accents = true;
  EXPECT_EQ(tiny(o).tokenize("café"), (std::vector<std::string>{"cafe"}));
  WordPieceOptions keep;
  keep.strip_accents = false;
  EXPECT_EQ(tiny(keep).tokenize("café"), (std::vector<std::string>{"[UNK]"}));
  WordPieceOptions no_cjk;
  no_cjk.handle_chinese_chars = false;
  EXPECT_EQ(tiny(no_cjk).tokenize("中国"), (std::vector<std::string>{"[UNK]"}));
}

TEST(WordPiece, EncodeAddsSpecialsMaskAndTypes) {
  const Encoding e = tiny().encode("hello world");
  EXPECT_EQ(e.tokens, (std::vector<std::string>{"[CLS]", "hello", "world", "[SEP]"}));
  EXPECT_EQ(e.ids, (std::vector<int32_t>{2, 5, 6, 3}));
  EXPECT_EQ(e.type_ids, (std::vector<int32_t>{0, 0, 0, 0}));
  EXPECT_EQ(e.attention_mask, (std::vector<int32_t>{1, 1, 1, 1}));
  EXPECT_EQ(tiny().encode("", true).ids, (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(tiny().encode("hello", false).ids, (std::vector<int32_t>{5}));
}

TEST(WordPiece, TruncationKeepsTheStart) {
  WordPieceOptions o;
  o.max_length = 5;
  const Encoding e = tiny(o).encode("a a a a a a a");
  EXPECT_EQ(e.tokens, (std::vector<std::string>{"[CLS]", "a", "a", "a", "[SEP]"}));
  EXPECT_EQ(tiny(o).encode("a a a a a a a", true, false).ids.size(), 9u);
  o.max_length = 1;
  EXPECT_NE(error_of([&] { tiny(o).encode("a"); }).find("no room for [CLS] and [SEP]"), std::string::npos);
}

TEST(WordPiece, PairTruncationLongestFirst) {
  WordPieceOptions o;
  o.max_length = 10;  // budget 7 after [CLS], [SEP], [SEP]
  auto count = [&](int na, int nb) {
    std::string a, b;
    for (int i = 0; i < na; ++i) a += "a ";
    for (int i = 0; i < nb; ++i) b += "x ";
    const Encoding e = tiny(o).encode_pair(a, b);
    int ca = 0, cb = 0;
    for (std::size_t i = 0; i < e.ids.size(); ++i) {
      ca += e.tokens[i] == "a";
      cb += e.tokens[i] == "x";
      EXPECT_EQ(e.type_ids[i],
                e.tokens[i] == "x" || (e.tokens[i] == "[SEP]" && i + 1 == e.ids.size()) ? 1 : 0);
    }
    return std::pair{ca, cb};
  };
  // The shorter text keeps min(len, budget / 2); the longer takes the rest; ties favour the second.
  EXPECT_EQ(count(7, 7), (std::pair{3, 4}));
  EXPECT_EQ(count(7, 6), (std::pair{4, 3}));
  EXPECT_EQ(count(6, 7), (std::pair{3, 4}));
  EXPECT_EQ(count(7, 2), (std::pair{5, 2}));
  EXPECT_EQ(count(2, 3), (std::pair{2, 3}));
}

TEST(WordPiece, PadAppendsMaskedPadding) {
  Encoding e = tiny().encode("hello");
  tiny().pad(e, 6);
  EXPECT_EQ(e.ids, (std::vector<int32_t>{2, 5, 3, 0, 0, 0}));
  EXPECT_EQ(e.attention_mask, (std::vector<int32_t>{1, 1, 1, 0, 0, 0}));
  EXPECT_EQ(e.type_ids.size(), 6u);
  tiny().pad(e, 2);
  EXPECT_EQ(e.ids.size(), 6u);
}

TEST(WordPiece, DecodeGluesPiecesAndPunctuation) {
  const WordPieceTokenizer t = tiny();
  EXPECT_EQ(t.decode(t.encode("Hello, unaffable world!").ids), "hello, unaffable world!");
  EXPECT_EQ(t.decode(t.encode("hello").ids, false), "[CLS] hello [SEP]");
}

TEST(WordPiece, Errors) {
  std::string e = error_of([] { WordPieceTokenizer::from_vocab({"a", "b"}); });
  EXPECT_NE(e.find("no unknown token \"[UNK]\""), std::string::npos) << e;
  e = error_of([] { WordPieceTokenizer::from_vocab({}); });
  EXPECT_NE(e.find("empty"), std::string::npos) << e;
  e = error_of([] {
    tiny().tokenize(
        "ab\xff"
        "cd");
  });
  EXPECT_NE(e.find("invalid UTF-8 at byte 2"), std::string::npos) << e;
  e = error_of([] { tiny().tokenize("[CLS]\xe2\x82"); });  // truncated sequence after a special token
  EXPECT_NE(e.find("invalid UTF-8 at byte 5"), std::string::npos) << e;
  e = error_of([] { tiny().id_to_token(1000); });
  EXPECT_NE(e.find("1000"), std::string::npos) << e;
  WordPieceOptions o;
  o.cls_token = "<s>";
  e = error_of([&] { tiny(o).encode("a"); });
  EXPECT_NE(e.find("\"<s>\" is not in the vocabulary"), std::string::npos) << e;
}

TEST(WordPiece, VocabFileAndModelDir) {
  testing::ScratchDir dir;
  std::string text;
  for (const std::string& t : kVocab) text += t + "\r\n";
  testing::write_bytes(dir.file("vocab.txt"), text);
  testing::write_bytes(dir.file("tokenizer_config.json"),
                       R"({"do_lower_case": false, "model_max_length": 7, "tokenize_chinese_chars": true})");
  const WordPieceTokenizer t = WordPieceTokenizer::from_model_dir(dir.path());
  EXPECT_EQ(t.vocab_size(), static_cast<int64_t>(kVocab.size()));
  EXPECT_EQ(t.options().max_length, 7);
  EXPECT_FALSE(t.options().lowercase);
  EXPECT_EQ(t.tokenize("hello Hello"), (std::vector<std::string>{"hello", "[UNK]"}));
  ::unlink(dir.file("tokenizer_config.json").c_str());
  testing::write_bytes(dir.file("config.json"), R"({"max_position_embeddings": 64})");
  EXPECT_EQ(WordPieceTokenizer::from_model_dir(dir.path()).options().max_length, 64);
  ::unlink(dir.file("config.json").c_str());
  testing::write_bytes(dir.file("vocab.txt"), "a\nb\n");
  const std::string e = error_of([&] { WordPieceTokenizer::from_vocab_file(dir.file("vocab.txt")); });
  EXPECT_NE(e.find("no unknown token"), std::string::npos) << e;
  EXPECT_NE(e.find("vocab.txt"), std::string::npos) << e;
  ::unlink(dir.file("vocab.txt").c_str());
}

}  // namespace
}  // namespace attn::text
