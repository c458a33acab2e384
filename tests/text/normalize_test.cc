// Normalisation: controls dropped, whitespace collapsed and trimmed, optional
// full-width -> ASCII and ASCII lower-casing, idempotent.
#include <attn/core/error.h>
#include <attn/text/normalize.h>
#include <gtest/gtest.h>

#include <string>

namespace attn::text {
namespace {

struct NormCase {
  const char* name;
  std::string in;
  NormalizeOptions options;
  std::string out;
};

class Normalize : public ::testing::TestWithParam<NormCase> {};

TEST_P(Normalize, Case) {
  const NormCase& c = GetParam();
  const std::string got = normalize_utf8(c.in, c.options);
  EXPECT_EQ(got, c.out);
  EXPECT_EQ(normalize_utf8(got, c.options), got) << "not idempotent";
}

NormalizeOptions fw() {
  NormalizeOptions o;
  o.fullwidth_to_ascii = true;
  return o;
}
NormalizeOptions lc() {
  NormalizeOptions o;
  o.lowercase_ascii = true;
  return o;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, Normalize,
    ::testing::Values(
        NormCase{"collapse_and_trim", "  a \t\t b\r\n c  ", {}, "a b c"},
        NormCase{"unicode_spaces",
                 "\xE3\x80\x80\xE5\xA5\xBD\xC2\xA0\xE2\x80\x83\xE7\x9A\x84\xE3\x80\x80",
                 {},
                 "\xE5\xA5\xBD \xE7\x9A\x84"},  // U+3000 好 NBSP EM-SPACE 的 U+3000
        NormCase{"controls_dropped",
                 std::string("a\x01"
                             "b\x7F"
                             "c\xC2\x85"
                             "d\xEF\xBB\xBF"
                             "e\xE2\x80\x8B"
                             "f"),
                 {},
                 "abc d"
                 "ef"},  // U+0085 is whitespace, U+FEFF and U+200B vanish
        NormCase{"fullwidth_kept_by_default",
                 "\xEF\xBC\x8C\xEF\xBC\xA1\xEF\xBC\x91",
                 {},
                 "\xEF\xBC\x8C\xEF\xBC\xA1\xEF\xBC\x91"},
        NormCase{"fullwidth_to_ascii", "\xEF\xBC\x8C\xEF\xBC\xA1\xEF\xBC\x91\xEF\xBD\x9E\xEF\xBC\x81", fw(),
                 ",A1~!"},  // ， Ａ １ ～ ！
        NormCase{"fullwidth_leaves_cjk", "\xE5\xA5\xBD\xEF\xBC\x81\xE3\x80\x82", fw(),
                 "\xE5\xA5\xBD!\xE3\x80\x82"},  // 好！。 -> 好!。 (U+3002 is not in the block)
        NormCase{"lowercase_ascii_only", "Hello \xC3\x89T\xC3\x89", lc(), "hello \xC3\x89t\xC3\x89"},
        NormCase{"only_spaces", " \t\n ", {}, ""}, NormCase{"empty", "", {}, ""}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(NormalizeClasses, CharacterClasses) {
  EXPECT_TRUE(is_cjk_ideograph(U'\u4E2D'));
  EXPECT_TRUE(is_cjk_ideograph(0x20000));
  EXPECT_TRUE(is_cjk_ideograph(0x3400));
  EXPECT_FALSE(is_cjk_ideograph(U'\u3042'));  // hiragana
  EXPECT_FALSE(is_cjk_ideograph(U'\uFF0C'));
  EXPECT_TRUE(is_punctuation(U','));
  EXPECT_TRUE(is_punctuation(U'\u3002'));   // 。
  EXPECT_TRUE(is_punctuation(U'\uFF0C'));   // ，
  EXPECT_TRUE(is_punctuation(U'\u2019'));   // ’
  EXPECT_FALSE(is_punctuation(U'\uFF21'));  // Ａ
  EXPECT_FALSE(is_punctuation(U'a'));
  EXPECT_FALSE(is_punctuation(U' '));
  EXPECT_FALSE(is_punctuation(U'\u2003'));  // em space is whitespace
  EXPECT_TRUE(is_space(U'\u3000'));
  EXPECT_FALSE(is_space(U'\u200B'));
  EXPECT_TRUE(is_dropped_control(U'\u200B'));
}

TEST(NormalizeClasses, InvalidUtf8Throws) { EXPECT_THROW(normalize_utf8("a\xC0\xAF"), Error); }

}  // namespace
}  // namespace attn::text
