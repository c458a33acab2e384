// Issue 18, item 11: the reply of generate/chat never ends inside a UTF-8 character when
// max_new_tokens cuts a multi-token character: complete_utf8_prefix drops the partial bytes.
#include <attn/text/utf8.h>
#include <gtest/gtest.h>

#include <string>

namespace attn::text {
namespace {

TEST(CompleteUtf8Prefix, CutsOnlyAnUnfinishedLastCharacter) {
  const std::string zh = "\xe4\xbd\xa0\xe5\xa5\xbd";  // 你好
  const std::string emoji = "\xf0\x9f\x98\x80";       // 😀
  EXPECT_EQ(complete_utf8_prefix(""), 0u);
  EXPECT_EQ(complete_utf8_prefix("abc"), 3u);
  EXPECT_EQ(complete_utf8_prefix(zh), 6u);
  EXPECT_EQ(complete_utf8_prefix(zh.substr(0, 5)), 3u);
  EXPECT_EQ(complete_utf8_prefix(zh.substr(0, 4)), 3u);
  for (std::size_t k = 1; k < 4; ++k)
    EXPECT_EQ(complete_utf8_prefix(std::string("a").append(emoji, 0, k)), 1u)
        << k << " bytes of a 4-byte character";
  EXPECT_EQ(complete_utf8_prefix(std::string("a").append(emoji)), 5u);
  EXPECT_EQ(complete_utf8_prefix("a\xff"), 2u) << "an invalid byte is not a cut character: kept";
}

}  // namespace
}  // namespace attn::text
