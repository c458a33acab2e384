// Hugging Face encoder folders and the cross-encoder (include/attn/models/bert_rerank.h).
#include <attn/core/error.h>
#include <attn/core/random.h>
#include <attn/io/files.h>
#include <attn/io/finite.h>
#include <attn/io/json.h>
#include <attn/models/bert_rerank.h>
#include <attn/text/unigram.h>
#include <attn/text/wordpiece.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <numeric>

#include "models/bert_weights.h"

namespace attn::models {

using bert_detail::file_exists;

namespace {

json::Value read_json(const std::string& path, const char* what) {
  try {
    return json::parse(io::read_file(path, what));
  } catch (const Error& e) {
    throw Error(detail::concat(path, ": malformed JSON: ", e.what()));
  }
}

// tokenizer_config.json's model_max_length when it is a sane integer (the Hub's "no limit" is 1e30).
int64_t tokenizer_max_length(const std::string& dir, int64_t cap) {
  const std::string tc = dir + "/tokenizer_config.json";
  if (!file_exists(tc)) return cap;
  const json::Value cfg = read_json(tc, "tokenizer_config.json");
  const json::Value* v = cfg.is_object() ? cfg.find("model_max_length") : nullptr;
  if (v == nullptr || !v->is_integer() || v->as_int64() < 2) return cap;
  return std::min(v->as_int64(), cap);
}

std::string tokenizer_json_model(const json::Value& root) {
  const json::Value* m = root.is_object() ? root.find("model") : nullptr;
  const json::Value* t = m != nullptr && m->is_object() ? m->find("type") : nullptr;
  return t != nullptr && t->is_string() ? t->as_string() : std::string();
}

// vocab.txt for BERT when present (the WordPiece path all-MiniLM-L6-v2 always took), else tokenizer.json
// by its model type.
void load_tokenizer(HfEncoderFolder& f) {
  const std::string vocab = f.dir + "/vocab.txt", tj = f.dir + "/tokenizer.json";
  if (f.config.model_type == "bert" && file_exists(vocab)) {
    f.tokenizer = std::make_shared<text::WordPieceTokenizer>(text::WordPieceTokenizer::from_model_dir(f.dir));
    f.tokenizer_file = vocab;
    f.max_length = std::min(f.max_length,
                            static_cast<const text::WordPieceTokenizer&>(*f.tokenizer).options().max_length);
    return;
  }
  ATTN_CHECK(file_exists(tj), f.dir, " has no tokenizer; expected tokenizer.json",
             f.config.model_type == "bert" ? " or vocab.txt" : "", " (model_type \"", f.config.model_type,
             "\")");
  const std::string type = tokenizer_json_model(read_json(tj, "tokenizer.json"));
  f.tokenizer_file = tj;
  if (type == "WordPiece") {
    f.tokenizer = std::make_shared<text::WordPieceTokenizer>(
        text::WordPieceTokenizer::from_tokenizer_json(tj, f.max_length));
  } else if (type == "Unigram") {
    f.tokenizer = std::make_shared<text::UnigramTokenizer>(
        text::UnigramTokenizer::from_tokenizer_json(tj, f.max_length));
  } else {
    throw Error(detail::concat(tj, ": tokenizer model \"", type.empty() ? "(none)" : type,
                               "\" is not supported for encoders; supported: WordPiece (BERT) and Unigram "
                               "(XLM-RoBERTa's SentencePiece form)"));
  }
}

uint64_t folder_hash(const HfEncoderFolder& f) {
  uint64_t h = fnv1a64(io::read_file(f.dir + "/config.json", "config.json"));
  for (const io::SafeTensorsFile& file : f.weights.files()) {
    std::ifstream in(file.path(), std::ios::binary);
    std::string header(static_cast<std::size_t>(std::min<uint64_t>(file.header_size(), io::kMaxHeaderBytes)),
                       '\0');
    in.seekg(8);
    in.read(header.data(), static_cast<std::streamsize>(header.size()));
    h = fnv1a64(header, h);
    h = fnv1a64(std::to_string(static_cast<long long>(file.file_size())), h);
  }
  return fnv1a64(io::read_file(f.tokenizer_file, "tokenizer"), h);
}

std::string last_component(std::string id) {
  while (id.size() > 1 && id.back() == '/') id.pop_back();
  const std::size_t slash = id.find_last_of('/');
  return slash != std::string::npos && slash + 1 < id.size() ? id.substr(slash + 1) : id;
}

}  // namespace

bool is_hf_encoder_folder(const std::string& dir) {
  return file_exists(dir + "/config.json") && io::SafeTensorsSet::folder_has_weights(dir);
}

HfEncoderFolder open_hf_encoder(const std::string& dir) {
  HfEncoderFolder f;
  f.dir = dir;
  const std::string cfg_path = dir + "/config.json";
  ATTN_CHECK(file_exists(cfg_path), dir,
             " has no config.json; expected a Hugging Face model folder "
             "(config.json, model.safetensors or its shards, a tokenizer)");
  const json::Value cfg = read_json(cfg_path, "config.json");
  f.config = BertConfig::from_json(cfg, cfg_path);
  if (const json::Value* a = cfg.find("architectures"); a != nullptr && a->is_array())
    for (const json::Value& x : a->items())
      if (x.is_string()) f.architectures.push_back(x.as_string());
  if (const json::Value* n = cfg.find("num_labels"); n != nullptr && n->is_integer())
    f.num_labels = n->as_int64();
  else if (const json::Value* m = cfg.find("id2label"); m != nullptr && m->is_object())
    f.num_labels = static_cast<int64_t>(m->size());
  f.weights = io::SafeTensorsSet::open_folder(dir);
  f.max_length = tokenizer_max_length(dir, f.config.max_tokens());
  load_tokenizer(f);
  ATTN_CHECK(f.tokenizer->vocab_size() == f.config.vocab_size, "sentence encoder: ", f.tokenizer_file,
             " has ", f.tokenizer->vocab_size(), " tokens; ", cfg_path, " says vocab_size ",
             f.config.vocab_size, " (expected one embedding row per token)");
  f.hash = folder_hash(f);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(f.hash));
  f.fingerprint = hex;
  return f;
}

float sigmoid(float logit) { return static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(logit)))); }

// ---- cross-encoder -------------------------------------------------------------------------------

// logit = w2 · tanh(w1 · h + b1) + b2 over the first token's vector h.
struct CrossEncoder::Head {
  Tensor w1, b1, w2, b2;  // [C, C], [C], [1, C], [1]
  float logit(const float* h, int64_t C) const {
    const float* W1 = w1.data<float>();
    const float* B1 = b1.data<float>();
    const float* W2 = w2.data<float>();
    double out = b2.data<float>()[0];
    for (int64_t o = 0; o < C; ++o) {
      double a = B1[o];
      for (int64_t i = 0; i < C; ++i) a += static_cast<double>(W1[o * C + i]) * h[i];
      out += static_cast<double>(W2[o]) * std::tanh(a);
    }
    return static_cast<float>(out);
  }
};

namespace {

bool has_arch(const HfEncoderFolder& f, const char* name) {
  return std::find(f.architectures.begin(), f.architectures.end(), name) != f.architectures.end();
}

// The head's tensors by their names in the folder, checked against [C, C], [C], [1, C], [1].
Tensor head_tensor(const HfEncoderFolder& f, const std::string& name, const Shape& shape) {
  ATTN_CHECK(f.weights.contains(name), "cross-encoder: ", f.weights.source(), " has no tensor \"", name,
             "\" (the classification head of ", f.architectures.empty() ? "the model" : f.architectures[0],
             ")");
  const io::TensorInfo& info = f.weights.info(name);
  ATTN_CHECK(info.shape == shape, "cross-encoder: ", f.weights.source(), ": \"", name, "\" has shape ",
             shape_str(info.shape), "; expected ", shape_str(shape));
  Tensor t = f.weights.load(name);
  io::check_finite(t, "cross-encoder: " + f.weights.source() + ": tensor '" + name + "'");
  return t;
}

}  // namespace

CrossEncoder CrossEncoder::load(const std::string& dir) {
  HfEncoderFolder f = open_hf_encoder(dir);
  const bool bert = has_arch(f, "BertForSequenceClassification");
  const bool xlmr = has_arch(f, "XLMRobertaForSequenceClassification");
  std::string archs;
  for (const std::string& a : f.architectures) archs += (archs.empty() ? "" : ", ") + a;
  ATTN_CHECK(bert || xlmr, "cross-encoder: ", dir, "/config.json names ",
             archs.empty() ? "no architecture" : archs,
             "; a reranker is BertForSequenceClassification or XLMRobertaForSequenceClassification");
  ATTN_CHECK(f.num_labels == 1, "cross-encoder: ", dir, "/config.json has ", f.num_labels,
             " labels; a reranker scores with one (num_labels 1)");
  const int64_t C = f.config.hidden_size;
  CrossEncoder e;
  e.head_ = std::make_unique<Head>();
  if (bert) {
    const std::string p = f.weights.contains("bert.pooler.dense.weight") ? "bert." : "";
    e.head_->w1 = head_tensor(f, p + "pooler.dense.weight", {C, C});
    e.head_->b1 = head_tensor(f, p + "pooler.dense.bias", {C});
    e.head_->w2 = head_tensor(f, "classifier.weight", {1, C});
    e.head_->b2 = head_tensor(f, "classifier.bias", {1});
  } else {
    e.head_->w1 = head_tensor(f, "classifier.dense.weight", {C, C});
    e.head_->b1 = head_tensor(f, "classifier.dense.bias", {C});
    e.head_->w2 = head_tensor(f, "classifier.out_proj.weight", {1, C});
    e.head_->b2 = head_tensor(f, "classifier.out_proj.bias", {1});
  }
  e.architecture_ = bert ? "BertForSequenceClassification" : "XLMRobertaForSequenceClassification";
  e.model_ = std::make_shared<BertModel>(f.config, BertModel::weights_from_set(f.config, f.weights), dir);
  e.tokenizer_ = f.tokenizer;
  e.max_length_ = f.max_length;
  e.dir_ = dir;
  e.name_ = last_component(dir);
  e.fingerprint_ = f.fingerprint;
  return e;
}

CrossEncoder::~CrossEncoder() = default;
CrossEncoder::CrossEncoder(CrossEncoder&&) noexcept = default;
CrossEncoder& CrossEncoder::operator=(CrossEncoder&&) noexcept = default;

void CrossEncoder::split_ids(std::string_view text, std::vector<int32_t>& out) const {
  if (const auto* wp = dynamic_cast<const text::WordPieceTokenizer*>(tokenizer_.get()))
    out = wp->tokenize_ids(text);
  else if (const auto* u = dynamic_cast<const text::UnigramTokenizer*>(tokenizer_.get()))
    out = u->tokenize_ids(text);
  else
    throw Error("cross-encoder: the tokenizer is neither WordPiece nor unigram");
}

PairEncoding CrossEncoder::encode_pair(std::string_view query, std::string_view document) const {
  std::vector<int32_t> a, b;
  split_ids(query, a);
  split_ids(document, b);
  const auto* wp = dynamic_cast<const text::WordPieceTokenizer*>(tokenizer_.get());
  const int64_t added = wp != nullptr ? 3 : 4;
  const int64_t budget = std::max<int64_t>(0, max_length_ - added);
  PairEncoding p;
  auto n1 = static_cast<int64_t>(a.size()), n2 = static_cast<int64_t>(b.size());
  if (n1 + n2 > budget) {  // tokenizers' longest_first on the pair
    p.truncated = true;
    const bool swap = n1 > n2;
    int64_t s = swap ? n2 : n1, l;
    l = s > budget ? s : std::max(s, budget - s);
    if (s + l > budget) {
      s = budget / 2;
      l = s + budget % 2;
    }
    n1 = std::min(n1, swap ? l : s);
    n2 = std::min(n2, swap ? s : l);
    a.resize(static_cast<std::size_t>(n1));
    b.resize(static_cast<std::size_t>(n2));
  }
  if (wp != nullptr) {
    const int32_t cls = wp->token_to_id(wp->options().cls_token),
                  sep = wp->token_to_id(wp->options().sep_token);
    ATTN_CHECK(cls >= 0 && sep >= 0, "cross-encoder: the vocabulary lacks ", wp->options().cls_token, " or ",
               wp->options().sep_token);
    p.ids.push_back(cls);
    p.ids.insert(p.ids.end(), a.begin(), a.end());
    p.ids.push_back(sep);
    p.type_ids.assign(p.ids.size(), 0);
    p.ids.insert(p.ids.end(), b.begin(), b.end());
    p.ids.push_back(sep);
  } else {
    const auto& u = static_cast<const text::UnigramTokenizer&>(*tokenizer_);
    p.ids.push_back(u.bos_id());
    p.ids.insert(p.ids.end(), a.begin(), a.end());
    p.ids.push_back(u.eos_id());
    p.ids.push_back(u.eos_id());
    p.ids.insert(p.ids.end(), b.begin(), b.end());
    p.ids.push_back(u.eos_id());
  }
  // Type 1 for the document and its end token where the model has a second type (BERT); 0 otherwise.
  const int32_t second = model_->config().type_vocab_size > 1 && wp != nullptr ? 1 : 0;
  p.type_ids.resize(p.ids.size(), second);
  return p;
}

std::vector<float> CrossEncoder::logits(const std::vector<PairEncoding>& pairs, int64_t batch_size) const {
  ATTN_CHECK(batch_size >= 1 && batch_size <= 4096, "rerank: batch_size must be in [1, 4096]; got ",
             batch_size);
  const auto N = static_cast<int64_t>(pairs.size());
  const int64_t C = model_->config().hidden_size;
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    const auto n = static_cast<int64_t>(pairs[i].ids.size());
    ATTN_CHECK(n >= 2 && n <= max_length_, "rerank: pair ", i, " has ", n, " tokens; expected 2 to ",
               max_length_, " (max_seq_length)");
  }
  std::vector<int64_t> order(pairs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) {
    return pairs[static_cast<std::size_t>(x)].ids.size() > pairs[static_cast<std::size_t>(y)].ids.size();
  });
  std::vector<float> out(pairs.size());
  for (int64_t s = 0, n = 0; s < N; s += n) {
    const auto longest =
        static_cast<int64_t>(pairs[static_cast<std::size_t>(order[static_cast<std::size_t>(s)])].ids.size());
    n = std::min({batch_size, N - s, std::max<int64_t>(1, BertModel::kMaxTokensPerCall / longest)});
    BertInput in;
    for (int64_t i = 0; i < n; ++i) {
      const PairEncoding& p = pairs[static_cast<std::size_t>(order[static_cast<std::size_t>(s + i)])];
      in.ids.push_back(p.ids);
      in.type_ids.push_back(p.type_ids);
    }
    BertRunOptions ro;
    ro.first_token_only = true;  // the head reads the first token's vector: hidden is [n, 1, C]
    const BertOutput r = model_->forward(in, ro);
    const int64_t L = r.hidden.size(1);
    for (int64_t i = 0; i < n; ++i)
      out[static_cast<std::size_t>(order[static_cast<std::size_t>(s + i)])] =
          head_->logit(r.hidden.data<float>() + i * L * C, C);
  }
  return out;
}

RerankScores CrossEncoder::score(std::string_view query, const std::vector<std::string>& documents,
                                 const RerankOptions& options) const {
  ATTN_CHECK(!documents.empty(),
             "rerank: no documents given; expected at least one (an empty string is a "
             "valid document)");
  RerankScores r;
  std::vector<PairEncoding> pairs;
  for (std::size_t i = 0; i < documents.size(); ++i) {
    try {
      pairs.push_back(encode_pair(query, documents[i]));
    } catch (const Error& e) {
      throw Error(detail::concat("rerank: the query or documents[", i, "]: ", e.what()));
    }
    r.num_tokens.push_back(static_cast<int64_t>(pairs.back().ids.size()));
    r.truncated.push_back(pairs.back().truncated);
    r.total_tokens += r.num_tokens.back();
  }
  r.scores = logits(pairs, options.batch_size);
  if (!options.raw_scores)
    for (float& s : r.scores) s = sigmoid(s);
  return r;
}

PairAttention CrossEncoder::attention(std::string_view query, std::string_view document) const {
  const PairEncoding p = encode_pair(query, document);
  BertInput in;
  in.ids = {p.ids};
  in.type_ids = {p.type_ids};
  BertRunOptions ro;
  ro.capture_attention = true;
  BertOutput r = model_->forward(in, ro);
  PairAttention a;
  for (const int32_t id : p.ids) a.tokens.push_back(tokenizer_->id_to_token(id));
  a.type_ids = p.type_ids;
  a.layers = std::move(r.attention);
  a.logit = head_->logit(r.hidden.data<float>(), model_->config().hidden_size);
  a.truncated = p.truncated;
  return a;
}

}  // namespace attn::models
