// Splitting sentences without spaces (include/attn/text/segment.h): by
// character (CJK characters alone, Latin words and numbers whole, punctuation
// alone), by words of a dictionary (maximum probability over the DAG; checked
// on a small dictionary whose best cut is worked out by hand, and on Debian's
// jieba dictionary against what jieba itself gives, when it is installed).
#include <attn/core/error.h>
#include <attn/text/segment.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace attn::text {
namespace {

using Words = std::vector<std::string>;

TEST(SplitCharacters, CjkByCharacterLatinAndNumbersWholePunctuationAlone) {
  EXPECT_EQ(
      split_characters("小明今天没来学校，因为他生病了"),
      (Words{"小", "明", "今", "天", "没", "来", "学", "校", "，", "因", "为", "他", "生", "病", "了"}));
  EXPECT_EQ(split_characters("我用GPU训练了3.5小时"),
            (Words{"我", "用", "GPU", "训", "练", "了", "3.5", "小", "时"}));
  EXPECT_EQ(split_characters("他说：“don't worry！”"),
            (Words{"他", "说", "：", "“", "don't", "worry", "！", "”"}));
  EXPECT_EQ(split_characters("1,000个token。"), (Words{"1,000", "个", "token", "。"}));
  // Full-width letters and digits make a word; the ideographic space only separates.
  EXPECT_EQ(split_characters("ＧＰＵ　１２"), (Words{"ＧＰＵ", "１２"}));
  // A trailing '.' or ',' is punctuation, not part of the number.
  EXPECT_EQ(split_characters("3."), (Words{"3", "."}));
  EXPECT_TRUE(split_characters("").empty());
  EXPECT_THROW(split_characters("\xE4\xB8"), Error);
}

TEST(SplitCharacters, RecognisesCjk) {
  EXPECT_TRUE(has_cjk("abc中"));
  EXPECT_TRUE(has_cjk("カタカナ"));
  EXPECT_TRUE(has_cjk("한국어"));
  EXPECT_FALSE(has_cjk("the cat, 3.5 ！"));
}

TEST(WordDictionary, TheCutFollowsTheFrequencies) {
  // log P(cut) = Σ log f(word) − k · log(total): the cut with the larger sum wins.
  const WordDictionary a =
      WordDictionary::from_entries({{"研究", 100}, {"研究生", 10}, {"生命", 100}, {"命", 1}, {"起源", 100}});
  EXPECT_EQ(a.cut("研究生命起源"), (Words{"研究", "生命", "起源"}));
  const WordDictionary b = WordDictionary::from_entries(
      {{"研究", 100}, {"研究生", 100000}, {"生命", 1}, {"命", 1}, {"起源", 100}});
  EXPECT_EQ(b.cut("研究生命起源"), (Words{"研究生", "命", "起源"}));
  // Characters in no word stand alone (frequency 1); Latin words and punctuation as by character.
  EXPECT_EQ(a.cut("我研究AI，起源？"), (Words{"我", "研究", "AI", "，", "起源", "？"}));
  EXPECT_EQ(a.frequency(U"研究"), 100);
  EXPECT_EQ(a.frequency(U"研"), 0);  // only a prefix
  EXPECT_EQ(a.size(), 5u);
  EXPECT_THROW(WordDictionary::from_entries({}), Error);
  EXPECT_THROW(WordDictionary::from_entries({{"词", 0}}), Error);
}

std::string temp_file(const std::string& name, const std::string& content) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path, std::ios::binary) << content;
  return path;
}

TEST(WordDictionary, LoadsJiebaFormatAndNamesTheBadLine) {
  const std::string good = temp_file("seg_good.txt", "研究 100 vn\n研究生 10 n\r\n\n生命 100\n起源 100 n\n");
  const WordDictionary d = WordDictionary::load(good);
  EXPECT_EQ(d.size(), 4u);
  EXPECT_EQ(d.cut("研究生命起源"), (Words{"研究", "生命", "起源"}));
  const std::string bad = temp_file("seg_bad.txt", "研究 100 vn\n生命 many n\n");
  try {
    WordDictionary::load(bad);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("many"), std::string::npos) << e.what();
  }
  EXPECT_THROW(WordDictionary::load(temp_file("seg_empty.txt", "\n")), Error);
  EXPECT_THROW(WordDictionary::load(::testing::TempDir() + "no_such_dict.txt"), Error);
  std::remove(good.c_str());
  std::remove(bad.c_str());
}

TEST(SegmentSentence, SpacesWinThenDictionaryThenCharacters) {
  SentenceSplit s = segment_sentence("今天 下雨 ， 我  没 带 伞");
  EXPECT_EQ(s.method, SplitMethod::spaces);
  EXPECT_EQ(s.words, (Words{"今天", "下雨", "，", "我", "没", "带", "伞"}));
  s = segment_sentence("hello");  // no spaces, no CJK: one word
  EXPECT_EQ(s.method, SplitMethod::spaces);
  EXPECT_EQ(s.words, (Words{"hello"}));
  SplitOptions none;
  none.dictionary = "none";
  s = segment_sentence("今天下雨，我没带伞", none);
  EXPECT_EQ(s.method, SplitMethod::characters);
  EXPECT_EQ(s.words, (Words{"今", "天", "下", "雨", "，", "我", "没", "带", "伞"}));
  EXPECT_STREQ(split_method_label(s.method, true), "按字切分");
  EXPECT_STREQ(split_method_label(s.method, false), "split by character");
  SplitOptions mine;
  mine.dictionary = temp_file("seg_mine.txt", "今天 10\n下雨 10\n");
  s = segment_sentence("今天下雨，我没带伞", mine);
  EXPECT_EQ(s.method, SplitMethod::dictionary);
  EXPECT_EQ(s.dictionary, mine.dictionary);
  EXPECT_EQ(s.words, (Words{"今天", "下雨", "，", "我", "没", "带", "伞"}));
  EXPECT_STREQ(split_method_label(s.method, true), "按词切分（jieba 词典）");
  SplitOptions missing;
  missing.dictionary = ::testing::TempDir() + "no_such_dict.txt";
  EXPECT_THROW(segment_sentence("今天下雨", missing), Error);
}

// What jieba 0.42.1 gives with HMM=False (jieba.cut(s, HMM=False)) on its own dictionary.
TEST(SegmentSentence, JiebaDictionaryAgreesWithJieba) {
  const auto path = find_jieba_dictionary();
  if (!path)
    GTEST_SKIP() << "Debian's python3-jieba (its dict.txt) is not installed: apt-get install python3-jieba";
  const SentenceSplit s = segment_sentence("小明今天没来学校，因为他生病了");
  EXPECT_EQ(s.method, SplitMethod::dictionary);
  EXPECT_EQ(s.words, (Words{"小", "明", "今天", "没", "来", "学校", "，", "因为", "他", "生病", "了"}));
  EXPECT_EQ(segment_sentence("今天下雨，我没带伞").words,
            (Words{"今天", "下雨", "，", "我", "没", "带", "伞"}));
  EXPECT_EQ(segment_sentence("自然语言处理是人工智能的一个分支").words,
            (Words{"自然语言", "处理", "是", "人工智能", "的", "一个", "分支"}));
  EXPECT_EQ(segment_sentence("南京市长江大桥").words, (Words{"南京市", "长江大桥"}));
  // Numbers stay whole (jieba would cut 3.5 into 3 . 5).
  EXPECT_EQ(segment_sentence("我用GPU训练了3.5小时的模型").words,
            (Words{"我", "用", "GPU", "训练", "了", "3.5", "小时", "的", "模型"}));
}

}  // namespace
}  // namespace attn::text
