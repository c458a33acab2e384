// The regression corpus of bad text-side files in tests/text/data/bad/
// (python/reference/make_bad_files.py; fuzzer crash inputs kept as crash_*):
//   wp_*.vocab.txt   WordPieceTokenizer::from_vocab_file (e.g. no [UNK])
//   vocab_*.vocab    Vocab::load
//   bpe_*.bpe        BpeTokenizer::load
//   utf8_*.text      text input: WordPiece and byte-level BPE must both reject it
//   tokjson_*.json   text::load_tokenizer (a decoder's tokenizer.json)
// Each must throw attn::Error with the expected fragment; never crash (this
// suite also runs under the asan preset).
#include "testing/bad_corpus.h"

#include <attn/text/bpe.h>
#include <attn/text/bpe_bytes.h>
#include <attn/text/decoder_tokenizer.h>
#include <attn/text/utf8.h>
#include <attn/text/vocab.h>
#include <attn/text/wordpiece.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "testing/testing.h"

namespace attn::text {
namespace {

using testing::BadFile;

bool ends_with(const std::string& s, const std::string& e) {
  return s.size() >= e.size() && s.compare(s.size() - e.size(), e.size(), e) == 0;
}

std::string bad_dir() { return testing::source_path("tests/text/data/bad"); }

const std::vector<BadFile>& corpus() {
  static const std::vector<BadFile> files = {
      // ---- WordPiece vocab.txt
      {"wp_no_unk.vocab.txt", {"has no unknown token \"[UNK]\"", "wp_no_unk.vocab.txt"}},
      {"wp_unk_lowercase.vocab.txt", {"has no unknown token \"[UNK]\""}},
      {"wp_empty.vocab.txt", {"wordpiece: the vocabulary is empty", "wp_empty.vocab.txt"}},
      // ---- attn Vocab files
      {"vocab_empty.vocab", {"is empty; a vocabulary file has one token per line"}},
      {"vocab_missing_specials.vocab", {"line 1: expected the special token '[PAD]'", "got 'hello'"}},
      {"vocab_specials_out_of_order.vocab", {"line 1: expected the special token '[PAD]'", "got '[UNK]'"}},
      {"vocab_only_specials.vocab", {"empty vocabulary", "holds only 6 lines"}},
      {"vocab_duplicate.vocab", {"line 9: token 'hello' duplicates line 7"}},
      {"vocab_crlf.vocab", {"line 1: Windows line ending"}},
      {"vocab_no_final_newline.vocab", {"the last line has no '\\n' (file truncated?)"}},
      {"vocab_empty_line.vocab", {"line 8: empty token"}},
      {"vocab_invalid_utf8.vocab", {"line 7, byte 3 of the line", "truncated sequence (bytes e4 b8)"}},
      // ---- attn BPE files
      {"bpe_empty.bpe", {"bpe_empty.bpe' is empty"}},
      {"bpe_bad_header.bpe", {"line 1: expected the header 'attn-bpe 1'; got 'attn-bpe 2'"}},
      {"bpe_bad_lowercase.bpe", {"line 2: expected 'lowercase 0' or 'lowercase 1'; got 'lowercase yes'"}},
      {"bpe_count_not_number.bpe", {"line 3: expected a count after 'alphabet'; got 'three'"}},
      {"bpe_count_absurd.bpe", {"line 7: expected one non-space character of the alphabet; got 'merges 2'"}},
      {"bpe_count_too_long.bpe", {"expected a count after 'merges'; got '99999999999999999999'"}},
      {"bpe_alphabet_zero.bpe", {"line 3: empty vocabulary (alphabet 0)"}},
      {"bpe_alphabet_two_chars.bpe", {"line 5: expected one non-space character of the alphabet; got 'bc'"}},
      {"bpe_merge_unknown_symbol.bpe", {"merge #1 ('a' 'z') uses a symbol that neither the alphabet"}},
      {"bpe_merge_no_space.bpe", {"line 8: expected '<left> <right>'", "got 'ab'"}},
      {"bpe_trailing_content.bpe", {"line 10: unexpected content after the 2 merges"}},
      {"bpe_no_final_newline.bpe", {"line 9: the last line has no '\\n' (file truncated?)"}},
      {"bpe_invalid_utf8.bpe", {"line 5, byte 0 of the line", "invalid byte"}},
      {"bpe_trunc_after_header.bpe", {"ends after line 1; expected 'lowercase 0|1'"}},
      {"bpe_trunc_in_alphabet.bpe", {"line 3: the last line has no '\\n'"}},
      {"bpe_trunc_in_merges.bpe", {"line 9: the last line has no '\\n'"}},
      // ---- tokenizer.json of a decoder: each refusal names the field and what is supported
      {"tokjson_wordlevel.json",
       {"model type \"WordLevel\" is not supported for a decoder", "supported: \"BPE\""}},
      {"tokjson_no_model.json", {"no model.type for a decoder"}},
      {"tokjson_split_unknown_pattern.json",
       {"pre_tokenizer Split pattern", "the GPT-2, Llama 3 and Qwen2 patterns"}},
      {"tokjson_pre_whitespace.json",
       {"pre_tokenizer \"Whitespace\" is not supported", "supported: ByteLevel"}},
      {"tokjson_normalizer_nfkc.json", {"normalizer \"NFKC\" is not supported", "supported: NFC"}},
      {"tokjson_merge_numbers.json", {"model merges[0]: expected \"a b\" or [\"a\", \"b\"]; got [1,2]"}},
      {"tokjson_vocab_gap.json", {"model vocab \"b\": expected an id in [0, 3) (ids 0..n-1); got 3"}},
      {"tokjson_added_conflict.json",
       {"added_tokens: \"<pad>\" has id 0, which the vocabulary gives to \"<s>\""}},
      {"tokjson_dropout.json", {"model dropout 0.1 is not supported"}},
      {"tokjson_template_eos.json",
       {"post_processor TemplateProcessing single: only \"$A\" and \"<bos> $A\""}},
      {"tokjson_roberta_processing.json", {"post_processor \"RobertaProcessing\" is not supported"}},
      {"tokjson_decoder_wordpiece.json", {"decoder \"WordPiece\" is not supported"}},
      {"tokjson_truncated.json", {"tokjson_truncated.json: json: at byte 120"}},
      // ---- text inputs (ill-formed UTF-8): the byte offset of the first bad byte
      {"utf8_overlong.text", {"invalid UTF-8 at byte 6 (byte 0xc0)"}},
      {"utf8_surrogate.text", {"invalid UTF-8 at byte 4 (byte 0xed)"}},
      {"utf8_truncated.text", {"invalid UTF-8 at byte 3 (byte 0xe6)"}},
      {"utf8_above_max.text", {"invalid UTF-8 at byte 1 (byte 0xf4)"}},
      {"utf8_invalid_byte.text", {"invalid UTF-8 at byte 0 (byte 0xff)"}},
      {"utf8_lone_continuation.text", {"invalid UTF-8 at byte 1 (byte 0x80)"}},
  };
  return files;
}

// Tokenizers for the .text inputs: tiny, but complete enough to tokenize anything valid.
const WordPieceTokenizer& wordpiece() {
  static const WordPieceTokenizer t = WordPieceTokenizer::from_vocab({"[UNK]", "[CLS]", "[SEP]", "a"});
  return t;
}
const ByteBpeTokenizer& byte_bpe() {
  static const ByteBpeTokenizer t = [] {
    ByteBpeVocab v;
    for (int b = 0; b < 256; ++b) {
      std::string s;
      append_utf8(s, byte_to_unicode(static_cast<uint8_t>(b)));
      v.tokens.push_back(s);
    }
    return ByteBpeTokenizer::from_vocab(std::move(v));
  }();
  return t;
}

class BadTextCorpus : public ::testing::TestWithParam<BadFile> {};

TEST_P(BadTextCorpus, ThrowsWithTheProblem) {
  const BadFile& b = GetParam();
  const std::string path = bad_dir() + "/" + b.file;
  const std::string text = ends_with(b.file, ".text") ? testing::read_text(path) : std::string();
  std::vector<std::function<void()>> readers;
  if (ends_with(b.file, ".vocab.txt")) {
    readers.push_back([&] { WordPieceTokenizer::from_vocab_file(path); });
  } else if (ends_with(b.file, ".vocab")) {
    readers.push_back([&] { Vocab::load(path); });
  } else if (ends_with(b.file, ".json")) {
    readers.push_back([&] { load_tokenizer(path); });
  } else if (ends_with(b.file, ".bpe")) {
    readers.push_back([&] { BpeTokenizer::load(path); });
  } else {
    ASSERT_FALSE(text.empty()) << path;
    readers.push_back([&] { wordpiece().encode(text); });
    readers.push_back([&] { byte_bpe().encode(text); });
  }
  for (const auto& read : readers) {
    try {
      read();
      ADD_FAILURE() << b.file << ": read without error";
    } catch (const Error& e) {
      const std::string msg = e.what();
      for (const std::string& part : b.expected) EXPECT_NE(msg.find(part), std::string::npos) << msg;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Files, BadTextCorpus, ::testing::ValuesIn(corpus()), testing::bad_file_test_name);

TEST(BadTextCorpus, TableListsEveryFile) { testing::expect_table_lists_every_file(bad_dir(), corpus()); }

}  // namespace
}  // namespace attn::text
