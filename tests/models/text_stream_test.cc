// models::TextStream (issue 40): token ids to streamed text that is always valid UTF-8, never splits a
// character, and holds back what could still begin a stop string. Each id here decodes to one byte,
// so a character split over tokens and ill-formed sequences are easy to write.
#include <attn/core/random.h>
#include <attn/models/text_stream.h>
#include <attn/text/utf8.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace attn::models {
namespace {

std::string bytes_of(const std::vector<int32_t>& ids) {
  std::string s;
  for (const int32_t id : ids) s += static_cast<char>(id);
  return s;
}

// Streams `bytes` one byte per token; returns the pieces (the last from finish()).
std::vector<std::string> stream_bytes(const std::string& bytes, std::vector<std::string> stop = {}) {
  TextStream ts(bytes_of, std::move(stop));
  std::vector<std::string> pieces;
  for (const char c : bytes) {
    pieces.push_back(ts.push(static_cast<unsigned char>(c)));
    if (ts.stopped()) return pieces;
  }
  pieces.push_back(ts.finish());
  return pieces;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& p : v) s += p;
  return s;
}

TEST(TextStream, PiecesAreValidAndJoinToTheSanitizedText) {
  const std::string R = "\xEF\xBF\xBD";
  // 猫 split over three tokens, an ill-formed pair (E0 80), a stray continuation byte, and an emoji
  // cut by the end of generation.
  const std::string bytes =
      "a\xE7\x8C\xAB\xE0\x80"
      "b\x80\xF0\x9F\x90";
  const std::vector<std::string> pieces = stream_bytes(bytes);
  for (const std::string& p : pieces) EXPECT_TRUE(text::check_utf8(p).ok()) << p;
  EXPECT_EQ(join(pieces), "a\xE7\x8C\xAB" + R + R + "b" + R + R);
  // The character waits for its last byte: nothing after its first two tokens.
  EXPECT_EQ(pieces[1], "");
  EXPECT_EQ(pieces[2], "");
  EXPECT_EQ(pieces[3], "\xE7\x8C\xAB");
  EXPECT_EQ(pieces.back(), R) << "the cut emoji is U+FFFD at the end, not dropped";
}

TEST(TextStream, RandomBytesStreamAsTheirSanitizedText) {
  Rng rng(12);
  const unsigned char pool[] = {0x61, 0x80, 0xA0, 0xBF, 0xC3, 0xE0, 0xE7, 0xED, 0xF0, 0xF4, 0xFF};
  for (int trial = 0; trial < 200; ++trial) {
    std::string bytes;
    for (std::size_t i = 0, n = 1 + rng.next() % 20; i < n; ++i)
      bytes += static_cast<char>(pool[rng.next() % 11]);
    const std::vector<std::string> pieces = stream_bytes(bytes);
    for (const std::string& p : pieces) ASSERT_TRUE(text::check_utf8(p).ok());
    EXPECT_EQ(join(pieces), text::to_valid_utf8(bytes)) << "trial " << trial;
  }
}

TEST(TextStream, StopStringsEndTheTextAndTheirStartIsHeldBack) {
  const std::vector<std::string> pieces = stream_bytes("one<|two|>three", {"<|two|>", "xyz"});
  EXPECT_EQ(join(pieces), "one");
  // "<" might begin the stop string: held back until the match is certain.
  EXPECT_EQ(pieces[2], "e");
  EXPECT_EQ(pieces[3], "");
  // A near miss is released once it cannot match any more.
  EXPECT_EQ(join(stream_bytes("a<|tw|>b", {"<|two|>"})), "a<|tw|>b");
  // The earliest of two stop strings wins; a stop string across a multi-byte character too.
  EXPECT_EQ(join(stream_bytes("hello world", {"world", "lo"})), "hel");
  EXPECT_EQ(join(stream_bytes("x\xE7\x8C\xAB!", {"\xE7\x8C\xAB"})), "x");
  // A held-back prefix at the end of generation is text.
  EXPECT_EQ(join(stream_bytes("end<|tw", {"<|two|>"})), "end<|tw");
  TextStream ts(bytes_of, {"b"});
  EXPECT_EQ(ts.push('a'), "a");
  EXPECT_EQ(ts.push('b'), "");
  EXPECT_TRUE(ts.stopped());
  EXPECT_EQ(ts.push('c'), "");
  EXPECT_EQ(ts.finish(), "");
  EXPECT_EQ(ts.text(), "a");
}

}  // namespace
}  // namespace attn::models
