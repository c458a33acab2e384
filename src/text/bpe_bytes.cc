#include <attn/core/error.h>
#include <attn/text/bpe_bytes.h>

#include <algorithm>
#include <array>
#include <queue>

#include "text/special_split.h"
#include "text/unicode_ucd.h"

namespace attn::text {

// ---- GPT-2's byte ↔ unicode table ---------------------------------------------------

namespace {

// Bytes that are printable Latin-1 characters map to themselves: '!'..'~',
// '¡'..'¬', '®'..'ÿ'. The remaining 68 get U+0100 + n in increasing byte order.
struct ByteTable {
  std::array<char32_t, 256> to_cp{};
  std::array<int16_t, 512> to_byte{};  // all mapped code points are below U+0200
  ByteTable() {
    to_byte.fill(-1);
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      to_cp[b] = printable ? static_cast<char32_t>(b) : next++;
      to_byte[to_cp[b]] = static_cast<int16_t>(b);
    }
  }
};

const ByteTable& byte_table() {
  static const ByteTable t;
  return t;
}

}  // namespace

char32_t byte_to_unicode(uint8_t b) { return byte_table().to_cp[b]; }

int unicode_to_byte(char32_t c) { return c < 512 ? byte_table().to_byte[c] : -1; }

// ---- pre-tokenization -----------------------------------------------------------------

namespace {

bool is_ws(char32_t c) { return ucd::is_white_space(c); }
bool is_l(char32_t c) { return ucd::is_letter(c); }
bool is_n(char32_t c) { return ucd::is_number(c); }

// GPT-2's pattern over cps[begin, end), as half-open code point ranges:
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// The alternatives are tried in order at each position, as a backtracking
// regex engine would; lookahead sees only the piece (its end counts as "not \S").
void split_gpt2(const std::u32string& cps, std::size_t begin, std::size_t end,
                std::vector<std::pair<std::size_t, std::size_t>>& out) {
  std::size_t pos = begin;
  while (pos < end) {
    const char32_t c = cps[pos];
    // Contractions.
    if (c == '\'' && pos + 1 < end) {
      const char32_t n1 = cps[pos + 1];
      if (n1 == 's' || n1 == 't' || n1 == 'm' || n1 == 'd') {
        out.emplace_back(pos, pos + 2);
        pos += 2;
        continue;
      }
      if (pos + 2 < end) {
        const char32_t n2 = cps[pos + 2];
        if ((n1 == 'r' && n2 == 'e') || (n1 == 'v' && n2 == 'e') || (n1 == 'l' && n2 == 'l')) {
          out.emplace_back(pos, pos + 3);
          pos += 3;
          continue;
        }
      }
    }
    // ' ?' then a run of one class.
    const std::size_t p = (c == ' ' && pos + 1 < end) ? pos + 1 : pos;
    const char32_t d = cps[p];
    auto run = [&](auto pred) {
      std::size_t q = p;
      while (q < end && pred(cps[q])) ++q;
      out.emplace_back(pos, q);
      pos = q;
    };
    if (is_l(d)) {
      run(is_l);
      continue;
    }
    if (is_n(d)) {
      run(is_n);
      continue;
    }
    if (!is_ws(d)) {
      run([](char32_t x) { return !is_ws(x) && !is_l(x) && !is_n(x); });
      continue;
    }
    // Whitespace: \s+(?!\S) leaves the last space of a run that is followed
    // by a non-space to the next token; a single such space is matched by \s+.
    std::size_t q = pos;
    while (q < end && is_ws(cps[q])) ++q;
    if (q < end && q - pos > 1) --q;
    out.emplace_back(pos, q);
    pos = q;
  }
}

}  // namespace

// ---- construction -----------------------------------------------------------------------

ByteBpeTokenizer ByteBpeTokenizer::from_vocab(ByteBpeVocab vocab) {
  const std::size_t n = vocab.tokens.size();
  ATTN_CHECK(n > 0, "bpe: the vocabulary is empty");
  ATTN_CHECK(n <= static_cast<std::size_t>(INT32_MAX), "bpe: vocabulary of ", n,
             " tokens does not fit int32 ids");
  ATTN_CHECK(vocab.types.empty() || vocab.types.size() == n, "bpe: ", vocab.types.size(), " token types for ",
             n, " tokens; expected one per token");
  if (vocab.types.empty()) vocab.types.assign(n, BpeTokenType::normal);
  for (auto [id, name] : {std::pair{vocab.bos_id, "bos"}, std::pair{vocab.eos_id, "eos"},
                          std::pair{vocab.pad_id, "padding"}, std::pair{vocab.unk_id, "unknown"}})
    ATTN_CHECK(id >= -1 && id < static_cast<int64_t>(n), "bpe: ", name, " token id ", id,
               " is outside the vocabulary [0, ", n, ")");
  ByteBpeTokenizer t;
  t.vocab_ = std::move(vocab);
  for (std::size_t i = 0; i < n; ++i) {
    ATTN_CHECK(!t.vocab_.tokens[i].empty(), "bpe: token ", i, " is empty");
    t.ids_.emplace(t.vocab_.tokens[i], static_cast<int32_t>(i));  // first wins on duplicates
  }
  for (std::size_t r = 0; r < t.vocab_.merges.size(); ++r) {
    const std::string& m = t.vocab_.merges[r];
    const std::size_t sp = m.find(' ', 1);
    ATTN_CHECK(sp != std::string::npos && sp + 1 < m.size() && m.find(' ', sp + 1) == std::string::npos,
               "bpe: merge ", r, " \"", m, "\" must be two symbols separated by one space");
    t.ranks_.emplace(m, static_cast<int32_t>(r));  // the first (lowest) rank wins
  }
  for (std::size_t i = 0; i < n; ++i) {
    const BpeTokenType ty = t.vocab_.types[i];
    if (ty == BpeTokenType::control || ty == BpeTokenType::user_defined || ty == BpeTokenType::unknown)
      t.specials_.push_back(static_cast<int32_t>(i));
  }
  std::stable_sort(t.specials_.begin(), t.specials_.end(), [&](int32_t a, int32_t b) {
    return t.vocab_.tokens[a].size() > t.vocab_.tokens[b].size();
  });
  return t;
}

ByteBpeTokenizer ByteBpeTokenizer::from_gguf(const io::GgufFile& f) {
  const std::string model = f.get_string("tokenizer.ggml.model");
  ATTN_CHECK(model == "gpt2", "bpe: ", f.path(), ": tokenizer.ggml.model is \"", model,
             "\"; expected \"gpt2\" (byte-level BPE)");
  ByteBpeVocab v;
  const std::string pre = f.has("tokenizer.ggml.pre") ? f.get_string("tokenizer.ggml.pre") : "gpt2";
  if (pre == "smollm") {
    v.pre = PreTokenizer::smollm;
  } else if (pre == "gpt2") {
    v.pre = PreTokenizer::gpt2;
  } else {
    throw Error(detail::concat("bpe: ", f.path(), ": unsupported tokenizer.ggml.pre \"", pre,
                               "\"; supported: \"gpt2\", \"smollm\""));
  }
  v.tokens = f.get_string_array("tokenizer.ggml.tokens");
  if (f.has("tokenizer.ggml.token_type")) {
    const std::vector<int64_t> types = f.get_int_array("tokenizer.ggml.token_type");
    ATTN_CHECK(types.size() == v.tokens.size(), "bpe: ", f.path(), ": tokenizer.ggml.token_type has ",
               types.size(), " entries for ", v.tokens.size(), " tokens");
    for (std::size_t i = 0; i < types.size(); ++i) {
      ATTN_CHECK(types[i] >= 1 && types[i] <= 6, "bpe: ", f.path(), ": token ", i, " has type ", types[i],
                 "; expected 1..6");
      v.types.push_back(static_cast<BpeTokenType>(types[i]));
    }
  }
  v.merges = f.get_string_array("tokenizer.ggml.merges");
  // Ids are checked against the vocabulary in from_vocab; first they must fit
  // int32 (a u64 id of 2^32 + 1 would otherwise wrap around to 1).
  auto special_id = [&](const char* key) {
    const int64_t id = f.get_int(key, -1);
    ATTN_CHECK(id >= INT32_MIN && id <= INT32_MAX, "bpe: ", f.path(), ": ", key, " is ", id,
               "; expected a token id in [0, ", v.tokens.size(), ")");
    return static_cast<int32_t>(id);
  };
  v.bos_id = special_id("tokenizer.ggml.bos_token_id");
  v.eos_id = special_id("tokenizer.ggml.eos_token_id");
  v.pad_id = special_id("tokenizer.ggml.padding_token_id");
  v.unk_id = special_id("tokenizer.ggml.unknown_token_id");
  v.add_bos = f.has("tokenizer.ggml.add_bos_token") && f.get_bool("tokenizer.ggml.add_bos_token");
  try {
    return from_vocab(std::move(v));
  } catch (const Error& e) {
    throw Error(detail::concat(e.what(), " (file '", f.path(), "')"));
  }
}

int32_t ByteBpeTokenizer::token_to_id(std::string_view token) const {
  const auto it = ids_.find(std::string(token));
  return it == ids_.end() ? -1 : it->second;
}

const std::string& ByteBpeTokenizer::id_to_token(int32_t id) const {
  ATTN_CHECK(id >= 0 && id < vocab_size(), "bpe: token id ", id, " is outside the vocabulary [0, ",
             vocab_size(), ")");
  return vocab_.tokens[static_cast<std::size_t>(id)];
}

// ---- encoding ---------------------------------------------------------------------------

std::vector<std::string> ByteBpeTokenizer::pre_tokenize(std::string_view text) const {
  std::vector<std::size_t> offsets;
  const std::u32string cps = ucd::decode_utf8(text, "bpe: input text", &offsets);
  offsets.push_back(text.size());
  std::vector<std::pair<std::size_t, std::size_t>> words;
  if (vocab_.pre == PreTokenizer::smollm) {
    std::size_t start = 0;
    for (std::size_t i = 0; i < cps.size(); ++i) {
      if (!is_n(cps[i])) continue;
      split_gpt2(cps, start, i, words);
      words.emplace_back(i, i + 1);
      start = i + 1;
    }
    split_gpt2(cps, start, cps.size(), words);
  } else {
    split_gpt2(cps, 0, cps.size(), words);
  }
  std::vector<std::string> out;
  out.reserve(words.size());
  for (const auto& [b, e] : words) out.emplace_back(text.substr(offsets[b], offsets[e] - offsets[b]));
  return out;
}

void ByteBpeTokenizer::bpe_word(std::string_view word, std::vector<int32_t>& out) const {
  // Symbols: the byte-mapped code points of the word, as UTF-8 ranges of `s`.
  std::string s;
  for (unsigned char b : word) ucd::append_utf8(byte_to_unicode(b), s);
  struct Sym {
    std::size_t begin, len;
    int prev, next;
  };
  std::vector<Sym> sym;
  for (std::size_t i = 0; i < s.size();) {
    std::size_t len = 1;
    while (i + len < s.size() && (static_cast<unsigned char>(s[i + len]) & 0xC0) == 0x80) ++len;
    sym.push_back({i, len, static_cast<int>(sym.size()) - 1, static_cast<int>(sym.size()) + 1});
    i += len;
  }
  sym.back().next = -1;
  struct Bigram {
    int32_t rank;
    int left, right;
    std::size_t size;  // combined length when queued: stale if it changed
  };
  auto worse = [](const Bigram& a, const Bigram& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.left > b.left;  // min rank, then leftmost
  };
  std::priority_queue<Bigram, std::vector<Bigram>, decltype(worse)> queue(worse);
  std::string key;
  auto push = [&](int l, int r) {
    if (l < 0 || r < 0) return;
    key.assign(s, sym[l].begin, sym[l].len);
    key.push_back(' ');
    key.append(s, sym[r].begin, sym[r].len);
    const auto it = ranks_.find(key);
    if (it != ranks_.end()) queue.push({it->second, l, r, sym[l].len + sym[r].len});
  };
  for (int i = 0; i + 1 < static_cast<int>(sym.size()); ++i) push(i, i + 1);
  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Sym& l = sym[b.left];
    if (l.len == 0 || l.next != b.right || sym[b.right].len == 0 || l.len + sym[b.right].len != b.size)
      continue;
    Sym& r = sym[b.right];
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = b.left;
    push(l.prev, b.left);
    push(b.left, l.next);
  }
  for (int i = 0; i >= 0; i = sym[i].next) {
    const std::string piece = s.substr(sym[i].begin, sym[i].len);
    const auto it = ids_.find(piece);
    if (it != ids_.end()) {
      out.push_back(it->second);
      continue;
    }
    // No token for the merged symbol: fall back to its single code points (bytes).
    for (std::size_t k = 0; k < piece.size();) {
      std::size_t len = 1;
      while (k + len < piece.size() && (static_cast<unsigned char>(piece[k + len]) & 0xC0) == 0x80) ++len;
      const auto one = ids_.find(piece.substr(k, len));
      ATTN_CHECK(one != ids_.end() || vocab_.unk_id >= 0, "bpe: no token for the byte symbol \"",
                 piece.substr(k, len), "\" and no unknown token");
      out.push_back(one != ids_.end() ? one->second : vocab_.unk_id);
      k += len;
    }
  }
}

std::vector<int32_t> ByteBpeTokenizer::encode(std::string_view text, bool add_bos, bool parse_special) const {
  std::vector<specials::ByteRange> allowed;
  if (parse_special) allowed.push_back({0, text.size()});
  return encode_split(text, allowed, add_bos);
}

std::vector<int32_t> ByteBpeTokenizer::encode(const TextPieces& pieces, bool add_bos) const {
  std::vector<specials::ByteRange> allowed;
  const std::string text = specials::join_pieces(pieces, allowed);
  return encode_split(text, allowed, add_bos);
}

std::vector<int32_t> ByteBpeTokenizer::encode_split(std::string_view text,
                                                    const std::vector<specials::ByteRange>& allowed,
                                                    bool add_bos) const {
  ucd::decode_utf8(text, "bpe: input text");  // validate: the error names the byte offset in `text`
  // Fragments: raw text ranges or special token ids, split one special at a time, longest first.
  const std::vector<specials::SpecialFrag> frags = specials::split_specials(
      text, specials_, allowed, [&](int32_t id) -> const std::string& { return vocab_.tokens[id]; },
      [&](int32_t id) { return vocab_.types[id] == BpeTokenType::user_defined; });
  std::vector<int32_t> ids;
  if (add_bos) {
    ATTN_CHECK(vocab_.bos_id >= 0, "bpe: add_bos requested but the vocabulary has no bos token");
    ids.push_back(vocab_.bos_id);
  }
  for (const specials::SpecialFrag& f : frags) {
    if (f.id >= 0) {
      ids.push_back(f.id);
      continue;
    }
    for (const std::string& w : pre_tokenize(text.substr(f.off, f.len))) bpe_word(w, ids);
  }
  return ids;
}

std::string ByteBpeTokenizer::decode(const std::vector<int32_t>& ids, bool render_special) const {
  std::string out;
  for (int32_t id : ids) {
    const std::string& t = id_to_token(id);
    const BpeTokenType ty = vocab_.types[static_cast<std::size_t>(id)];
    if (ty == BpeTokenType::control || ty == BpeTokenType::unknown) {
      if (render_special) out += t;
      continue;
    }
    if (ty == BpeTokenType::user_defined) {
      out += t;
      continue;
    }
    for (char32_t c : ucd::decode_utf8(t, "bpe: token text")) {
      const int b = unicode_to_byte(c);
      if (b >= 0) {
        out.push_back(static_cast<char>(b));
      } else {
        ucd::append_utf8(c, out);
      }
    }
  }
  return out;
}

}  // namespace attn::text
