// Display width and padding of mixed-script text (attn/text/width.h): the
// terminal columns the explain and quiz tables align by.
#include <attn/text/width.h>
#include <gtest/gtest.h>

namespace {

using attn::text::display_width;

struct WidthCase {
  const char* text;
  int width;
};

class DisplayWidthTest : public ::testing::TestWithParam<WidthCase> {};

TEST_P(DisplayWidthTest, CountsTerminalColumns) {
  EXPECT_EQ(display_width(GetParam().text), GetParam().width) << "'" << GetParam().text << "'";
}

INSTANTIATE_TEST_SUITE_P(MixedScripts, DisplayWidthTest,
                         ::testing::Values(WidthCase{"", 0}, WidthCase{"abc", 3}, WidthCase{"今天", 4},
                                           WidthCase{"，", 2}, WidthCase{"今天 下雨 ， 我", 15},
                                           WidthCase{"a今b", 4}, WidthCase{"ＡＢＣ", 6},  // fullwidth Latin
                                           WidthCase{"１２3", 5},      // fullwidth digits + ASCII
                                           WidthCase{"ｶﾀｶﾅ", 4},       // halfwidth katakana: narrow
                                           WidthCase{"カタカナ", 8},   // katakana: wide
                                           WidthCase{"한국어", 6},     // Hangul syllables
                                           WidthCase{"e\xcc\x81", 1},  // e + combining acute
                                           WidthCase{"a\xe2\x80\x8b"
                                                     "b",
                                                     2},             // zero-width space
                                           WidthCase{"q·k √ ×", 7},  // ambiguous: narrow
                                           WidthCase{"█ █", 3}, WidthCase{"\xf0\x9f\x98\x80", 2},  // emoji
                                           WidthCase{"\xf0\xa0\x80\x80", 2},  // CJK extension B (plane 2)
                                           WidthCase{"\xff"
                                                     "a",
                                                     2},                 // invalid byte counts 1
                                           WidthCase{"\xe4\xbb", 2},     // truncated sequence: 1 per byte
                                           WidthCase{"\xc0\xaf", 2},     // overlong encoding: invalid
                                           WidthCase{"tab\there", 7}));  // control characters count 0

TEST(DisplayWidth, PadAlignsMixedText) {
  using attn::text::Align;
  using attn::text::pad;
  EXPECT_EQ(pad("今天", 6), "今天  ");
  EXPECT_EQ(pad("今天", 6, Align::right), "  今天");
  EXPECT_EQ(pad("ab", 5, Align::center), " ab  ");
  EXPECT_EQ(pad("今天下雨", 3), "今天下雨");  // never truncates
  for (const char* s : {"a", "今", "ＡＢ", "x今y", "伞"}) EXPECT_EQ(display_width(pad(s, 9)), 9) << s;
}

}  // namespace
