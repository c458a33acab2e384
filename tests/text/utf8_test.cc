// Strict UTF-8: every ill-formed kind is rejected with file, line and byte
// offset; every boundary code point decodes and re-encodes exactly; the
// checker agrees with the JSON reader's independent validator on random bytes.
#include <attn/core/error.h>
#include <attn/io/json.h>
#include <attn/text/utf8.h>
#include <gtest/gtest.h>

#include <random>
#include <string>

namespace attn::text {
namespace {

struct BadCase {
  const char* name;
  std::string bad;  // the ill-formed bytes
  Utf8Problem problem;
  std::size_t length;  // bytes reported as part of the bad sequence
};

class Utf8Invalid : public ::testing::TestWithParam<BadCase> {};

TEST_P(Utf8Invalid, NamesKindFileLineAndByte) {
  const BadCase& c = GetParam();
  // Line 1 is valid ("ok 中\n" = 7 bytes); the bad bytes sit at byte 2 of line 2.
  const std::string prefix = "ok \xE4\xB8\xAD\nab";
  const std::string input = prefix + c.bad + "z";
  const Utf8Check check = check_utf8(input);
  EXPECT_EQ(check.problem, c.problem);
  EXPECT_EQ(check.offset, prefix.size());
  EXPECT_EQ(check.length, c.length);
  try {
    decode_utf8(input, {"reviews.txt", 1, 100});
    FAIL() << "decode_utf8 accepted " << c.name;
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("reviews.txt line 2, byte 2 of the line (byte 109 of the file)"), std::string::npos)
        << msg;
    EXPECT_NE(msg.find(utf8_problem_name(c.problem)), std::string::npos) << msg;
  }
  EXPECT_THROW(require_utf8(input), Error);
}

INSTANTIATE_TEST_SUITE_P(
    Kinds, Utf8Invalid,
    ::testing::Values(BadCase{"lone_continuation_80", "\x80", Utf8Problem::unexpected_continuation, 1},
                      BadCase{"lone_continuation_bf", "\xBF", Utf8Problem::unexpected_continuation, 1},
                      BadCase{"byte_f8", "\xF8\x88\x80\x80\x80", Utf8Problem::invalid_byte, 1},
                      BadCase{"byte_ff", "\xFF", Utf8Problem::invalid_byte, 1},
                      BadCase{"byte_fe", "\xFE", Utf8Problem::invalid_byte, 1},
                      BadCase{"truncated_2_of_3", "\xE4\xB8", Utf8Problem::truncated, 2},
                      BadCase{"truncated_1_of_2", "\xC3", Utf8Problem::truncated, 1},
                      BadCase{"truncated_3_of_4", "\xF0\x9F\x98", Utf8Problem::truncated, 3},
                      BadCase{"truncated_by_ascii",
                              "\xE4"
                              "a",
                              Utf8Problem::truncated, 1},
                      BadCase{"overlong_c0", "\xC0\xAF", Utf8Problem::overlong, 2},
                      BadCase{"overlong_c1", "\xC1\xBF", Utf8Problem::overlong, 2},
                      BadCase{"overlong_3_byte_slash", "\xE0\x80\xAF", Utf8Problem::overlong, 3},
                      BadCase{"overlong_3_byte_7ff", "\xE0\x9F\xBF", Utf8Problem::overlong, 3},
                      BadCase{"overlong_4_byte", "\xF0\x80\x80\xAF", Utf8Problem::overlong, 4},
                      BadCase{"overlong_4_byte_ffff", "\xF0\x8F\xBF\xBF", Utf8Problem::overlong, 4},
                      BadCase{"surrogate_d800", "\xED\xA0\x80", Utf8Problem::surrogate, 3},
                      BadCase{"surrogate_dfff", "\xED\xBF\xBF", Utf8Problem::surrogate, 3},
                      BadCase{"above_10ffff_f4", "\xF4\x90\x80\x80", Utf8Problem::too_large, 4},
                      BadCase{"above_10ffff_f5", "\xF5\x80\x80\x80", Utf8Problem::too_large, 4},
                      BadCase{"above_10ffff_f7", "\xF7\xBF\xBF\xBF", Utf8Problem::too_large, 4}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(Utf8, TruncatedAtEndOfInputSaysSo) {
  try {
    decode_utf8("abc\xE4\xB8", {"f.txt"});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("at the end of the input"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("line 1, byte 3"), std::string::npos) << e.what();
  }
}

struct GoodCase {
  std::string bytes;
  char32_t cp;
};

class Utf8Valid : public ::testing::TestWithParam<GoodCase> {};

TEST_P(Utf8Valid, BoundaryCodePointsRoundTrip) {
  const GoodCase& c = GetParam();
  EXPECT_TRUE(check_utf8(c.bytes).ok());
  const std::u32string cps = decode_utf8(c.bytes);
  ASSERT_EQ(cps.size(), 1u);
  EXPECT_EQ(static_cast<uint32_t>(cps[0]), static_cast<uint32_t>(c.cp));
  EXPECT_EQ(encode_utf8(cps), c.bytes);
}

INSTANTIATE_TEST_SUITE_P(Boundaries, Utf8Valid,
                         ::testing::Values(GoodCase{std::string(1, '\0'), 0x0}, GoodCase{"\x7F", 0x7F},
                                           GoodCase{"\xC2\x80", 0x80}, GoodCase{"\xDF\xBF", 0x7FF},
                                           GoodCase{"\xE0\xA0\x80", 0x800}, GoodCase{"\xED\x9F\xBF", 0xD7FF},
                                           GoodCase{"\xEE\x80\x80", 0xE000}, GoodCase{"\xEF\xBF\xBF", 0xFFFF},
                                           GoodCase{"\xF0\x90\x80\x80", 0x10000},
                                           GoodCase{"\xF4\x8F\xBF\xBF", 0x10FFFF},
                                           GoodCase{"\xE4\xB8\xAD", 0x4E2D}));

TEST(Utf8, EncodeRejectsNonScalarValues) {
  std::string out;
  EXPECT_THROW(append_utf8(out, 0xD800), Error);
  EXPECT_THROW(append_utf8(out, 0xDFFF), Error);
  EXPECT_THROW(append_utf8(out, 0x110000), Error);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(code_point_name(0x4E2D), "U+4E2D");
}

TEST(Utf8, Bom) {
  EXPECT_TRUE(starts_with_bom("\xEF\xBB\xBFHi"));
  EXPECT_EQ(strip_bom("\xEF\xBB\xBFHi"), "Hi");
  EXPECT_EQ(strip_bom("Hi"), "Hi");
  EXPECT_EQ(strip_bom("\xEF\xBB"), "\xEF\xBB");  // only a whole BOM is stripped
  EXPECT_EQ(strip_bom("x\xEF\xBB\xBF"), "x\xEF\xBB\xBF");
}

// check_utf8 and json::find_invalid_utf8 are written independently; on random
// byte strings (biased towards lead and continuation bytes) they must agree on
// validity and on the offset of the first bad byte.
TEST(Utf8, AgreesWithJsonValidatorOnRandomBytes) {
  std::mt19937_64 rng(12345);
  const unsigned char pool[] = {'a',  0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC2,
                                0xDF, 0xE0, 0xE4, 0xED, 0xEF, 0xF0, 0xF4, 0xF5, 0xF8, 0xFF};
  int valid = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    std::string s(rng() % 8, ' ');
    for (char& c : s) c = static_cast<char>(pool[rng() % sizeof pool]);
    const Utf8Check c = check_utf8(s);
    const std::size_t j = json::find_invalid_utf8(s);
    ASSERT_EQ(c.ok(), j == std::string::npos) << "trial " << trial;
    if (!c.ok()) {
      ASSERT_EQ(c.offset, j) << "trial " << trial;
    }
    valid += c.ok();
  }
  EXPECT_GT(valid, 1000);  // both outcomes are exercised
  EXPECT_LT(valid, 19000);
}

}  // namespace
}  // namespace attn::text
