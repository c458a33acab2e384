// Issue 40: model output is always valid text. append_valid_utf8 / to_valid_utf8 replace each
// maximal subpart of an ill-formed sequence with one U+FFFD (Unicode 15, section 3.9, "U+FFFD
// Substitution of Maximal Subparts"); streamed in pieces, an unfinished character waits for its bytes.
#include <attn/core/random.h>
#include <attn/text/utf8.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace attn::text {
namespace {

const std::string R = "\xEF\xBF\xBD";  // U+FFFD

struct Case {
  const char* what;
  std::string in, out;
};

TEST(ValidUtf8, EachMaximalSubpartBecomesOneReplacement) {
  const std::vector<Case> cases = {
      {"ascii", "abc", "abc"},
      {"valid 2, 3, 4 bytes", "\xC3\xA9\xE4\xBD\xA0\xF0\x9F\x90\xB1", "\xC3\xA9\xE4\xBD\xA0\xF0\x9F\x90\xB1"},
      {"the ends of the ranges", "\xC2\x80\xED\x9F\xBF\xEE\x80\x80\xF4\x8F\xBF\xBF",
       "\xC2\x80\xED\x9F\xBF\xEE\x80\x80\xF4\x8F\xBF\xBF"},
      {"stray continuation bytes",
       "a\x80\xBF"
       "b",
       "a" + R + R + "b"},
      {"bytes that start nothing", "\xC0\xC1\xF5\xF8\xFE\xFF", R + R + R + R + R + R},
      {"overlong 2 bytes (C0 AF = '/')", "\xC0\xAF", R + R},
      {"overlong 3 bytes", "\xE0\x80\xAF", R + R + R},
      {"overlong 4 bytes", "\xF0\x80\x80\xAF", R + R + R + R},
      {"surrogate D800", "\xED\xA0\x80", R + R + R},
      {"surrogate DFFF", "\xED\xBF\xBF", R + R + R},
      {"above U+10FFFF (F4 90)", "\xF4\x90\x80\x80", R + R + R + R},
      {"above U+10FFFF (F5 lead)", "\xF5\x80\x80\x80", R + R + R + R},
      {"3-byte sequence cut by ASCII",
       "\xE4\xBD"
       "A",
       R + "A"},
      {"4-byte sequence cut by ASCII",
       "\xF0\x9F\x90"
       "A",
       R + "A"},
      {"sequence cut by another lead", "\xE4\xBD\xE4\xBD\xA0", R + "\xE4\xBD\xA0"},
      {"truncated at the end", "a\xF0\x9F\x90", "a" + R},
      {"lead alone at the end", "a\xE4", "a" + R},
      // The example of Unicode's Table 3-8.
      {"Table 3-8", "\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64",
       "a" + R + R + R + "b" + R + "c" + R + R + "d"},
  };
  for (const Case& c : cases) {
    const std::string got = to_valid_utf8(c.in);
    EXPECT_EQ(got, c.out) << c.what;
    EXPECT_TRUE(check_utf8(got).ok()) << c.what;
  }
}

TEST(ValidUtf8, AnUnfinishedCharacterWaitsWhenMoreMayCome) {
  std::string out;
  EXPECT_EQ(append_valid_utf8(out, "a\xF0\x9F\x90", false), 1u);
  EXPECT_EQ(out, "a");
  EXPECT_EQ(append_valid_utf8(out, "\xF0\x9F\x90\xB1", false), 4u);
  EXPECT_EQ(out, "a\xF0\x9F\x90\xB1");
  // A prefix that can no longer be valid does not wait: E0 80 is already ill-formed.
  out.clear();
  EXPECT_EQ(append_valid_utf8(out, "\xE0\x80", false), 2u);
  EXPECT_EQ(out, R + R);
  // A lone lead byte at the end waits; at the end of the stream it is replaced.
  out.clear();
  EXPECT_EQ(append_valid_utf8(out, "\xE4", false), 0u);
  EXPECT_EQ(append_valid_utf8(out, "\xE4", true), 1u);
  EXPECT_EQ(out, R);
}

TEST(ValidUtf8, RandomBytesInRandomPiecesGiveTheSameValidText) {
  Rng rng(40);
  // Bytes drawn mostly from the interesting ranges: ASCII, continuation bytes and lead bytes.
  const unsigned char pool[] = {0x41, 0x0A, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC2,
                                0xDF, 0xE0, 0xE4, 0xED, 0xEF, 0xF0, 0xF3, 0xF4, 0xF5, 0xFF};
  for (int trial = 0; trial < 300; ++trial) {
    std::string bytes;
    const auto len = 1 + rng.next() % 24;
    for (std::size_t i = 0; i < len; ++i) bytes += static_cast<char>(pool[rng.next() % sizeof pool]);
    const std::string whole = to_valid_utf8(bytes);
    ASSERT_TRUE(check_utf8(whole).ok());
    // Fed in pieces, keeping what was not consumed for the next call: the same text.
    std::string out, pending;
    std::size_t pos = 0;
    while (pos < bytes.size()) {
      const std::size_t take = 1 + rng.next() % 4;
      pending += bytes.substr(pos, take);
      pos += take;
      const std::size_t used = append_valid_utf8(out, pending, false);
      ASSERT_LE(pending.size() - used, 3u);
      pending.erase(0, used);
    }
    append_valid_utf8(out, pending, true);
    EXPECT_EQ(out, whole) << "trial " << trial;
    // Valid input is kept as it is.
    EXPECT_EQ(to_valid_utf8(whole), whole);
  }
}

}  // namespace
}  // namespace attn::text
