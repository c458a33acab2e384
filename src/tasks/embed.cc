// Sentence embeddings as tasks: embed (json / npy / csv), similarity, and search
// over a corpus with its vectors cached (include/attn/tasks/embed.h).
#include <attn/core/error.h>
#include <attn/io/files.h>
#include <attn/io/finite.h>
#include <attn/io/json.h>
#include <attn/io/safetensors.h>
#include <attn/tasks/embed.h>
#include <attn/text/utf8.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string_view>
#include <utility>

namespace attn::tasks {
namespace {

// Shortest decimal that reads back as the same float.
std::string float_str(float v) {
  char buf[32];
  for (int p = 6; p <= 9; ++p) {
    std::snprintf(buf, sizeof buf, "%.*g", p, static_cast<double>(v));
    if (std::strtof(buf, nullptr) == v) break;
  }
  return buf;
}

// The first 40 bytes of a text for a note, never cutting a UTF-8 sequence.
std::string shown_prefix(const std::string& text) {
  if (text.size() <= 40) return text;
  return text.substr(0, text::complete_utf8_prefix(std::string_view(text).substr(0, 40))) + "...";
}

void note_truncated(const NoteFn& note, const std::vector<std::string>& texts, const models::Embeddings& e,
                    const models::SentenceEncoder& enc) {
  if (!note) return;
  for (std::size_t i = 0; i < texts.size(); ++i)
    if (e.truncated[i])
      note("note: text " + std::to_string(i + 1) + " (\"" + shown_prefix(texts[i]) + "\") is longer than " +
           std::to_string(enc.max_seq_length()) + " tokens and was truncated");
}

std::string hex64(uint64_t h) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::string base_name(const std::string& p) {
  const auto s = p.find_last_of('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

// The cache file: "<corpus>.<model fingerprint>.attn-emb" next to the corpus or in cache_dir.
std::string cache_path(const std::string& corpus, const std::string& cache_dir,
                       const std::string& fingerprint) {
  if (cache_dir.empty()) return corpus + "." + fingerprint + ".attn-emb";
  return cache_dir + "/" + base_name(corpus) + "." + hex64(models::fnv1a64(corpus)) + "." + fingerprint +
         ".attn-emb";
}

// FNV-1a 64 over the cache's vectors, seeded with its model, corpus hash and line count.
std::string cache_checksum(std::span<const std::byte> vectors, const std::string& fingerprint,
                           const std::string& corpus_hash, const std::string& lines) {
  const uint64_t seed = models::fnv1a64(fingerprint + "\n" + corpus_hash + "\n" + lines);
  return hex64(
      models::fnv1a64(std::string_view(reinterpret_cast<const char*>(vectors.data()), vectors.size()), seed));
}

// Embeddings about to be printed, written or scored: a NaN or inf is an error, never output.
void check_vectors(const Tensor& v, const std::string& what) {
  io::check_finite(v, what +
                          " (rows are texts, columns dimensions; the model's weights or the input "
                          "produced it)");
}

// The cached vectors when the cache matches the corpus hash, the model and the line count; else
// an undefined tensor (and `why` says what was stale).
Tensor read_cache(const std::string& path, const std::string& corpus_hash, const std::string& fingerprint,
                  int64_t count, int64_t dim, std::string& why) {
  struct stat sb {};
  if (::stat(path.c_str(), &sb) != 0) {
    why = "no cache yet";
    return Tensor();
  }
  try {
    const io::SafeTensorsFile f = io::SafeTensorsFile::open(path);
    const io::Metadata& m = f.metadata();
    auto get = [&](const char* k) {
      const auto it = m.find(k);
      return it == m.end() ? std::string() : it->second;
    };
    if (get("format") != kSearchCacheFormat) {
      why = "unknown cache format";
      return Tensor();
    }
    if (get("model") != fingerprint) {
      why = "made with another model";
      return Tensor();
    }
    if (get("corpus_fnv1a64") != corpus_hash) {
      why = "the corpus changed since it was made";
      return Tensor();
    }
    const Tensor v = f.load("embeddings");
    if (v.shape() != Shape{count, dim}) {
      why = "its shape does not match the corpus";
      return Tensor();
    }
    if (get("checksum").empty()) {
      why = "it has no checksum (made by an older attn)";
      return Tensor();
    }
    const std::string sum = cache_checksum(f.bytes("embeddings"), fingerprint, corpus_hash, get("lines"));
    if (get("checksum") != sum) {
      why = "it is corrupt (checksum " + sum + ", recorded " + get("checksum") + ")";
      return Tensor();
    }
    if (io::first_non_finite(v.contiguous().data<float>(), v.numel()) >= 0) {
      why = "it holds a non-finite value";
      return Tensor();
    }
    return v;
  } catch (const Error& e) {
    why = std::string("unreadable (") + e.what() + ")";
    return Tensor();
  }
}

// The corpus vectors [N, dim]: from the cache when it is current, else embedded now
// (and cached unless use_cache is off; a cache that cannot be written is a note).
Tensor corpus_vectors(const SearchOptions& o, const models::SentenceEncoder& enc, const std::string& bytes,
                      const std::vector<Line>& lines) {
  const auto N = static_cast<int64_t>(lines.size());
  const std::string corpus_hash = hex64(models::fnv1a64(bytes));
  const std::string cpath = o.use_cache ? cache_path(o.corpus, o.cache_dir, enc.fingerprint()) : "";
  Tensor vecs;
  if (!cpath.empty()) {
    std::string why;
    vecs = read_cache(cpath, corpus_hash, enc.fingerprint(), N, enc.dim(), why);
    if (vecs.defined()) return vecs;
    if (o.note) o.note("embedding " + std::to_string(N) + " corpus lines (" + cpath + ": " + why + ")");
  }
  std::vector<std::string> texts;
  for (const auto& l : lines) texts.push_back(l.text);
  models::EmbedOptions eo;
  eo.role = models::TextRole::passage;  // e5: "passage: " for the documents searched
  const models::Embeddings e = enc.embed(texts, eo);
  vecs = e.vectors.contiguous();
  check_vectors(vecs, "search: the corpus embeddings");
  std::size_t mostly_unknown = 0;
  for (double u : e.unknown_share) mostly_unknown += u >= models::kMostlyUnknownShare ? 1 : 0;
  if (mostly_unknown > 0 && o.note)
    o.note(
        "warning: " + std::to_string(mostly_unknown) + " of " + std::to_string(N) +
        " corpus lines are mostly unknown pieces (" + enc.tokenizer().id_to_token(enc.tokenizer().unk_id()) +
        ") for " + enc.name() + ": the model does not read them" +
        (enc.name() == "multilingual-e5-small" ? "" : " (for Chinese and other languages try --model e5)"));
  if (!cpath.empty()) {
    try {
      const std::span<const std::byte> raw(static_cast<const std::byte*>(vecs.raw_data()),
                                           static_cast<std::size_t>(vecs.numel()) * sizeof(float));
      io::save_safetensors(
          cpath, {{"embeddings", vecs}},
          {{"format", kSearchCacheFormat},
           {"model", enc.fingerprint()},
           {"corpus_fnv1a64", corpus_hash},
           {"corpus", o.corpus},
           {"lines", std::to_string(N)},
           {"checksum", cache_checksum(raw, enc.fingerprint(), corpus_hash, std::to_string(N))}});
      if (o.note) o.note("cached the corpus embeddings in " + cpath);
    } catch (const Error& err) {
      if (o.note)
        o.note(std::string("note: could not write the cache (") + err.what() + "); continuing without it");
    }
  }
  return vecs;
}

}  // namespace

const models::SentenceEncoder& load_encoder(const std::string& model) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<models::SentenceEncoder>> cache;
  const bool e5 = model == "e5" || model == "multilingual-e5-small";
  const std::string key = e5 ? "e5" : (model == "minilm" || model == "all-MiniLM-L6-v2") ? "" : model;
  const std::lock_guard<std::mutex> lock(mu);
  auto& slot = cache[key];
  if (!slot)
    slot = std::make_unique<models::SentenceEncoder>(e5 ? models::SentenceEncoder::load_e5()
                                                        : models::SentenceEncoder::load(key));
  return *slot;
}

NamedEncoder find_encoder(const std::string& name_or_dir) {
  if (name_or_dir.empty() || name_or_dir == "minilm" || name_or_dir == "all-MiniLM-L6-v2")
    return {"all-MiniLM-L6-v2", &load_encoder("")};
  if (name_or_dir == "e5" || name_or_dir == "multilingual-e5-small")
    return {"multilingual-e5-small", &load_encoder("e5")};
  std::string id = name_or_dir;
  while (id.size() > 1 && id.back() == '/') id.pop_back();
  const std::size_t slash = id.find_last_of('/');
  if (slash != std::string::npos && slash + 1 < id.size()) id = id.substr(slash + 1);
  return {id, &load_encoder(name_or_dir)};
}

void note_unknown(const std::function<void(const std::string&)>& note, const std::vector<std::string>& texts,
                  const std::vector<double>& unknown_share, const models::SentenceEncoder& enc) {
  if (!note) return;
  for (std::size_t i = 0; i < texts.size() && i < unknown_share.size(); ++i) {
    if (unknown_share[i] < models::kMostlyUnknownShare) continue;
    char pct[16];
    std::snprintf(pct, sizeof pct, "%.0f%%", 100.0 * unknown_share[i]);
    note("warning: text " + std::to_string(i + 1) + " (\"" + shown_prefix(texts[i]) + "\") is " + pct +
         " unknown pieces (" + enc.tokenizer().id_to_token(enc.tokenizer().unk_id()) + ") for " + enc.name() +
         ": the model does not read most of it" +
         (enc.name() == "multilingual-e5-small" ? "" : " (for Chinese and other languages try --model e5)"));
  }
}

std::vector<Line> nonempty_lines(std::string_view text) {
  std::vector<Line> out;
  std::size_t start = 0;
  int64_t number = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    ++number;
    std::string line(text.substr(start, end - start));
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") != std::string::npos) out.push_back({number, line});
    start = end + 1;
  }
  return out;
}

std::vector<std::string> texts_from_lines(std::string_view bytes, const std::string& what) {
  std::vector<std::string> texts;
  for (auto& l : nonempty_lines(bytes)) texts.push_back(std::move(l.text));
  ATTN_CHECK(!texts.empty(), what, " has no non-empty lines; expected one text per line");
  return texts;
}

double cosine(const float* a, const float* b, int64_t n) {
  double d = 0, na = 0, nb = 0;
  for (int64_t i = 0; i < n; ++i)
    d += double(a[i]) * b[i], na += double(a[i]) * a[i], nb += double(b[i]) * b[i];
  return na > 0 && nb > 0 ? d / std::sqrt(na * nb) : 0.0;
}

EmbedFormat parse_embed_format(const std::string& name) {
  if (name == "json") return EmbedFormat::json;
  if (name == "npy") return EmbedFormat::npy;
  ATTN_CHECK(name == "csv", "--format must be json, npy or csv; got '", name, "'");
  return EmbedFormat::csv;
}

std::string npy_bytes(const Tensor& v) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::to_string(v.size(0)) +
                       ", " + std::to_string(v.size(1)) + "), }";
  // magic (6) + version (2) + length (2) + header, padded with spaces to a multiple of 64, ending in '\n'.
  const std::size_t total = (10 + header.size() + 1 + 63) / 64 * 64;
  header.append(total - 10 - header.size() - 1, ' ');
  header += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  const Tensor c = v.contiguous();
  const float* p = c.data<float>();
  out.append(reinterpret_cast<const char*>(p), static_cast<std::size_t>(c.numel()) * sizeof(float));
  return out;
}

std::string csv_text(const Tensor& v) {
  std::string out;
  const Tensor c = v.contiguous();
  const float* p = c.data<float>();
  for (int64_t i = 0; i < c.size(0); ++i) {
    for (int64_t k = 0; k < c.size(1); ++k) {
      if (k) out += ',';
      out += float_str(p[i * c.size(1) + k]);
    }
    out += '\n';
  }
  return out;
}

std::string embeddings_json(const models::SentenceEncoder& enc, const std::vector<std::string>& texts,
                            const models::Embeddings& e) {
  std::string out = "{\"model\": ";
  json::write_string(out, enc.dir());
  out += ", \"dim\": " + std::to_string(enc.dim()) +
         ", \"max_seq_length\": " + std::to_string(enc.max_seq_length()) +
         ", \"count\": " + std::to_string(texts.size()) + ",\n \"items\": [";
  const Tensor c = e.vectors.contiguous();
  const float* p = c.data<float>();
  for (std::size_t i = 0; i < texts.size(); ++i) {
    out += i ? ",\n  {\"text\": " : "\n  {\"text\": ";
    json::write_string(out, texts[i]);
    out += ", \"tokens\": " + std::to_string(e.num_tokens[i]) +
           ", \"truncated\": " + (e.truncated[i] ? "true" : "false") + ", \"embedding\": [";
    for (int64_t k = 0; k < enc.dim(); ++k) {
      if (k) out += ',';
      out += float_str(p[static_cast<int64_t>(i) * enc.dim() + k]);
    }
    out += "]}";
  }
  out += "\n ]}\n";
  return out;
}

std::string embed(const EmbedOptions& o) {
  const models::SentenceEncoder& enc = load_encoder(o.model);
  models::EmbedOptions eo;
  eo.batch_size = o.batch_size;
  eo.role = o.role;
  const models::Embeddings e = enc.embed(o.texts, eo);
  check_vectors(e.vectors, "embed: the embeddings");
  note_truncated(o.note, o.texts, e, enc);
  note_unknown(o.note, o.texts, e.unknown_share, enc);
  switch (o.format) {
    case EmbedFormat::npy:
      return npy_bytes(e.vectors);
    case EmbedFormat::csv:
      return csv_text(e.vectors);
    case EmbedFormat::json:
      break;
  }
  return embeddings_json(enc, o.texts, e);
}

double similarity(const SimilarityOptions& o) {
  const models::SentenceEncoder& enc = load_encoder(o.model);
  const std::vector<std::string> texts = {o.a, o.b};
  models::EmbedOptions eo;
  eo.role = o.role;
  const models::Embeddings e = enc.embed(texts, eo);
  check_vectors(e.vectors, "similarity: the embeddings");
  note_truncated(o.note, texts, e, enc);
  note_unknown(o.note, texts, e.unknown_share, enc);
  const Tensor c = e.vectors.contiguous();
  const float* p = c.data<float>();
  const double sim = cosine(p, p + enc.dim(), enc.dim());
  ATTN_CHECK(std::isfinite(sim), "similarity: the cosine is ", sim, "; expected a finite value");
  return sim;
}

std::vector<SearchHit> search(const SearchOptions& o) {
  ATTN_CHECK(o.top_k >= 1, "search: top_k must be at least 1; got ", o.top_k);
  const std::string bytes = io::read_file(o.corpus, "corpus");
  const std::vector<Line> lines = nonempty_lines(bytes);
  ATTN_CHECK(!lines.empty(), "corpus '", o.corpus, "' has no non-empty lines; expected one text per line");
  const models::SentenceEncoder& enc = load_encoder(o.model);
  const auto N = static_cast<int64_t>(lines.size());
  const Tensor vecs = corpus_vectors(o, enc, bytes, lines).contiguous();
  const std::vector<std::string> query = {o.query};
  models::EmbedOptions qo;
  qo.role = models::TextRole::query;
  const models::Embeddings q = enc.embed(query, qo);
  check_vectors(q.vectors, "search: the query embedding");
  note_truncated(o.note, query, q, enc);
  note_unknown(o.note, query, q.unknown_share, enc);
  const Tensor qc = q.vectors.contiguous();
  const float* qp = qc.data<float>();
  const float* vp = vecs.data<float>();
  std::vector<std::pair<double, int64_t>> scored;
  for (int64_t i = 0; i < N; ++i) scored.push_back({cosine(qp, vp + i * enc.dim(), enc.dim()), i});
  const auto k = static_cast<std::size_t>(std::min<int64_t>(o.top_k, N));
  std::partial_sort(scored.begin(), scored.begin() + static_cast<std::ptrdiff_t>(k), scored.end(),
                    [](const auto& a, const auto& b) {
                      return a.first > b.first || (a.first == b.first && a.second < b.second);
                    });
  std::vector<SearchHit> hits;
  for (std::size_t r = 0; r < k; ++r) {
    const Line& l = lines[static_cast<std::size_t>(scored[r].second)];
    hits.push_back({scored[r].first, l.number, l.text});
  }
  return hits;
}

std::string format_hits(const std::vector<SearchHit>& hits) {
  std::string out;
  char buf[64];
  for (std::size_t r = 0; r < hits.size(); ++r) {
    std::snprintf(buf, sizeof buf, "%zu. %.4f  line %lld: ", r + 1, hits[r].score,
                  static_cast<long long>(hits[r].line));
    out += buf + hits[r].text + "\n";
  }
  return out;
}

}  // namespace attn::tasks
