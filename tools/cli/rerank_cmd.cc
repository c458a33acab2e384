// `attn rerank QUERY DOC...`: score documents against a query with a cross-encoder (a Hugging Face
// BertForSequenceClassification / XLMRobertaForSequenceClassification folder: ms-marco MiniLM,
// bge-reranker), best first. The work is library code (include/attn/models/bert_rerank.h).
#include <attn/core/error.h>
#include <attn/core/parallel.h>
#include <attn/io/files.h>
#include <attn/io/json.h>
#include <attn/models/bert_rerank.h>
#include <attn/tasks/embed.h>

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include "args.h"
#include "commands.h"
#include "encoder_cli.h"

namespace attn::cli {
namespace {

const std::vector<OptionSpec>& rerank_options() {
  static const std::vector<OptionSpec> specs = {
      {"model", "DIR",
       "the cross-encoder: a Hugging Face folder (config.json, safetensors, tokenizer) of a "
       "BertForSequenceClassification or XLMRobertaForSequenceClassification with one label "
       "(required)"},
      {"file", "FILE", "the documents: each non-empty line of FILE (instead of DOC arguments)"},
      {"top-n", "N", "print only the N best documents (default: all)"},
      {"raw", "", "print the logits instead of sigmoid(logit) in [0, 1]"},
      {"json", "", "print JSON: {model, results: [{index, relevance_score, document}], usage}"},
      {"batch-size", "N", "pairs per forward pass (default 32)"},
      {"threads", "N", "threads (default: ATTN_NUM_THREADS or all cores)"},
      {"help", "", "this text"},
  };
  return specs;
}

// The first line of a document, cut to 70 bytes on a character boundary.
std::string shown(const std::string& s) {
  std::string t = s.substr(0, s.find('\n'));
  if (t.size() <= 70) return t;
  std::size_t cut = 67;
  while (cut > 0 && (static_cast<unsigned char>(t[cut]) & 0xC0) == 0x80) --cut;
  return t.substr(0, cut) + "...";
}

}  // namespace

int run_rerank(const std::vector<std::string>& raw) {
  const encoder::SplitArgs sa = encoder::split_args(raw, rerank_options());
  const Args opts(sa.options, rerank_options());
  if (opts.has("help")) {
    std::fputs(
        ("usage: attn rerank --model DIR QUERY DOC [DOC...]\n"
         "       attn rerank --model DIR --file DOCS.txt QUERY\n\n"
         "Scores each document's relevance to the query with a cross-encoder (the query and the\n"
         "document read together), best first: rank, score, the document's index, its text.\n\n"
         "Options:\n" +
         format_options(rerank_options()) +
         "\nExamples:\n"
         "  attn rerank --model ./ms-marco-MiniLM-L-6-v2 \"what is a panda?\" \"hi\" \"The giant panda is a "
         "bear.\"\n"
         "  attn rerank --model ./bge-reranker-base --file passages.txt --top-n 3 --json \"熊猫吃什么\"\n")
            .c_str(),
        stdout);
    return 0;
  }
  ATTN_CHECK(opts.has("model"),
             "--model DIR is required: a cross-encoder folder (config.json, "
             "model.safetensors or its shards, tokenizer.json or vocab.txt)");
  ATTN_CHECK(!sa.positionals.empty(), "expected the query (and the documents unless --file); got nothing");
  const std::string query = sa.positionals[0];
  std::vector<std::string> docs(sa.positionals.begin() + 1, sa.positionals.end());
  if (opts.has("file")) {
    ATTN_CHECK(docs.empty(), "give the documents either as arguments or with --file, not both");
    docs = tasks::texts_from_lines(io::read_file(opts.str("file"), "--file"), opts.str("file"));
  }
  ATTN_CHECK(!docs.empty(), "expected at least one document after the query (or --file FILE)");
  if (opts.has("threads")) set_num_threads(static_cast<int>(opts.integer("threads", 1, 1024)));
  models::RerankOptions ro;
  ro.raw_scores = opts.has("raw");
  if (opts.has("batch-size")) ro.batch_size = opts.integer("batch-size", 1, 4096);
  const int64_t top_n =
      opts.has("top-n") ? opts.integer("top-n", 1, int64_t{1} << 40) : static_cast<int64_t>(docs.size());
  const models::CrossEncoder ce = models::CrossEncoder::load(opts.str("model"));
  const models::RerankScores r = ce.score(query, docs, ro);
  std::vector<std::size_t> order(docs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return r.scores[a] > r.scores[b]; });
  order.resize(std::min<std::size_t>(order.size(), static_cast<std::size_t>(top_n)));
  if (opts.has("json")) {
    json::Value results = json::Value::array();
    for (const std::size_t i : order) {
      json::Value item = json::Value::object();
      item.set("index", json::Value::integer(static_cast<int64_t>(i)));
      item.set("relevance_score", json::Value::number(r.scores[i]));
      item.set("document", json::Value::object({{"text", json::Value::string(docs[i])}}));
      results.push_back(std::move(item));
    }
    json::Value out = json::Value::object();
    out.set("model", json::Value::string(ce.name()));
    out.set("results", std::move(results));
    out.set("usage", json::Value::object({{"prompt_tokens", json::Value::integer(r.total_tokens)},
                                          {"total_tokens", json::Value::integer(r.total_tokens)}}));
    std::printf("%s\n", json::dump(out).c_str());
    return 0;
  }
  std::printf("%-5s %-10s %-6s %s\n", "rank", ro.raw_scores ? "logit" : "score", "index", "document");
  for (std::size_t k = 0; k < order.size(); ++k) {
    const std::size_t i = order[k];
    std::printf("%-5zu %-10.6f %-6zu %s%s\n", k + 1, static_cast<double>(r.scores[i]), i,
                shown(docs[i]).c_str(), r.truncated[i] ? "  (truncated)" : "");
  }
  const auto cut = std::count(r.truncated.begin(), r.truncated.end(), true);
  if (cut > 0)
    std::fprintf(stderr, "attn rerank: %lld of %zu pairs were longer than %lld tokens and were cut\n",
                 static_cast<long long>(cut), docs.size(), static_cast<long long>(ce.max_seq_length()));
  return 0;
}

}  // namespace attn::cli
