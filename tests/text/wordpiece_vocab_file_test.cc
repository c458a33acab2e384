// Issue 18, item 11: a vocab.txt with a duplicate token, an invalid UTF-8 line or a NUL byte is an
// error naming the line (ids are line numbers, so any of them would shift or shadow ids silently).
#include <attn/core/error.h>
#include <attn/text/wordpiece.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "testing/testing.h"

namespace attn::text {
namespace {

std::string write_vocab(const std::string& name, const std::string& bytes) {
  const std::string p = (std::filesystem::temp_directory_path() / ("attn_vocab_" + name + ".txt")).string();
  std::ofstream(p, std::ios::binary) << bytes;
  return p;
}

const std::string kGood = "[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n##s\n";

TEST(WordPieceVocabFile, GoodFileLoads) {
  const std::string p = write_vocab("good", kGood);
  EXPECT_EQ(WordPieceTokenizer::from_vocab_file(p).vocab_size(), 6);
  std::filesystem::remove(p);
}

TEST(WordPieceVocabFile, DuplicateTokenNamesBothLines) {
  const std::string p = write_vocab("dup", kGood + "world\nhello\n");
  EXPECT_ERROR_CONTAINS(WordPieceTokenizer::from_vocab_file(p), {"line 8", "\"hello\"", "line 5"});
  std::filesystem::remove(p);
}

TEST(WordPieceVocabFile, InvalidUtf8NamesTheLine) {
  const std::string p = write_vocab("utf8", kGood + "ok\nbad\xff\n");
  EXPECT_ERROR_CONTAINS(WordPieceTokenizer::from_vocab_file(p), {"line 8"});
  std::filesystem::remove(p);
}

TEST(WordPieceVocabFile, NulByteNamesTheLine) {
  const std::string p = write_vocab("nul", kGood + std::string("a\0b\n", 4));
  EXPECT_ERROR_CONTAINS(WordPieceTokenizer::from_vocab_file(p), {"line 7", "NUL"});
  std::filesystem::remove(p);
}

}  // namespace
}  // namespace attn::text
