// SentencePiece-unigram tokenizer (include/attn/text/unigram.h).
#include <attn/core/error.h>
#include <attn/text/unigram.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "text/unicode_ucd.h"

namespace attn::text {

namespace {

constexpr char32_t kMeta = 0x2581;  // ▁
constexpr double kUnkPenalty = 10.0;

// Characters that continue a grapheme (a simplification of UAX #29 that agrees with it on
// every key of the sequence table: a base followed by nonspacing marks).
bool extends_grapheme(char32_t c) {
  if (c == 0x200D || c == 0x200C) return true;    // ZWJ, ZWNJ
  if (c >= 0x1F3FB && c <= 0x1F3FF) return true;  // emoji modifiers
  if (c == 0xFF9E || c == 0xFF9F) return true;    // half-width voiced sound marks (Other_Grapheme_Extend)
  const ucd::Cat k = ucd::category(c);
  return k == ucd::Cat::Mn || k == ucd::Cat::Me || k == ucd::Cat::Mc;
}

// Grapheme_Cluster_Break=Control (approximately: Cc, Zl, Zp and Cf but ZWNJ, ZWJ and the
// prepended concatenation marks): a grapheme of its own, never extended by the marks after it.
bool is_control(char32_t c) {
  if (c == 0x200C || c == 0x200D) return false;
  if ((c >= 0x600 && c <= 0x605) || c == 0x6DD || c == 0x70F || c == 0x890 || c == 0x891 || c == 0x8E2 ||
      c == 0x110BD || c == 0x110CD)
    return false;
  const ucd::Cat k = ucd::category(c);
  return k == ucd::Cat::Cc || k == ucd::Cat::Zl || k == ucd::Cat::Zp || k == ucd::Cat::Cf;
}

std::size_t utf8_len(char32_t c) { return c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4; }

}  // namespace

double unknown_share(const std::vector<int32_t>& ids, int32_t unk_id, bool has_specials) {
  const std::size_t skip = has_specials ? 1 : 0;
  if (ids.size() <= 2 * skip) return 0.0;
  std::size_t n = 0, unk = 0;
  for (std::size_t i = skip; i + skip < ids.size(); ++i) {
    ++n;
    unk += ids[i] == unk_id ? 1 : 0;
  }
  return static_cast<double>(unk) / static_cast<double>(n);
}

UnigramTokenizer::UnigramTokenizer(UnigramSpec spec) {
  ATTN_CHECK(!spec.pieces.empty(), "unigram: the vocabulary is empty");
  ATTN_CHECK(spec.pieces.size() == spec.scores.size(), "unigram: ", spec.pieces.size(), " pieces but ",
             spec.scores.size(), " scores; expected one score per piece");
  ATTN_CHECK(spec.pieces.size() <= static_cast<std::size_t>(std::numeric_limits<int32_t>::max()),
             "unigram: too many pieces (", spec.pieces.size(), ")");
  ATTN_CHECK(spec.max_length >= 2, "unigram: max_length must be at least 2; got ", spec.max_length);
  const auto V = static_cast<int32_t>(spec.pieces.size());
  for (const auto& [id, role] :
       {std::pair{spec.bos, "bos"}, {spec.eos, "eos"}, {spec.pad, "pad"}, {spec.unk, "unk"}})
    ATTN_CHECK(id >= 0 && id < V, "unigram: ", role, " id ", id, " is outside the vocabulary [0, ", V, ")");
  pieces_ = std::move(spec.pieces);
  bos_ = spec.bos;
  eos_ = spec.eos;
  pad_ = spec.pad;
  unk_ = spec.unk;
  max_length_ = spec.max_length;
  scores_.resize(pieces_.size());
  special_.assign(pieces_.size(), false);
  double min_score = std::numeric_limits<double>::infinity();
  ids_.reserve(pieces_.size() * 2);
  for (int32_t i = 0; i < V; ++i) {
    const std::string& p = pieces_[static_cast<std::size_t>(i)];
    ATTN_CHECK(!p.empty(), "unigram: piece ", i, " is empty");
    const float s = spec.scores[static_cast<std::size_t>(i)];
    ATTN_CHECK(std::isfinite(s), "unigram: the score of piece ", i, " is not finite");
    scores_[static_cast<std::size_t>(i)] = s;
    min_score = std::min(min_score, static_cast<double>(s));
    const auto [it, fresh] = ids_.emplace(std::string_view(p), i);
    ATTN_CHECK(fresh, "unigram: piece ", i, " \"", p, "\" repeats piece ", it->second);
    const std::u32string cps = ucd::decode_utf8(p, "unigram: a piece");
    max_piece_chars_ = std::max<int64_t>(max_piece_chars_, static_cast<int64_t>(cps.size()));
  }
  unk_score_ = min_score - kUnkPenalty;
  for (int32_t id : {bos_, eos_, pad_, unk_}) special_[static_cast<std::size_t>(id)] = true;
  if (const int32_t m = token_to_id("<mask>"); m >= 0) special_[static_cast<std::size_t>(m)] = true;
  for (int32_t i = 0; i < V; ++i)
    if (special_[static_cast<std::size_t>(i)])
      specials_.emplace_back(pieces_[static_cast<std::size_t>(i)], i);
  std::sort(specials_.begin(), specials_.end(),
            [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  for (auto& [cp, to] : spec.normalization) norm_[cp] = std::move(to);
  for (auto& [from, to] : spec.sequence_normalization) seq_norm_[from] = std::move(to);
}

UnigramTokenizer UnigramTokenizer::from_container(const io::E5Container& c) {
  const io::E5Vocab& v = c.vocab();
  UnigramSpec spec;
  spec.pieces = v.pieces;
  spec.scores = v.scores;
  spec.bos = v.bos;
  spec.eos = v.eos;
  spec.pad = v.pad;
  spec.unk = v.unk;
  for (const io::E5NormEntry& e : v.normalization) spec.normalization.emplace_back(e.from, e.to);
  spec.sequence_normalization = xlmr_sequence_normalization();
  spec.max_length = c.header().max_positions;
  try {
    return UnigramTokenizer(std::move(spec));
  } catch (const Error& e) {
    throw Error(detail::concat(c.path(), ": ", e.what()));
  }
}

int32_t UnigramTokenizer::token_to_id(std::string_view piece) const {
  const auto it = ids_.find(piece);
  return it == ids_.end() ? -1 : it->second;
}

const std::string& UnigramTokenizer::id_to_token(int32_t id) const {
  ATTN_CHECK(id >= 0 && id < vocab_size(), "unigram: id ", id, " is outside the vocabulary [0, ",
             vocab_size(), ")");
  return pieces_[static_cast<std::size_t>(id)];
}

float UnigramTokenizer::score(int32_t id) const {
  id_to_token(id);
  return static_cast<float>(scores_[static_cast<std::size_t>(id)]);
}

bool UnigramTokenizer::is_special(int32_t id) const {
  return id >= 0 && id < vocab_size() && special_[static_cast<std::size_t>(id)];
}

std::u32string UnigramTokenizer::normalize(std::u32string_view text) const {
  std::u32string mapped;
  mapped.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    // One grapheme: text[i, j) (CR LF, or a character and the marks that extend it).
    std::size_t j = i + 1;
    if (text[i] == U'\r' && j < text.size() && text[j] == U'\n') ++j;
    if (!is_control(text[i]))
      while (j < text.size() && extends_grapheme(text[j])) ++j;
    std::size_t bytes = 0;
    for (std::size_t k = i; k < j; ++k) bytes += utf8_len(text[k]);
    bool whole = false;
    if (bytes < 6) {
      // The charsmap's rule for a short grapheme: the shortest prefix that is a key replaces the
      // whole grapheme (so "ｏ" + U+0308 becomes "o": the mark goes with it).
      for (std::size_t k = i + 1; k <= j && !whole; ++k) {
        if (k == i + 1) {
          const auto it = norm_.find(text[i]);
          if (it != norm_.end()) {
            mapped += it->second;
            whole = true;
          }
        } else if (!seq_norm_.empty()) {
          const auto it = seq_norm_.find(std::u32string(text.substr(i, k - i)));
          if (it != seq_norm_.end()) {
            mapped += it->second;
            whole = true;
          }
        }
      }
    }
    if (!whole)
      for (std::size_t k = i; k < j; ++k) {
        const auto it = norm_.find(text[k]);
        if (it == norm_.end())
          mapped.push_back(text[k]);
        else
          mapped += it->second;
      }
    i = j;
  }
  // Runs of two or more spaces become one.
  std::u32string out;
  out.reserve(mapped.size());
  for (char32_t c : mapped)
    if (!(c == U' ' && !out.empty() && out.back() == U' ')) out.push_back(c);
  return out;
}

void UnigramTokenizer::segment_words(std::u32string_view segment, std::vector<std::u32string>& words) const {
  std::u32string s = normalize(segment);
  if (s.empty()) return;
  for (char32_t& c : s)
    if (c == U' ') c = kMeta;
  if (s.front() != kMeta) s.insert(s.begin(), kMeta);
  std::size_t start = 0;
  for (std::size_t i = 1; i <= s.size(); ++i)
    if (i == s.size() || s[i] == kMeta) {
      words.emplace_back(s.substr(start, i - start));
      start = i;
    }
}

void UnigramTokenizer::word_ids(std::u32string_view word, std::vector<int32_t>& out) const {
  const std::size_t n = word.size();
  // UTF-8 of the word and each character's byte offset.
  std::string bytes;
  std::vector<std::size_t> at(n + 1, 0);
  for (std::size_t i = 0; i < n; ++i) {
    at[i] = bytes.size();
    ucd::append_utf8(word[i], bytes);
  }
  at[n] = bytes.size();
  struct Node {
    double score = 0;
    int32_t id = -1;
    int64_t from = -1;  // -1: not reached
  };
  std::vector<Node> best(n + 1);
  best[0].from = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (best[i].from < 0) continue;
    const double here = best[i].score;
    bool single = false;
    const std::size_t last = std::min<std::size_t>(n, i + static_cast<std::size_t>(max_piece_chars_));
    for (std::size_t e = i + 1; e <= last; ++e) {
      const int32_t id = token_to_id(std::string_view(bytes).substr(at[i], at[e] - at[i]));
      if (id < 0) continue;
      if (e == i + 1) single = true;
      const double cand = here + scores_[static_cast<std::size_t>(id)];
      if (best[e].from < 0 || cand > best[e].score) best[e] = {cand, id, static_cast<int64_t>(i)};
    }
    if (!single) {
      const double cand = here + unk_score_;
      if (best[i + 1].from < 0 || cand > best[i + 1].score)
        best[i + 1] = {cand, unk_, static_cast<int64_t>(i)};
    }
  }
  std::vector<int32_t> rev;
  for (std::size_t e = n; e > 0; e = static_cast<std::size_t>(best[e].from)) rev.push_back(best[e].id);
  for (auto it = rev.rbegin(); it != rev.rend(); ++it) {
    if (*it == unk_ && !out.empty() && out.back() == unk_) continue;  // consecutive <unk> fuse
    out.push_back(*it);
  }
}

namespace {
// Splits `text` at literal special pieces: (segment, -1) for text, ("", id) for a special.
template <typename F>
void split_specials(std::string_view text, const std::vector<std::pair<std::string, int32_t>>& specials,
                    F&& f) {
  std::size_t start = 0, i = 0;
  while (i < text.size()) {
    int32_t hit = -1;
    std::size_t len = 0;
    if (text[i] == '<')
      for (const auto& [s, id] : specials)
        if (text.compare(i, s.size(), s) == 0) {
          hit = id;
          len = s.size();
          break;
        }
    if (hit < 0) {
      ++i;
      continue;
    }
    if (i > start) f(text.substr(start, i - start), -1);
    f(std::string_view(), hit);
    i += len;
    start = i;
  }
  if (start < text.size()) f(text.substr(start), -1);
}
}  // namespace

std::vector<std::string> UnigramTokenizer::pre_tokenize(std::string_view text) const {
  ucd::decode_utf8(text, "unigram: input text");
  std::vector<std::string> out;
  split_specials(text, specials_, [&](std::string_view seg, int32_t special) {
    if (special >= 0) {
      out.push_back(pieces_[static_cast<std::size_t>(special)]);
      return;
    }
    std::vector<std::u32string> words;
    segment_words(ucd::decode_utf8(seg, "unigram: input text"), words);
    for (const auto& w : words) out.push_back(ucd::encode_utf8(w));
  });
  return out;
}

std::vector<int32_t> UnigramTokenizer::tokenize_ids(std::string_view text) const {
  ucd::decode_utf8(text, "unigram: input text");  // the error names the byte offset in the whole text
  std::vector<int32_t> ids;
  split_specials(text, specials_, [&](std::string_view seg, int32_t special) {
    if (special >= 0) {
      ids.push_back(special);
      return;
    }
    std::vector<std::u32string> words;
    segment_words(ucd::decode_utf8(seg, "unigram: input text"), words);
    for (const auto& w : words) {
      std::vector<int32_t> w_ids;  // <unk> fuse within a word only, as Hugging Face's do
      word_ids(w, w_ids);
      ids.insert(ids.end(), w_ids.begin(), w_ids.end());
    }
  });
  return ids;
}

std::vector<std::string> UnigramTokenizer::tokenize(std::string_view text) const {
  std::vector<std::string> out;
  for (int32_t id : tokenize_ids(text)) out.push_back(pieces_[static_cast<std::size_t>(id)]);
  return out;
}

std::vector<int32_t> UnigramTokenizer::encode(std::string_view text, bool add_special_tokens, bool truncate,
                                              bool* truncated) const {
  std::vector<int32_t> content = tokenize_ids(text);
  const int64_t budget = truncate ? max_length_ - (add_special_tokens ? 2 : 0) : -1;
  const bool cut = budget >= 0 && static_cast<int64_t>(content.size()) > budget;
  if (cut) content.resize(static_cast<std::size_t>(budget));
  if (truncated != nullptr) *truncated = cut;
  if (!add_special_tokens) return content;
  std::vector<int32_t> ids;
  ids.reserve(content.size() + 2);
  ids.push_back(bos_);
  ids.insert(ids.end(), content.begin(), content.end());
  ids.push_back(eos_);
  return ids;
}

std::vector<int32_t> UnigramTokenizer::encode_for_model(std::string_view text, int64_t max_length,
                                                        bool* truncated) const {
  ATTN_CHECK(max_length >= 2, "unigram: max_length must be at least 2 (<s> and </s>); got ", max_length);
  std::vector<int32_t> content = tokenize_ids(text);
  const bool cut = static_cast<int64_t>(content.size()) > max_length - 2;
  if (cut) content.resize(static_cast<std::size_t>(max_length - 2));
  if (truncated != nullptr) *truncated = cut;
  std::vector<int32_t> ids;
  ids.reserve(content.size() + 2);
  ids.push_back(bos_);
  ids.insert(ids.end(), content.begin(), content.end());
  ids.push_back(eos_);
  return ids;
}

std::string UnigramTokenizer::decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  std::string s;
  for (int32_t id : ids) {
    if (skip_special_tokens && is_special(id) && id != unk_) continue;
    s += id_to_token(id);
  }
  std::string out;
  const std::string meta = "\xE2\x96\x81";
  for (std::size_t i = 0; i < s.size();) {
    if (s.compare(i, meta.size(), meta) == 0) {
      out.push_back(' ');
      i += meta.size();
    } else {
      out.push_back(s[i++]);
    }
  }
  if (!out.empty() && out.front() == ' ') out.erase(out.begin());
  return out;
}

}  // namespace attn::text
