// Hugging Face encoder folders and cross-encoders (rerankers) over BertModel (bert.h).
//
// A folder is config.json + weights (model.safetensors, or shards listed in model.safetensors.index.json;
// F32, F16 or BF16, widened to f32 at load) + a tokenizer:
//   - BERT (model_type "bert"): vocab.txt (with tokenizer_config.json), else tokenizer.json's WordPiece;
//   - XLM-RoBERTa (model_type "xlm-roberta": multilingual-e5, bge-m3, bge-reranker): tokenizer.json's
//     SentencePiece unigram (text/unigram.h), positions from pad_token_id + 1, one token type.
// The truncation limit is tokenizer_config.json's model_max_length, capped at the positions the model has.
//
// CrossEncoder: BertForSequenceClassification (ms-marco MiniLM cross-encoders) and
// XLMRobertaForSequenceClassification (bge-reranker) with num_labels 1. The pair is one sequence,
//   BERT:  [CLS] query [SEP] document [SEP]   token types 0 ... 0 1 ... 1 (the document and its [SEP])
//   XLM-R: <s> query </s> </s> document </s>   token type 0 throughout
// cut as Hugging Face's tokenizers cut a pair ("longest_first": when the pair is over the limit, the
// shorter text keeps its tokens if it fits in half the room, the longer one gets the rest; otherwise
// each gets half, the longer the odd token). The score is the head on the first token's vector:
//   BERT:  logit = classifier · tanh(pooler.dense · h_CLS)       (pooler.dense.*, classifier.*)
//   XLM-R: logit = out_proj · tanh(classifier.dense · h_<s>)     (classifier.dense.*, classifier.out_proj.*)
// (biases included; the same formula with two names). The relevance score is sigmoid(logit), as
// sentence-transformers' CrossEncoder and text-embeddings-inference give it, or the logit itself
// (RerankOptions::raw_scores).
#pragma once

#include <attn/core/tensor.h>
#include <attn/io/safetensors_set.h>
#include <attn/models/bert.h>
#include <attn/text/encoder_tokenizer.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace attn::models {

// What an encoder folder holds, read and checked (open_hf_encoder).
struct HfEncoderFolder {
  std::string dir;
  BertConfig config;
  std::vector<std::string> architectures;  // config.json's, e.g. "XLMRobertaForSequenceClassification"
  io::SafeTensorsSet weights;
  std::shared_ptr<const text::EncoderTokenizer> tokenizer;
  std::string tokenizer_file;  // vocab.txt or tokenizer.json
  int64_t max_length = 512;    // tokens of one sequence, specials included
  int64_t num_labels = 0;      // config.json's id2label size (num_labels when given); 0 when neither
  // A hash (hex) of config.json, every weight file's header and size, and the tokenizer file.
  std::string fingerprint;
  uint64_t hash = 0;  // the same as a number (what a loader extends with its own settings)
};

// True when `dir` is a folder with config.json and weights (model.safetensors or its index).
bool is_hf_encoder_folder(const std::string& dir);
// Reads the folder: config (bert.h: BertConfig::from_json), the weights' index (not the tensors) and the
// tokenizer. Throws attn::Error naming the file and what is supported (architecture, weight type,
// tokenizer model).
HfEncoderFolder open_hf_encoder(const std::string& dir);

// One query-document pair as the model reads it.
struct PairEncoding {
  std::vector<int32_t> ids, type_ids;
  bool truncated = false;
};

struct RerankOptions {
  int64_t batch_size = 32;  // pairs per forward pass, [1, 4096]
  bool raw_scores = false;  // the logit instead of sigmoid(logit)
};

struct RerankScores {
  std::vector<float> scores;        // one per document, in the documents' order
  std::vector<int64_t> num_tokens;  // tokens of each pair, specials included
  std::vector<bool> truncated;      // the pair was longer than max_seq_length() and was cut
  int64_t total_tokens = 0;
};

// The attention of one pair: per layer [1, H, L, L] exact probabilities, with the tokens' strings.
struct PairAttention {
  std::vector<std::string> tokens;
  std::vector<int32_t> type_ids;
  std::vector<Tensor> layers;
  float logit = 0;
  bool truncated = false;
};

class CrossEncoder {
 public:
  // A BertForSequenceClassification / XLMRobertaForSequenceClassification folder with one label.
  // Throws attn::Error naming what is missing or unsupported (another architecture, num_labels != 1, a
  // head tensor missing or mis-shaped).
  static CrossEncoder load(const std::string& dir);
  ~CrossEncoder();
  CrossEncoder(CrossEncoder&&) noexcept;
  CrossEncoder& operator=(CrossEncoder&&) noexcept;

  // The pair's ids and token types, cut to max_seq_length() (above). Throws on invalid UTF-8.
  PairEncoding encode_pair(std::string_view query, std::string_view document) const;
  // One logit per pair (batches of similar length; each pair 2..max_seq_length() ids of the vocabulary).
  std::vector<float> logits(const std::vector<PairEncoding>& pairs, int64_t batch_size = 32) const;
  // Scores of every document for the query, in the documents' order. Throws on an empty document list
  // (an empty string is a valid document) and on invalid UTF-8, naming the text.
  RerankScores score(std::string_view query, const std::vector<std::string>& documents,
                     const RerankOptions& options = {}) const;
  // The pair's attention (the exact kernel probabilities) and logit.
  PairAttention attention(std::string_view query, std::string_view document) const;

  const BertModel& model() const { return *model_; }
  const text::EncoderTokenizer& tokenizer() const { return *tokenizer_; }
  int64_t max_seq_length() const { return max_length_; }
  const std::string& name() const { return name_; }  // the folder's last component
  const std::string& dir() const { return dir_; }
  const std::string& architecture() const { return architecture_; }
  const std::string& fingerprint() const { return fingerprint_; }

 private:
  CrossEncoder() = default;
  struct Head;
  std::string dir_, name_, architecture_, fingerprint_;
  int64_t max_length_ = 512;
  std::shared_ptr<const BertModel> model_;
  std::shared_ptr<const text::EncoderTokenizer> tokenizer_;
  std::unique_ptr<Head> head_;
  void split_ids(std::string_view text, std::vector<int32_t>& out) const;
};

// The logistic function, as the relevance score is made from a logit.
float sigmoid(float logit);

}  // namespace attn::models
