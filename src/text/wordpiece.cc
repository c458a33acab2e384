#include <attn/core/error.h>
#include <attn/io/files.h>
#include <attn/io/json.h>
#include <attn/text/utf8.h>
#include <attn/text/wordpiece.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string_view>
#include <unordered_map>

#include "text/unicode_ucd.h"

namespace attn::text {

namespace {

// BERT's "Chinese character" ranges (CJK Unified Ideographs and extensions,
// compatibility ideographs), as in Hugging Face tokenizers' BertNormalizer.
bool is_chinese_char(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

bool is_control(char32_t c) {
  if (c == '\t' || c == '\n' || c == '\r') return false;
  const ucd::Cat k = ucd::category(c);
  return k == ucd::Cat::Cc || k == ucd::Cat::Cf || k == ucd::Cat::Co || k == ucd::Cat::Cs;
}

bool is_bert_punctuation(char32_t c) {
  if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126))
    return true;
  return ucd::is_punctuation(c);
}

// A piece of input: literal text, or a special token written in the text.
struct Segment {
  std::string_view text;
  bool special = false;
};

std::vector<Segment> split_specials(std::string_view text, const std::vector<std::string>& specials) {
  std::vector<Segment> out;
  std::size_t start = 0;
  for (std::size_t i = 0; i < text.size();) {
    const std::string* hit = nullptr;
    for (const std::string& s : specials)  // longest first: leftmost-longest match
      if (text.compare(i, s.size(), s) == 0) {
        hit = &s;
        break;
      }
    if (!hit) {
      ++i;
      continue;
    }
    if (i > start) out.push_back({text.substr(start, i - start), false});
    out.push_back({text.substr(i, hit->size()), true});
    i += hit->size();
    start = i;
  }
  if (start < text.size()) out.push_back({text.substr(start), false});
  return out;
}

std::string read_file(const std::string& path, const char* what) {
  return io::read_file(path, std::string("wordpiece: ") + what);
}

bool file_exists(const std::string& path) {
  struct stat sb {};
  return ::stat(path.c_str(), &sb) == 0 && S_ISREG(sb.st_mode);
}

}  // namespace

WordPieceTokenizer WordPieceTokenizer::from_vocab(std::vector<std::string> vocab, WordPieceOptions options) {
  ATTN_CHECK(!vocab.empty(), "wordpiece: the vocabulary is empty");
  ATTN_CHECK(vocab.size() <= static_cast<std::size_t>(INT32_MAX), "wordpiece: vocabulary of ", vocab.size(),
             " tokens does not fit int32 ids");
  ATTN_CHECK(options.max_input_chars_per_word > 0,
             "wordpiece: max_input_chars_per_word must be positive; got ", options.max_input_chars_per_word);
  WordPieceTokenizer t;
  t.options_ = std::move(options);
  t.vocab_ = std::move(vocab);
  for (std::size_t i = 0; i < t.vocab_.size(); ++i)
    t.ids_[t.vocab_[i]] = static_cast<int32_t>(i);  // last wins
  const auto unk = t.ids_.find(t.options_.unk_token);
  ATTN_CHECK(unk != t.ids_.end(), "wordpiece: the vocabulary (", t.vocab_.size(),
             " tokens) has no unknown token \"", t.options_.unk_token, "\"; expected it among the tokens");
  t.unk_id_ = unk->second;
  for (const std::string* s : {&t.options_.pad_token, &t.options_.unk_token, &t.options_.cls_token,
                               &t.options_.sep_token, &t.options_.mask_token})
    if (!s->empty() && t.ids_.count(*s) &&
        std::find(t.specials_.begin(), t.specials_.end(), *s) == t.specials_.end())
      t.specials_.push_back(*s);
  std::stable_sort(t.specials_.begin(), t.specials_.end(),
                   [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  return t;
}

WordPieceTokenizer WordPieceTokenizer::from_vocab_file(const std::string& path, WordPieceOptions options) {
  const std::string text = read_file(path, "vocabulary");
  // Ids are line numbers, so a bad line would shift or shadow ids silently: invalid UTF-8, a NUL
  // byte or a token that an earlier line already holds is an error naming the line.
  require_utf8(text, Location{path, 1, 0});
  std::vector<std::string> vocab;
  std::unordered_map<std::string_view, int64_t> first_line;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const int64_t number = static_cast<int64_t>(vocab.size()) + 1;
    const std::size_t nul = line.find('\0');
    ATTN_CHECK(nul == std::string::npos, "wordpiece: '", path, "' line ", number, " (id ", number - 1,
               ") holds a NUL byte at column ", nul + 1, "; expected one token per line without NUL bytes");
    if (!line.empty()) {
      const auto [it, fresh] = first_line.emplace(std::string_view(text).substr(start, line.size()), number);
      ATTN_CHECK(fresh, "wordpiece: '", path, "' line ", number, " repeats the token \"", line, "\" of line ",
                 it->second, "; expected every token once (ids are line numbers)");
    }
    vocab.push_back(std::move(line));
    start = end + 1;
  }
  try {
    return from_vocab(std::move(vocab), std::move(options));
  } catch (const Error& e) {
    throw Error(detail::concat(e.what(), " (file '", path, "')"));
  }
}

WordPieceTokenizer WordPieceTokenizer::from_model_dir(const std::string& dir) {
  WordPieceOptions o;
  bool have_limit = false;
  const std::string tc = dir + "/tokenizer_config.json";
  if (file_exists(tc)) {
    const json::Value cfg = json::parse(read_file(tc, "tokenizer config"));
    auto flag = [&](const char* key, bool& dst) {
      if (const json::Value* v = cfg.find(key); v && v->is_bool()) dst = v->as_bool();
    };
    flag("do_lower_case", o.lowercase);
    flag("tokenize_chinese_chars", o.handle_chinese_chars);
    if (const json::Value* v = cfg.find("strip_accents"); v && v->is_bool()) o.strip_accents = v->as_bool();
    if (const json::Value* v = cfg.find("model_max_length");
        v && v->is_integer() && v->as_int64() > 0 && v->as_int64() < (int64_t{1} << 40)) {
      o.max_length = v->as_int64();
      have_limit = true;
    }
    for (auto [key, dst] : {std::pair{"unk_token", &o.unk_token}, std::pair{"cls_token", &o.cls_token},
                            std::pair{"sep_token", &o.sep_token}, std::pair{"pad_token", &o.pad_token},
                            std::pair{"mask_token", &o.mask_token}})
      if (const json::Value* v = cfg.find(key); v && v->is_string()) *dst = v->as_string();
  }
  const std::string mc = dir + "/config.json";
  if (!have_limit && file_exists(mc)) {
    const json::Value cfg = json::parse(read_file(mc, "model config"));
    if (const json::Value* v = cfg.find("max_position_embeddings"); v && v->is_integer() && v->as_int64() > 0)
      o.max_length = v->as_int64();
  }
  return from_vocab_file(dir + "/vocab.txt", std::move(o));
}

int32_t WordPieceTokenizer::token_to_id(std::string_view token) const {
  const auto it = ids_.find(std::string(token));
  return it == ids_.end() ? -1 : it->second;
}

const std::string& WordPieceTokenizer::id_to_token(int32_t id) const {
  ATTN_CHECK(id >= 0 && id < vocab_size(), "wordpiece: token id ", id, " is outside the vocabulary [0, ",
             vocab_size(), ")");
  return vocab_[static_cast<std::size_t>(id)];
}

int32_t WordPieceTokenizer::require(const std::string& token, const char* role) const {
  const int32_t id = token_to_id(token);
  ATTN_CHECK(id >= 0, "wordpiece: the ", role, " token \"", token, "\" is not in the vocabulary (",
             vocab_size(), " tokens)");
  return id;
}

std::vector<std::string> WordPieceTokenizer::pre_tokenize(std::string_view text) const {
  std::vector<std::size_t> offsets;
  const std::u32string cps = ucd::decode_utf8(text, "wordpiece", &offsets);
  const bool strip = options_.strip_accents.value_or(options_.lowercase);
  // Steps 2–3.
  std::u32string s;
  s.reserve(cps.size());
  for (char32_t c : cps) {
    if (options_.clean_text) {
      if (c == 0 || c == 0xFFFD || is_control(c)) continue;
      if (ucd::is_white_space(c)) c = ' ';
    }
    if (options_.handle_chinese_chars && is_chinese_char(c)) {
      s.push_back(' ');
      s.push_back(c);
      s.push_back(' ');
    } else {
      s.push_back(c);
    }
  }
  // Steps 4–5.
  if (strip) {
    const std::u32string d = ucd::nfd(s);
    s.clear();
    for (char32_t c : d)
      if (!ucd::is_nonspacing_mark(c)) s.push_back(c);
  }
  if (options_.lowercase) {
    std::u32string low;
    low.reserve(s.size());
    for (char32_t c : s) ucd::to_lower(c, low);
    s = std::move(low);
  }
  // Step 6.
  std::vector<std::string> words;
  std::string cur;
  for (char32_t c : s) {
    if (ucd::is_white_space(c)) {
      if (!cur.empty()) words.push_back(std::move(cur)), cur.clear();
    } else if (is_bert_punctuation(c)) {
      if (!cur.empty()) words.push_back(std::move(cur)), cur.clear();
      words.push_back(ucd::encode_utf8(std::u32string_view(&c, 1)));
    } else {
      ucd::append_utf8(c, cur);
    }
  }
  if (!cur.empty()) words.push_back(std::move(cur));
  return words;
}

void WordPieceTokenizer::word_pieces(const std::string& word, std::vector<int32_t>& out) const {
  std::vector<std::size_t> starts;  // byte offset of each code point, plus the end
  for (std::size_t i = 0; i < word.size(); ++i)
    if ((static_cast<unsigned char>(word[i]) & 0xC0) != 0x80) starts.push_back(i);
  const std::size_t n = starts.size();
  starts.push_back(word.size());
  if (n > static_cast<std::size_t>(options_.max_input_chars_per_word)) {
    out.push_back(unk_id_);
    return;
  }
  std::vector<int32_t> pieces;
  std::string key;
  for (std::size_t b = 0; b < n;) {
    int32_t found = -1;
    std::size_t e = n;
    for (; e > b; --e) {
      key.assign(b > 0 ? options_.continuing_prefix : std::string());
      key.append(word, starts[b], starts[e] - starts[b]);
      const auto it = ids_.find(key);
      if (it != ids_.end()) {
        found = it->second;
        break;
      }
    }
    if (found < 0) {
      out.push_back(unk_id_);
      return;
    }
    pieces.push_back(found);
    b = e;
  }
  out.insert(out.end(), pieces.begin(), pieces.end());
}

std::vector<int32_t> WordPieceTokenizer::tokenize_ids(std::string_view text) const {
  // Validate first so that the error's byte offset counts from the start of `text`.
  ucd::decode_utf8(text, "wordpiece: input text");
  std::vector<int32_t> ids;
  for (const Segment& seg : split_specials(text, specials_)) {
    if (seg.special) {
      ids.push_back(ids_.at(std::string(seg.text)));
    } else {
      const std::vector<std::string> words = pre_tokenize(seg.text);
      for (const std::string& w : words) word_pieces(w, ids);
    }
  }
  return ids;
}

std::vector<std::string> WordPieceTokenizer::tokenize(std::string_view text) const {
  std::vector<std::string> out;
  for (int32_t id : tokenize_ids(text)) out.push_back(vocab_[static_cast<std::size_t>(id)]);
  return out;
}

namespace {

void append_tokens(Encoding& e, const std::vector<int32_t>& ids, int32_t type) {
  e.ids.insert(e.ids.end(), ids.begin(), ids.end());
  e.type_ids.insert(e.type_ids.end(), ids.size(), type);
  e.attention_mask.insert(e.attention_mask.end(), ids.size(), 1);
}

}  // namespace

Encoding WordPieceTokenizer::encode(std::string_view text, bool add_special_tokens, bool truncate) const {
  std::vector<int32_t> ids = tokenize_ids(text);
  Encoding e;
  if (add_special_tokens) {
    const int32_t cls = require(options_.cls_token, "classifier");
    const int32_t sep = require(options_.sep_token, "separator");
    if (truncate) {
      ATTN_CHECK(options_.max_length >= 2, "wordpiece: max_length ", options_.max_length,
                 " leaves no room for [CLS] and [SEP]");
      if (static_cast<int64_t>(ids.size()) > options_.max_length - 2) ids.resize(options_.max_length - 2);
    }
    append_tokens(e, {cls}, 0);
    append_tokens(e, ids, 0);
    append_tokens(e, {sep}, 0);
  } else {
    if (truncate && static_cast<int64_t>(ids.size()) > options_.max_length) ids.resize(options_.max_length);
    append_tokens(e, ids, 0);
  }
  for (int32_t id : e.ids) e.tokens.push_back(vocab_[static_cast<std::size_t>(id)]);
  return e;
}

std::vector<int32_t> WordPieceTokenizer::encode_for_model(std::string_view text, int64_t max_length,
                                                          bool* truncated) const {
  ATTN_CHECK(max_length >= 2, "wordpiece: max_length ", max_length, " leaves no room for [CLS] and [SEP]");
  std::vector<int32_t> ids = tokenize_ids(text);
  const bool cut = static_cast<int64_t>(ids.size()) > max_length - 2;
  if (cut) ids.resize(static_cast<std::size_t>(max_length - 2));
  if (truncated != nullptr) *truncated = cut;
  ids.insert(ids.begin(), require(options_.cls_token, "classifier"));
  ids.push_back(require(options_.sep_token, "separator"));
  return ids;
}

Encoding WordPieceTokenizer::encode_pair(std::string_view a, std::string_view b, bool truncate) const {
  std::vector<int32_t> ia = tokenize_ids(a), ib = tokenize_ids(b);
  const int32_t cls = require(options_.cls_token, "classifier");
  const int32_t sep = require(options_.sep_token, "separator");
  if (truncate) {
    ATTN_CHECK(options_.max_length >= 3, "wordpiece: max_length ", options_.max_length,
               " leaves no room for [CLS] and two [SEP]");
    const std::size_t budget = static_cast<std::size_t>(options_.max_length - 3);
    if (ia.size() + ib.size() > budget) {
      // The shorter text (the first on a tie) keeps up to half the budget.
      const bool first_short = ia.size() <= ib.size();
      std::vector<int32_t>& shorter = first_short ? ia : ib;
      std::vector<int32_t>& longer = first_short ? ib : ia;
      shorter.resize(std::min(shorter.size(), budget / 2));
      longer.resize(std::min(longer.size(), budget - shorter.size()));
    }
  }
  Encoding e;
  append_tokens(e, {cls}, 0);
  append_tokens(e, ia, 0);
  append_tokens(e, {sep}, 0);
  append_tokens(e, ib, 1);
  append_tokens(e, {sep}, 1);
  for (int32_t id : e.ids) e.tokens.push_back(vocab_[static_cast<std::size_t>(id)]);
  return e;
}

void WordPieceTokenizer::pad(Encoding& e, int64_t length) const {
  if (static_cast<int64_t>(e.ids.size()) >= length) return;
  const int32_t pad_id = require(options_.pad_token, "padding");
  const std::size_t n = static_cast<std::size_t>(length) - e.ids.size();
  e.ids.insert(e.ids.end(), n, pad_id);
  e.type_ids.insert(e.type_ids.end(), n, 0);
  e.attention_mask.insert(e.attention_mask.end(), n, 0);
  e.tokens.insert(e.tokens.end(), n, options_.pad_token);
}

std::string WordPieceTokenizer::decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  std::string out;
  const std::string& pre = options_.continuing_prefix;
  for (int32_t id : ids) {
    const std::string& t = id_to_token(id);
    if (skip_special_tokens && std::find(specials_.begin(), specials_.end(), t) != specials_.end()) continue;
    if (!pre.empty() && t.compare(0, pre.size(), pre) == 0 && !out.empty()) {
      out += t.substr(pre.size());
    } else {
      if (!out.empty()) out += ' ';
      out += t;
    }
  }
  // Clean-up as in BERT's decoder: no space before common punctuation and contractions.
  for (const char* pat : {" .", " ?", " !", " ,", " ' ", " n't", " 'm", " 's", " 've", " 're"}) {
    const std::string p(pat);
    const std::string r = p == " ' " ? "'" : p.substr(1);
    for (std::size_t pos = 0; (pos = out.find(p, pos)) != std::string::npos;) {
      out.replace(pos, p.size(), r);
      pos += r.size();
    }
  }
  return out;
}

}  // namespace attn::text
