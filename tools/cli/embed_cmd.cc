// `attn embed`, `attn similarity` and `attn search`: sentence embeddings from
// all-MiniLM-L6-v2 (include/attn/models/bert.h). See docs/models.md.
#include <attn/core/error.h>
#include <attn/core/parallel.h>
#include <attn/core/precision.h>
#include <attn/io/files.h>
#include <attn/io/json.h>
#include <attn/io/safetensors.h>
#include <attn/models/bert.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "args.h"
#include "commands.h"
#include "encoder_cli.h"

namespace attn::cli {

// ============================================================================
// shared helpers (encoder_cli.h)
// ============================================================================
namespace encoder {

SplitArgs split_args(const std::vector<std::string>& raw, const std::vector<OptionSpec>& specs) {
  SplitArgs s;
  bool rest = false;
  for (std::size_t i = 0; i < raw.size(); ++i) {
    const std::string& a = raw[i];
    if (rest || a == "-" || a.empty() || a[0] != '-') {
      s.positionals.push_back(a);
    } else if (a == "--") {
      rest = true;
    } else if (a == "-o") {
      ATTN_CHECK(i + 1 < raw.size(), "option -o needs a value (FILE); got nothing after it");
      s.options.push_back("--output");
      s.options.push_back(raw[++i]);
    } else {
      s.options.push_back(a);
      if (a.size() > 2 && a.find('=') == std::string::npos)
        for (const auto& o : specs)
          if ("--" + o.name == a && !o.metavar.empty() && i + 1 < raw.size()) s.options.push_back(raw[++i]);
    }
  }
  return s;
}

const models::SentenceEncoder& load_encoder(const std::string& dir) {
  static std::map<std::string, std::unique_ptr<models::SentenceEncoder>> cache;
  auto& slot = cache[dir];
  if (!slot) slot = std::make_unique<models::SentenceEncoder>(models::SentenceEncoder::load(dir));
  return *slot;
}

std::vector<Line> nonempty_lines(const std::string& text) {
  std::vector<Line> out;
  std::size_t start = 0;
  int64_t number = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    ++number;
    std::string line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") != std::string::npos) out.push_back({number, line});
    start = end + 1;
  }
  return out;
}

std::string float_str(float v) {
  char buf[32];
  for (int p = 6; p <= 9; ++p) {
    std::snprintf(buf, sizeof buf, "%.*g", p, static_cast<double>(v));
    if (std::strtof(buf, nullptr) == v) break;
  }
  return buf;
}

}  // namespace encoder

namespace {

using encoder::float_str;

// ============================================================================
// attn embed
// ============================================================================
const std::vector<OptionSpec>& embed_options() {
  static const std::vector<OptionSpec> specs = {
      {"file", "FILE", "embed each non-empty line of FILE (instead of texts on the command line)"},
      {"format", "FMT", "json (default), npy (float32 [N, 384]) or csv (one row per text)"},
      {"output", "FILE", "write to FILE (also -o FILE), atomically; default: standard output"},
      {"model", "DIR", "a BERT sentence-encoder folder (default: all-MiniLM-L6-v2, found automatically)"},
      {"batch-size", "N", "sentences per forward pass (default 32)"},
      {"threads", "N", "threads (default: ATTN_NUM_THREADS or all cores)"},
      {"precision", "P", "matrix products: fp32 (default) or bf16 (AVX512_BF16; ~2x faster, bf16 inputs)"},
      {"help", "", "this text"},
  };
  return specs;
}

std::string embed_help() {
  return "usage: attn embed TEXT... [--format json|npy|csv] [-o FILE]\n"
         "       attn embed --file FILE [...]      one text per non-empty line\n"
         "       attn embed - [...]                one text per non-empty line of standard input\n\n"
         "Sentence embeddings from all-MiniLM-L6-v2 (384 numbers per text, unit length; the\n"
         "same vectors as sentence-transformers). Texts longer than 256 tokens are truncated,\n"
         "as sentence-transformers does, and a note on standard error says which.\n\n"
         "Options:\n" +
         format_options(embed_options()) +
         "\nExamples:\n"
         "  attn embed \"A man is eating food.\" \"A man is riding a horse.\"\n"
         "  attn embed --file sentences.txt --format npy -o vectors.npy\n";
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
  const float* p = v.data<float>();
  out.append(reinterpret_cast<const char*>(p), static_cast<std::size_t>(v.numel()) * sizeof(float));
  return out;
}

std::string csv_text(const Tensor& v) {
  std::string out;
  const float* p = v.data<float>();
  for (int64_t i = 0; i < v.size(0); ++i) {
    for (int64_t c = 0; c < v.size(1); ++c) {
      if (c) out += ',';
      out += float_str(p[i * v.size(1) + c]);
    }
    out += '\n';
  }
  return out;
}

std::string json_text(const models::SentenceEncoder& enc, const std::vector<std::string>& texts,
                      const models::Embeddings& e) {
  std::string out = "{\"model\": ";
  json::write_string(out, enc.dir());
  out += ", \"dim\": " + std::to_string(enc.dim()) +
         ", \"max_seq_length\": " + std::to_string(enc.max_seq_length()) +
         ", \"count\": " + std::to_string(texts.size()) + ",\n \"items\": [";
  const float* p = e.vectors.data<float>();
  for (std::size_t i = 0; i < texts.size(); ++i) {
    out += i ? ",\n  {\"text\": " : "\n  {\"text\": ";
    json::write_string(out, texts[i]);
    out += ", \"tokens\": " + std::to_string(e.num_tokens[i]) +
           ", \"truncated\": " + (e.truncated[i] ? "true" : "false") + ", \"embedding\": [";
    for (int64_t c = 0; c < enc.dim(); ++c) {
      if (c) out += ',';
      out += float_str(p[static_cast<int64_t>(i) * enc.dim() + c]);
    }
    out += "]}";
  }
  out += "\n ]}\n";
  return out;
}

void apply_threads(const Args& opts) {
  if (opts.has("threads")) set_num_threads(static_cast<int>(opts.integer("threads", 1, 1024)));
  if (opts.has("precision")) set_matmul_precision(parse_matmul_precision(opts.str("precision")));
}

std::vector<std::string> texts_from_lines(const std::string& bytes, const std::string& what) {
  std::vector<std::string> texts;
  for (auto& l : encoder::nonempty_lines(bytes)) texts.push_back(std::move(l.text));
  ATTN_CHECK(!texts.empty(), what, " has no non-empty lines; expected one text per line");
  return texts;
}

void note_truncated(const char* cmd, const std::vector<std::string>& texts, const models::Embeddings& e,
                    const models::SentenceEncoder& enc) {
  for (std::size_t i = 0; i < texts.size(); ++i)
    if (e.truncated[i]) {
      const std::string head = texts[i].substr(0, 40);
      std::fprintf(stderr,
                   "attn %s: note: text %zu (\"%s%s\") is longer than %lld tokens and was truncated\n", cmd,
                   i + 1, head.c_str(), texts[i].size() > 40 ? "..." : "",
                   static_cast<long long>(enc.max_seq_length()));
    }
}

}  // namespace

int run_embed(const std::vector<std::string>& raw) {
  const encoder::SplitArgs sa = encoder::split_args(raw, embed_options());
  const Args opts(sa.options, embed_options());
  if (opts.has("help")) {
    std::fputs(embed_help().c_str(), stdout);
    return 0;
  }
  const std::string format = opts.has("format") ? opts.str("format") : "json";
  ATTN_CHECK(format == "json" || format == "npy" || format == "csv",
             "--format must be json, npy or csv; got '", format, "'");
  std::vector<std::string> texts;
  const bool from_stdin = sa.positionals.size() == 1 && sa.positionals[0] == "-";
  if (opts.has("file")) {
    ATTN_CHECK(sa.positionals.empty(), "give texts on the command line or --file FILE, not both");
    texts = texts_from_lines(io::read_file(opts.str("file"), "text file"), "'" + opts.str("file") + "'");
  } else if (from_stdin) {
    std::stringstream ss;
    ss << std::cin.rdbuf();
    texts = texts_from_lines(ss.str(), "standard input");
  } else {
    texts = sa.positionals;
    ATTN_CHECK(!texts.empty(), "no texts given; expected TEXT..., --file FILE or - (standard input)");
  }
  const bool to_file = opts.has("output");
  ATTN_CHECK(format != "npy" || to_file || !::isatty(STDOUT_FILENO),
             "--format npy writes binary data; give -o FILE or redirect standard output");
  apply_threads(opts);
  const models::SentenceEncoder& enc = encoder::load_encoder(opts.has("model") ? opts.str("model") : "");
  models::EmbedOptions eo;
  if (opts.has("batch-size")) eo.batch_size = opts.integer("batch-size", 1, 4096);
  const models::Embeddings e = enc.embed(texts, eo);
  note_truncated("embed", texts, e, enc);
  const std::string data = format == "npy"   ? npy_bytes(e.vectors)
                           : format == "csv" ? csv_text(e.vectors)
                                             : json_text(enc, texts, e);
  if (to_file) {
    io::write_file_atomically(opts.str("output"), data);
    std::fprintf(stderr, "wrote %s (%zu texts, %s)\n", opts.str("output").c_str(), texts.size(),
                 format.c_str());
  } else {
    std::fwrite(data.data(), 1, data.size(), stdout);
  }
  return 0;
}

// ============================================================================
// attn similarity
// ============================================================================
namespace {

const std::vector<OptionSpec>& similarity_options() {
  static const std::vector<OptionSpec> specs = {
      {"model", "DIR", "a BERT sentence-encoder folder (default: all-MiniLM-L6-v2)"},
      {"threads", "N", "threads (default: ATTN_NUM_THREADS or all cores)"},
      {"precision", "P", "matrix products: fp32 (default) or bf16 (AVX512_BF16; ~2x faster, bf16 inputs)"},
      {"help", "", "this text"},
  };
  return specs;
}

double cosine(const float* a, const float* b, int64_t n) {
  double d = 0, na = 0, nb = 0;
  for (int64_t i = 0; i < n; ++i)
    d += double(a[i]) * b[i], na += double(a[i]) * a[i], nb += double(b[i]) * b[i];
  return na > 0 && nb > 0 ? d / std::sqrt(na * nb) : 0.0;
}

}  // namespace

int run_similarity(const std::vector<std::string>& raw) {
  const encoder::SplitArgs sa = encoder::split_args(raw, similarity_options());
  const Args opts(sa.options, similarity_options());
  if (opts.has("help")) {
    std::fputs(
        ("usage: attn similarity TEXT_A TEXT_B\n\n"
         "The cosine similarity of the two texts' all-MiniLM-L6-v2 embeddings, in [-1, 1].\n\n"
         "Options:\n" +
         format_options(similarity_options()) +
         "\nExample:\n  attn similarity \"A man is eating food.\" \"A man is eating a piece of bread.\"\n")
            .c_str(),
        stdout);
    return 0;
  }
  ATTN_CHECK(sa.positionals.size() == 2, "expected exactly two texts; got ", sa.positionals.size());
  apply_threads(opts);
  const models::SentenceEncoder& enc = encoder::load_encoder(opts.has("model") ? opts.str("model") : "");
  const models::Embeddings e = enc.embed(sa.positionals);
  note_truncated("similarity", sa.positionals, e, enc);
  const float* p = e.vectors.data<float>();
  std::printf("%.6f\n", cosine(p, p + enc.dim(), enc.dim()));
  return 0;
}

// ============================================================================
// attn search
// ============================================================================
namespace {

const std::vector<OptionSpec>& search_options() {
  static const std::vector<OptionSpec> specs = {
      {"corpus", "FILE", "the texts to search, one per non-empty line (required)"},
      {"top-k", "K", "how many results (default 5)"},
      {"cache-dir", "DIR", "keep the corpus embeddings in DIR (default: next to the corpus)"},
      {"no-cache", "", "embed the corpus now and keep nothing"},
      {"model", "DIR", "a BERT sentence-encoder folder (default: all-MiniLM-L6-v2)"},
      {"threads", "N", "threads (default: ATTN_NUM_THREADS or all cores)"},
      {"help", "", "this text"},
  };
  return specs;
}

constexpr const char* kCacheFormat = "attn-search-cache-1";

std::string hex64(uint64_t h) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::string base_name(const std::string& p) {
  const auto s = p.find_last_of('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

// The cache file: "<corpus>.<model fingerprint>.attn-emb" next to the corpus or in --cache-dir.
std::string cache_path(const std::string& corpus, const std::string& cache_dir,
                       const std::string& fingerprint) {
  if (cache_dir.empty()) return corpus + "." + fingerprint + ".attn-emb";
  return cache_dir + "/" + base_name(corpus) + "." + hex64(models::fnv1a64(corpus)) + "." + fingerprint +
         ".attn-emb";
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
    if (get("format") != kCacheFormat) {
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
    return v;
  } catch (const Error& e) {
    why = std::string("unreadable (") + e.what() + ")";
    return Tensor();
  }
}

}  // namespace

int run_search(const std::vector<std::string>& raw) {
  const encoder::SplitArgs sa = encoder::split_args(raw, search_options());
  const Args opts(sa.options, search_options());
  if (opts.has("help")) {
    std::fputs(("usage: attn search --corpus FILE QUERY [--top-k K]\n\n"
                "Semantic search: the corpus lines most similar to QUERY (cosine of all-MiniLM-L6-v2\n"
                "embeddings). The corpus is embedded once and cached in FILE.<model>.attn-emb (or in\n"
                "--cache-dir), keyed by a hash of the corpus bytes and of the model; a cache whose\n"
                "corpus or model changed is detected and rebuilt.\n\n"
                "Options:\n" +
                format_options(search_options()) +
                "\nExample:\n  attn search --corpus faq.txt \"how do I reset my password\" --top-k 3\n")
                   .c_str(),
               stdout);
    return 0;
  }
  ATTN_CHECK(opts.has("corpus"), "missing --corpus FILE (the texts to search, one per line)");
  ATTN_CHECK(sa.positionals.size() == 1, "expected one query text; got ", sa.positionals.size());
  ATTN_CHECK(!(opts.has("no-cache") && opts.has("cache-dir")),
             "--no-cache and --cache-dir exclude each other");
  const int64_t top_k = opts.has("top-k") ? opts.integer("top-k", 1, 1 << 20) : 5;
  apply_threads(opts);
  const std::string corpus_path = opts.str("corpus");
  const std::string bytes = io::read_file(corpus_path, "corpus");
  const std::vector<encoder::Line> lines = encoder::nonempty_lines(bytes);
  ATTN_CHECK(!lines.empty(), "corpus '", corpus_path, "' has no non-empty lines; expected one text per line");
  const models::SentenceEncoder& enc = encoder::load_encoder(opts.has("model") ? opts.str("model") : "");
  const auto N = static_cast<int64_t>(lines.size());
  Tensor vecs;
  const std::string corpus_hash = hex64(models::fnv1a64(bytes));
  const std::string cpath =
      opts.has("no-cache")
          ? ""
          : cache_path(corpus_path, opts.has("cache-dir") ? opts.str("cache-dir") : "", enc.fingerprint());
  if (!cpath.empty()) {
    std::string why;
    vecs = read_cache(cpath, corpus_hash, enc.fingerprint(), N, enc.dim(), why);
    if (!vecs.defined())
      std::fprintf(stderr, "attn search: embedding %lld corpus lines (%s: %s)\n", static_cast<long long>(N),
                   cpath.c_str(), why.c_str());
  }
  if (!vecs.defined()) {
    std::vector<std::string> texts;
    for (const auto& l : lines) texts.push_back(l.text);
    const models::Embeddings e = enc.embed(texts);
    vecs = e.vectors;
    if (!cpath.empty()) {
      try {
        io::save_safetensors(cpath, {{"embeddings", vecs}},
                             {{"format", kCacheFormat},
                              {"model", enc.fingerprint()},
                              {"corpus_fnv1a64", corpus_hash},
                              {"corpus", corpus_path},
                              {"lines", std::to_string(N)}});
        std::fprintf(stderr, "attn search: cached the corpus embeddings in %s\n", cpath.c_str());
      } catch (const Error& err) {
        std::fprintf(stderr, "attn search: note: could not write the cache (%s); continuing without it\n",
                     err.what());
      }
    }
  }
  const models::Embeddings q = enc.embed(sa.positionals);
  note_truncated("search", sa.positionals, q, enc);
  const float* qp = q.vectors.data<float>();
  const float* vp = vecs.data<float>();
  std::vector<std::pair<double, int64_t>> scored;
  for (int64_t i = 0; i < N; ++i) scored.push_back({cosine(qp, vp + i * enc.dim(), enc.dim()), i});
  const auto k = static_cast<std::size_t>(std::min<int64_t>(top_k, N));
  std::partial_sort(scored.begin(), scored.begin() + static_cast<std::ptrdiff_t>(k), scored.end(),
                    [](const auto& a, const auto& b) {
                      return a.first > b.first || (a.first == b.first && a.second < b.second);
                    });
  for (std::size_t r = 0; r < k; ++r) {
    const encoder::Line& l = lines[static_cast<std::size_t>(scored[r].second)];
    std::printf("%zu. %.4f  line %lld: %s\n", r + 1, scored[r].first, static_cast<long long>(l.number),
                l.text.c_str());
  }
  return 0;
}

}  // namespace attn::cli
