#include <attn/core/error.h>
#include <attn/text/tokenizer.h>
#include <attn/text/utf8.h>

namespace attn::text {
namespace {

constexpr char32_t kSpaceCp = 0x2581;

bool ascii_alnum_token(const std::string& t) {
  return !t.empty() && is_ascii_alnum(static_cast<unsigned char>(t.front())) &&
         is_ascii_alnum(static_cast<unsigned char>(t.back()));
}

}  // namespace

std::vector<std::string> char_tokenize(std::string_view text, const CharTokenizerOptions& options) {
  const std::u32string cps = normalize(decode_utf8(text), options.normalize);
  std::vector<std::string> tokens;
  tokens.reserve(cps.size());
  std::size_t i = 0;
  while (i < cps.size()) {
    const char32_t c = cps[i];
    if (c == U' ' || c == kSpaceCp) {
      if (options.keep_spaces) tokens.emplace_back(kSpaceToken);
      ++i;
      continue;
    }
    if (options.group_ascii_alnum && is_ascii_alnum(c)) {
      std::size_t j = i;
      std::string run;
      while (j < cps.size() && is_ascii_alnum(cps[j])) run += static_cast<char>(cps[j++]);
      tokens.push_back(std::move(run));
      i = j;
      continue;
    }
    std::string one;
    append_utf8(one, c);
    tokens.push_back(std::move(one));
    ++i;
  }
  return tokens;
}

CharTokenizer::CharTokenizer(Vocab vocab, const CharTokenizerOptions& options)
    : vocab_(std::move(vocab)), options_(options) {
  ATTN_CHECK(vocab_.size() > Vocab::kNumSpecial, "char tokenizer: empty vocabulary (", vocab_.size(),
             " entries; expected the ", Vocab::kNumSpecial, " special tokens plus at least one token)");
}

TokenCounts CharTokenizer::count(const std::vector<std::string>& texts, const CharTokenizerOptions& options) {
  TokenCounts counts;
  for (const std::string& t : texts) {
    for (std::string& tok : char_tokenize(t, options)) ++counts[std::move(tok)];
  }
  return counts;
}

CharTokenizer CharTokenizer::train(const std::vector<std::string>& texts, const CharTokenizerOptions& options,
                                   const VocabOptions& vocab_options) {
  return CharTokenizer(Vocab::build(count(texts, options), vocab_options), options);
}

std::vector<std::string> CharTokenizer::tokenize(std::string_view text) const {
  return char_tokenize(text, options_);
}

std::vector<int32_t> CharTokenizer::encode(std::string_view text) const {
  const std::vector<std::string> tokens = tokenize(text);
  std::vector<int32_t> ids(tokens.size());
  for (std::size_t i = 0; i < tokens.size(); ++i) ids[i] = vocab_.id(tokens[i]);
  return ids;
}

std::string CharTokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  const std::string* prev = nullptr;
  for (const int32_t id : ids) {
    if (Vocab::is_special(id) && id != Vocab::kUnk) continue;
    const std::string& tok = vocab_.token(id);
    if (tok == kSpaceToken) {
      out += ' ';
      prev = nullptr;
      continue;
    }
    if (!options_.keep_spaces && prev != nullptr && ascii_alnum_token(*prev) && ascii_alnum_token(tok) &&
        options_.group_ascii_alnum) {
      out += ' ';
    }
    out += tok;
    prev = &tok;
  }
  return out;
}

}  // namespace attn::text
