// Tests of the report language (attn/teach/lang.h): --lang values and the
// locale default in POSIX order (LC_ALL, LC_MESSAGES, LANG).
#include <attn/core/error.h>
#include <attn/teach/lang.h>
#include <gtest/gtest.h>

namespace {

using attn::teach::Lang;
using attn::teach::lang_from_locale;
using attn::teach::parse_lang;

TEST(Lang, ParsesCodesAndLocaleNames) {
  EXPECT_EQ(parse_lang("zh"), Lang::zh);
  EXPECT_EQ(parse_lang("en"), Lang::en);
  EXPECT_EQ(parse_lang("zh_CN.UTF-8"), Lang::zh);
  EXPECT_EQ(parse_lang("zh-TW"), Lang::zh);
  EXPECT_EQ(parse_lang("ZH"), Lang::zh);
  EXPECT_EQ(parse_lang("en_US.UTF-8"), Lang::en);
}

TEST(Lang, RefusesOtherLanguagesNamingTheValue) {
  for (const char* bad : {"", "fr", "zhx", "chinese", "C"}) {
    try {
      parse_lang(bad);
      FAIL() << "accepted '" << bad << "'";
    } catch (const attn::Error& e) {
      EXPECT_NE(std::string(e.what()).find("expected zh or en"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(std::string("'") + bad + "'"), std::string::npos) << e.what();
    }
  }
}

TEST(Lang, DefaultFollowsTheLocaleInPosixOrder) {
  EXPECT_EQ(lang_from_locale("", "", ""), Lang::en);
  EXPECT_EQ(lang_from_locale("", "", "zh_CN.UTF-8"), Lang::zh);
  EXPECT_EQ(lang_from_locale("", "zh_TW.UTF-8", "en_US.UTF-8"), Lang::zh);
  EXPECT_EQ(lang_from_locale("C.UTF-8", "", "zh_CN.UTF-8"), Lang::en);  // LC_ALL wins
  EXPECT_EQ(lang_from_locale("zh_CN.UTF-8", "en_US", "en_US"), Lang::zh);
  EXPECT_EQ(lang_from_locale("", "", "de_DE.UTF-8"), Lang::en);  // neither: English
  EXPECT_EQ(lang_from_locale("", "", "POSIX"), Lang::en);
}

TEST(Lang, TrPicksTheLanguage) {
  EXPECT_STREQ(attn::teach::tr(Lang::en, "weight", "权重"), "weight");
  EXPECT_STREQ(attn::teach::tr(Lang::zh, "weight", "权重"), "权重");
  EXPECT_STREQ(attn::teach::lang_name(Lang::zh), "zh");
}

}  // namespace
