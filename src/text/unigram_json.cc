// UnigramTokenizer::from_tokenizer_json: Hugging Face's tokenizer.json of an XLM-R-style
// SentencePiece-unigram model (include/attn/text/unigram.h).
#include <attn/core/error.h>
#include <attn/io/files.h>
#include <attn/io/json.h>
#include <attn/text/unigram.h>

#include <array>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "text/unicode_ucd.h"

namespace attn::text {
namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw Error(detail::concat("tokenizer.json: ", path, ": ", what));
}

// The "type" of a component object ("\"Unigram\""), else what the value is (null, an array, ...).
std::string type_of(const json::Value* v) {
  if (v == nullptr) return "nothing";
  if (v->is_object()) {
    const json::Value* t = v->find("type");
    return t != nullptr && t->is_string() ? "\"" + t->as_string() + "\"" : std::string("without a type");
  }
  return json::type_name(v->type());
}

// Standard base64 (RFC 4648, '=' padding, no line breaks) to bytes; throws on anything else.
std::string base64_decode(const std::string& in, const std::string& path, const char* field) {
  std::array<int, 256> val{};
  val.fill(-1);
  const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (int i = 0; i < 64; ++i) val[static_cast<unsigned char>(alphabet[i])] = i;
  if (in.size() % 4 != 0)
    fail(path, detail::concat(field, " is not base64: ", in.size(), " characters, not a multiple of 4"));
  std::string out;
  out.reserve(in.size() / 4 * 3);
  for (std::size_t i = 0; i < in.size(); i += 4) {
    int q[4];
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      const auto c = static_cast<unsigned char>(in[i + static_cast<std::size_t>(k)]);
      if (c == '=' && i + 4 == in.size() && k >= 2) {
        q[k] = 0;
        ++pad;
        continue;
      }
      if (val[c] < 0 || pad > 0)
        fail(path, detail::concat(field, " is not base64: character ", i + static_cast<std::size_t>(k),
                                  " is not in the alphabet"));
      q[k] = val[c];
    }
    const uint32_t v = (static_cast<uint32_t>(q[0]) << 18) | (static_cast<uint32_t>(q[1]) << 12) |
                       (static_cast<uint32_t>(q[2]) << 6) | static_cast<uint32_t>(q[3]);
    out += static_cast<char>(v >> 16);
    if (pad < 2) out += static_cast<char>((v >> 8) & 0xff);
    if (pad < 1) out += static_cast<char>(v & 0xff);
  }
  return out;
}

// SentencePiece's precompiled normalisation map: u32 trie_bytes, a darts-clone double-array trie of
// trie_bytes / 4 u32 units (keys: UTF-8 bytes), then the NUL-terminated replacement strings the leaves
// point into. Every key with its replacement, walked depth first; every index checked before use.
std::vector<std::pair<std::string, std::string>> charsmap_entries(const std::string& blob,
                                                                  const std::string& path) {
  const char* field = "normalizer Precompiled precompiled_charsmap";
  if (blob.size() < 4) fail(path, detail::concat(field, ": ", blob.size(), " bytes; expected at least 4"));
  uint32_t trie_bytes;
  std::memcpy(&trie_bytes, blob.data(), 4);
  if (trie_bytes % 4 != 0 || trie_bytes == 0 || trie_bytes > blob.size() - 4)
    fail(path, detail::concat(field, ": trie size ", trie_bytes,
                              " bytes; expected a positive multiple of 4 of at most ", blob.size() - 4));
  const std::size_t n = trie_bytes / 4;
  std::vector<uint32_t> units(n);
  std::memcpy(units.data(), blob.data() + 4, trie_bytes);
  const std::string_view strings(blob.data() + 4 + trie_bytes, blob.size() - 4 - trie_bytes);
  auto offset = [](uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); };
  auto label = [](uint32_t u) { return u & ((1u << 31) | 0xffu); };
  std::vector<std::pair<std::string, std::string>> out;
  struct Node {
    std::size_t pos;
    std::string key;
  };
  std::vector<Node> stack = {{0, std::string()}};
  // darts-clone shares common suffixes (a DAWG), so the keys may outnumber the units; a hostile
  // trie that loops or explodes stops at the depth and visit limits.
  std::size_t visited = 0;
  while (!stack.empty()) {
    Node node = std::move(stack.back());
    stack.pop_back();
    if (++visited > (std::size_t{1} << 24) || node.key.size() > 64)
      fail(path,
           detail::concat(field, ": the trie does not end (a cycle, keys over 64 bytes or over 16M nodes)"));
    const uint32_t u = units[node.pos];
    const std::size_t base = node.pos ^ offset(u);
    if ((u >> 8) & 1u) {  // has a leaf: its value is the offset of the replacement
      if (base >= n)
        fail(path, detail::concat(field, ": leaf unit ", base, " is outside the trie (", n, " units)"));
      const uint32_t v = units[base] & ((1u << 31) - 1);
      const std::size_t end = v < strings.size() ? strings.find('\0', v) : std::string_view::npos;
      if (end == std::string_view::npos)
        fail(path, detail::concat(field, ": replacement at offset ", v, " is outside the ", strings.size(),
                                  " bytes of strings or not NUL-terminated"));
      out.emplace_back(node.key, std::string(strings.substr(v, end - v)));
    }
    for (uint32_t c = 1; c < 256; ++c) {
      const std::size_t child = base ^ c;
      if (child < n && child != node.pos && label(units[child]) == c)
        stack.push_back({child, node.key + static_cast<char>(c)});
    }
  }
  return out;
}

const json::Value& member(const json::Value& obj, const char* key, const std::string& path,
                          const char* where) {
  const json::Value* v = obj.is_object() ? obj.find(key) : nullptr;
  if (v == nullptr) fail(path, detail::concat(where, ": missing \"", key, "\""));
  return *v;
}

bool is_type(const json::Value& v, const char* t) {
  const json::Value* x = v.is_object() ? v.find("type") : nullptr;
  return x != nullptr && x->is_string() && x->as_string() == t;
}

}  // namespace

UnigramTokenizer UnigramTokenizer::from_tokenizer_json(const std::string& path, int64_t max_length) {
  json::Value j;
  try {
    j = json::parse(io::read_file(path, "tokenizer.json"));
  } catch (const Error& e) {
    throw Error(detail::concat("tokenizer.json: ", path, ": ", e.what()));
  }
  if (!j.is_object()) fail(path, "expected a JSON object; got " + type_of(&j));
  UnigramSpec spec;
  spec.max_length = max_length;

  // ---- the model: Unigram, its vocabulary with scores ----
  const json::Value& model = member(j, "model", path, "the file");
  if (!is_type(model, "Unigram"))
    fail(path, "model type " + type_of(&model) +
                   " is not supported here; expected \"Unigram\" (SentencePiece unigram, as XLM-R)");
  if (const json::Value* b = model.find("byte_fallback"); b != nullptr && b->is_bool() && b->as_bool())
    fail(path, "model byte_fallback true is not supported (unknown characters become <unk>)");
  const json::Value& vocab = member(model, "vocab", path, "model");
  if (!vocab.is_array() || vocab.size() == 0)
    fail(path, "model vocab: expected a non-empty array of [piece, score]");
  spec.pieces.reserve(vocab.size());
  spec.scores.reserve(vocab.size());
  for (std::size_t i = 0; i < vocab.size(); ++i) {
    const json::Value& e = vocab.at(i);
    if (!e.is_array() || e.size() != 2 || !e.at(std::size_t{0}).is_string() ||
        !e.at(std::size_t{1}).is_number())
      fail(path, detail::concat("model vocab[", i, "]: expected [piece, score] (a string and a number)"));
    spec.pieces.push_back(e.at(std::size_t{0}).as_string());
    const double s = e.at(std::size_t{1}).as_double();
    if (!std::isfinite(s)) fail(path, detail::concat("model vocab[", i, "]: score is not finite"));
    spec.scores.push_back(static_cast<float>(s));
  }
  const auto V = static_cast<int64_t>(spec.pieces.size());
  const json::Value& unk = member(model, "unk_id", path, "model");
  if (!unk.is_integer() || unk.as_int64() < 0 || unk.as_int64() >= V)
    fail(path, detail::concat("model unk_id: expected an id in [0, ", V, "); got ", json::dump(unk)));
  spec.unk = static_cast<int32_t>(unk.as_int64());

  // ---- special tokens: <s>, <pad>, </s> by content among added_tokens, at their vocabulary ids ----
  auto special = [&](const char* content) -> int32_t {
    if (const json::Value* a = j.find("added_tokens"); a != nullptr && a->is_array())
      for (const json::Value& t : a->items()) {
        const json::Value* c = t.is_object() ? t.find("content") : nullptr;
        const json::Value* id = t.is_object() ? t.find("id") : nullptr;
        if (c == nullptr || !c->is_string() || c->as_string() != content) continue;
        if (id == nullptr || !id->is_integer() || id->as_int64() < 0 || id->as_int64() >= V)
          fail(path, detail::concat("added_tokens: ", content, " has id ", id ? json::dump(*id) : "none",
                                    "; expected an id in [0, ", V, ")"));
        if (spec.pieces[static_cast<std::size_t>(id->as_int64())] != content)
          fail(path, detail::concat("added_tokens: ", content, " has id ", id->as_int64(),
                                    ", but the vocabulary's piece there is \"",
                                    spec.pieces[static_cast<std::size_t>(id->as_int64())], "\""));
        return static_cast<int32_t>(id->as_int64());
      }
    fail(path, detail::concat("added_tokens: no ", content, " token; expected XLM-R's <s>, <pad>, </s>"));
  };
  spec.bos = special("<s>");
  spec.pad = special("<pad>");
  spec.eos = special("</s>");

  // ---- normalizer: Sequence [Precompiled, Replace " {2,}" -> " "] (XLM-R's), in that order ----
  const json::Value& norm = member(j, "normalizer", path, "the file");
  const char* want_norm =
      "; expected XLM-R's Sequence of Precompiled (the SentencePiece charsmap) and Replace \" {2,}\" -> \" "
      "\"";
  if (!is_type(norm, "Sequence"))
    fail(path, "normalizer " + type_of(&norm) + " is not supported" + want_norm);
  const json::Value& parts = member(norm, "normalizers", path, "normalizer");
  if (!parts.is_array() || parts.size() != 2 || !is_type(parts.at(std::size_t{0}), "Precompiled") ||
      !is_type(parts.at(std::size_t{1}), "Replace"))
    fail(path, std::string("normalizer: the sequence is not supported") + want_norm);
  {
    const json::Value& rep = parts.at(std::size_t{1});
    const json::Value& pat = member(rep, "pattern", path, "normalizer Replace");
    const json::Value* re = pat.is_object() ? pat.find("Regex") : nullptr;
    const json::Value& content = member(rep, "content", path, "normalizer Replace");
    if (re == nullptr || !re->is_string() || re->as_string() != " {2,}" || !content.is_string() ||
        content.as_string() != " ")
      fail(path, std::string("normalizer Replace: expected the pattern Regex \" {2,}\" and content \" \"") +
                     " (runs of spaces become one)");
  }
  const json::Value& cm =
      member(parts.at(std::size_t{0}), "precompiled_charsmap", path, "normalizer Precompiled");
  if (!cm.is_string()) fail(path, "normalizer Precompiled precompiled_charsmap: expected a base64 string");
  for (const auto& [key, value] : charsmap_entries(
           base64_decode(cm.as_string(), path, "normalizer Precompiled precompiled_charsmap"), path)) {
    std::u32string k, v;
    try {
      k = ucd::decode_utf8(key, "a key");
      v = ucd::decode_utf8(value, "a replacement");
    } catch (const Error& e) {
      fail(path, std::string("normalizer Precompiled precompiled_charsmap: ") + e.what());
    }
    if (k.size() == 1)
      spec.normalization.emplace_back(k[0], std::move(v));
    else if (k.size() >= 2 && key.size() < 6)  // whole graphemes under 6 bytes, as the normalizer reads them
      spec.sequence_normalization.emplace_back(k, std::move(v));
  }

  // ---- pre-tokenizer: Metaspace with the ▁ prefix ----
  const json::Value& pre = member(j, "pre_tokenizer", path, "the file");
  bool prefix = false;
  if (const json::Value* a = pre.is_object() ? pre.find("add_prefix_space") : nullptr; a && a->is_bool())
    prefix = a->as_bool();
  if (const json::Value* s = pre.is_object() ? pre.find("prepend_scheme") : nullptr; s && s->is_string())
    prefix = s->as_string() == "always";
  const json::Value* repl = pre.is_object() ? pre.find("replacement") : nullptr;
  const json::Value* split = pre.is_object() ? pre.find("split") : nullptr;
  if (!is_type(pre, "Metaspace") || repl == nullptr || !repl->is_string() ||
      repl->as_string() != "\xe2\x96\x81" || !prefix ||
      (split != nullptr && !(split->is_bool() && split->as_bool())))
    fail(path,
         "pre_tokenizer " + type_of(&pre) +
             " is not supported as given; expected Metaspace with replacement \xe2\x96\x81 (U+2581), the "
             "prefix always added and words split");

  // ---- post-processor: <s> A </s> ----
  const json::Value& post = member(j, "post_processor", path, "the file");
  bool template_ok = is_type(post, "TemplateProcessing");
  if (template_ok) {
    const json::Value* single = post.find("single");
    template_ok = single != nullptr && single->is_array() && single->size() == 3;
    const char* want[3] = {"<s>", "A", "</s>"};
    for (std::size_t i = 0; template_ok && i < 3; ++i) {
      const json::Value& e = single->at(i);
      const json::Value* body = e.is_object() ? e.find(i == 1 ? "Sequence" : "SpecialToken") : nullptr;
      const json::Value* id = body && body->is_object() ? body->find("id") : nullptr;
      template_ok = id != nullptr && id->is_string() && id->as_string() == want[i];
    }
  }
  if (!template_ok)
    fail(path, "post_processor " + type_of(&post) +
                   " is not supported as given; expected TemplateProcessing with single [<s>, A, </s>]");

  try {
    return UnigramTokenizer(std::move(spec));
  } catch (const Error& e) {
    throw Error(detail::concat("tokenizer.json: ", path, ": ", e.what()));
  }
}

}  // namespace attn::text
