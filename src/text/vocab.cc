#include <attn/core/error.h>
#include <attn/io/files.h>
#include <attn/text/utf8.h>
#include <attn/text/vocab.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace attn::text {

const std::vector<std::string>& Vocab::special_tokens() {
  static const std::vector<std::string> specials = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "<s>", "</s>"};
  return specials;
}

void Vocab::add(std::string token, const char* what) {
  ATTN_CHECK(!token.empty(), "vocab: ", what, ": empty token at id ", tokens_.size());
  ATTN_CHECK(token.find_first_of("\r\n") == std::string::npos, "vocab: ", what, ": token at id ",
             tokens_.size(), " contains a line break");
  const int32_t id = static_cast<int32_t>(tokens_.size());
  const auto [it, inserted] = ids_.emplace(token, id);
  ATTN_CHECK(inserted, "vocab: ", what, ": token '", token, "' at id ", id, " duplicates id ", it->second);
  tokens_.push_back(std::move(token));
}

Vocab Vocab::build(const TokenCounts& counts, const VocabOptions& options) {
  ATTN_CHECK(options.min_freq >= 1, "vocab: min_freq must be >= 1; got ", options.min_freq);
  ATTN_CHECK(options.max_size == 0 || options.max_size > kNumSpecial,
             "vocab: max_size must be 0 (no bound) or > ", kNumSpecial,
             " (the special tokens plus at least one token); got ", options.max_size);
  std::vector<std::pair<std::string_view, int64_t>> kept;
  for (const auto& [token, count] : counts) {
    if (count >= options.min_freq) kept.emplace_back(token, count);
  }
  ATTN_CHECK(!kept.empty(), "vocab: empty vocabulary: none of the ", counts.size(),
             " distinct tokens occurs at least min_freq=", options.min_freq, " times");
  std::stable_sort(kept.begin(), kept.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  if (options.max_size > 0 && static_cast<int64_t>(kept.size()) > options.max_size - kNumSpecial) {
    kept.resize(options.max_size - kNumSpecial);
  }
  Vocab v;
  for (const std::string& s : special_tokens()) v.add(s, "build");
  for (const auto& [token, count] : kept) v.add(std::string(token), "build");
  return v;
}

Vocab Vocab::from_tokens(const std::vector<std::string>& tokens) {
  ATTN_CHECK(!tokens.empty(), "vocab: empty vocabulary: from_tokens() got no tokens");
  Vocab v;
  for (const std::string& s : special_tokens()) v.add(s, "from_tokens");
  for (const std::string& t : tokens) v.add(t, "from_tokens");
  return v;
}

Vocab Vocab::load(const std::string& path) {
  const std::string bytes = io::read_file(path, "vocab: vocabulary");
  ATTN_CHECK(!bytes.empty(), "vocab: '", path,
             "' is empty; a vocabulary file has one token per line, starting "
             "with the ",
             kNumSpecial, " special tokens");
  require_utf8(bytes, {path, 1, 0});
  ATTN_CHECK(bytes.back() == '\n', "vocab: '", path, "': the last line has no '\\n' (file truncated?)");
  Vocab v;
  std::size_t start = 0;
  int64_t line = 1;
  while (start < bytes.size()) {
    const std::size_t end = bytes.find('\n', start);
    std::string token = bytes.substr(start, end - start);
    ATTN_CHECK(token.empty() || token.back() != '\r', "vocab: '", path, "' line ", line,
               ": Windows line ending (\\r\\n); lines must end with '\\n' only");
    ATTN_CHECK(!token.empty(), "vocab: '", path, "' line ", line, ": empty token");
    if (line <= kNumSpecial) {
      ATTN_CHECK(token == special_tokens()[line - 1], "vocab: '", path, "' line ", line,
                 ": expected the special "
                 "token '",
                 special_tokens()[line - 1], "' (ids 0..5 are fixed); got '", token, "'");
    }
    const auto it = v.ids_.find(token);
    ATTN_CHECK(it == v.ids_.end(), "vocab: '", path, "' line ", line, ": token '", token,
               "' duplicates line ", it->second + 1);
    v.add(std::move(token), "load");
    start = end + 1;
    ++line;
  }
  ATTN_CHECK(v.size() > kNumSpecial, "vocab: empty vocabulary: '", path, "' holds only ", v.size(),
             " lines; expected the ", kNumSpecial, " special tokens plus at least one token");
  return v;
}

void Vocab::save(const std::string& path) const {
  ATTN_CHECK(size() > kNumSpecial, "vocab: cannot save an empty vocabulary to '", path, "'");
  std::string text;
  for (const std::string& t : tokens_) text += t + '\n';
  io::write_file_atomically(path, text, "vocab");
}

int32_t Vocab::id(std::string_view token) const {
  const auto it = ids_.find(token);
  return it == ids_.end() ? kUnk : it->second;
}

bool Vocab::contains(std::string_view token) const { return ids_.find(token) != ids_.end(); }

const std::string& Vocab::token(int32_t id) const {
  ATTN_CHECK(id >= 0 && id < size(), "vocab: id ", id, " out of range [0, ", size(), ")");
  return tokens_[id];
}

}  // namespace attn::text
