// Smoke tests of `attn rerank` (tools/cli/rerank_cmd.cc) on the tiny random cross-encoders of
// tests/models/data/hf_encoders (the rerank tests' fixtures): the documents ranked best first with the
// library's scores (models::CrossEncoder called directly), --json, --top-n, --raw, --file, and the
// errors (no documents, no model, a folder that is not a model).
#include <attn/io/files.h>
#include <attn/io/json.h>
#include <attn/models/bert_rerank.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "testing/cli_runner.h"
#include "testing/testing.h"

namespace attn {
namespace {

using testing::run_attn;

std::string model_dir(const std::string& name) {
  return testing::source_path("tests/models/data/hf_encoders/" + name);
}

const std::string kQuery = "what does a panda eat?";
const std::vector<std::string> kDocs = {"The giant panda eats bamboo.", "hello",
                                        "Pandas are bears from China.", "Rain is expected tomorrow."};

std::string doc_args() {
  std::string s;
  for (const std::string& d : kDocs) s += " '" + d + "'";
  return s;
}

// The documents' indices best first, as the library scores them.
std::vector<std::size_t> library_order(const std::vector<float>& scores) {
  std::vector<std::size_t> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return scores[a] > scores[b]; });
  return order;
}

struct Row {
  std::size_t rank = 0, index = 0;
  double score = 0;
  std::string text;
};

// The table: a header line, then "rank score index document" per line.
std::vector<Row> table(const std::string& out) {
  std::istringstream in(out);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line.rfind("rank", 0), 0u) << out;
  std::vector<Row> rows;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::istringstream ls(line);
    Row r;
    ls >> r.rank >> r.score >> r.index;
    std::getline(ls >> std::ws, r.text);
    EXPECT_FALSE(ls.fail() && r.text.empty()) << line;
    rows.push_back(r);
  }
  return rows;
}

TEST(RerankCli, RanksTheDocumentsWithTheLibrarysScores) {
  for (const std::string name : {"bert_cls", "xlmr_cls"}) {
    SCOPED_TRACE(name);
    const auto r = run_attn("rerank --model '" + model_dir(name) + "' '" + kQuery + "'" + doc_args());
    ASSERT_EQ(r.status, 0) << r.err;
    const models::CrossEncoder ce = models::CrossEncoder::load(model_dir(name));
    const models::RerankScores want = ce.score(kQuery, kDocs, {});
    const std::vector<std::size_t> order = library_order(want.scores);
    const std::vector<Row> rows = table(r.out);
    ASSERT_EQ(rows.size(), kDocs.size()) << r.out;
    for (std::size_t k = 0; k < rows.size(); ++k) {
      EXPECT_EQ(rows[k].rank, k + 1);
      EXPECT_EQ(rows[k].index, order[k]) << r.out;
      EXPECT_NEAR(rows[k].score, want.scores[order[k]], 1e-6);  // printed with 6 decimals
      // xlmr_cls's position table is short: its longer pairs are cut, and marked so.
      EXPECT_EQ(rows[k].text, kDocs[order[k]] + (want.truncated[order[k]] ? "  (truncated)" : ""));
      EXPECT_GE(rows[k].score, 0.0);  // sigmoid(logit) by default
      EXPECT_LE(rows[k].score, 1.0);
    }
    const bool cut = std::find(want.truncated.begin(), want.truncated.end(), true) != want.truncated.end();
    EXPECT_EQ(r.err.find("were cut") != std::string::npos, cut) << r.err;
  }
}

TEST(RerankCli, JsonTopNRawAndFile) {
  const std::string dir = model_dir("bert_cls");
  const models::CrossEncoder ce = models::CrossEncoder::load(dir);
  const models::RerankScores want = ce.score(kQuery, kDocs, {});
  const std::vector<std::size_t> order = library_order(want.scores);

  const auto j = run_attn("rerank --json --top-n 2 --model '" + dir + "' '" + kQuery + "'" + doc_args());
  ASSERT_EQ(j.status, 0) << j.err;
  const json::Value v = json::parse(j.out);
  EXPECT_EQ(v.at("model").as_string(), ce.name());
  const json::Value& res = v.at("results");
  ASSERT_EQ(res.size(), 2u) << j.out;
  for (std::size_t k = 0; k < res.size(); ++k) {
    const auto i = static_cast<std::size_t>(res.at(k).at("index").as_int64());
    EXPECT_EQ(i, order[k]);
    EXPECT_NEAR(res.at(k).at("relevance_score").as_double(), want.scores[i], 1e-6);
    EXPECT_EQ(res.at(k).at("document").at("text").as_string(), kDocs[i]);
  }
  EXPECT_EQ(v.at("usage").at("total_tokens").as_int64(), want.total_tokens);

  // --raw: the logits, whose sigmoid is the default score (same order).
  models::RerankOptions ro;
  ro.raw_scores = true;
  const models::RerankScores logits = ce.score(kQuery, kDocs, ro);
  const auto raw = run_attn("rerank --raw --model '" + dir + "' '" + kQuery + "'" + doc_args());
  ASSERT_EQ(raw.status, 0) << raw.err;
  EXPECT_NE(raw.out.find("logit"), std::string::npos) << raw.out;
  const std::vector<Row> rows = table(raw.out);
  ASSERT_EQ(rows.size(), kDocs.size());
  for (std::size_t k = 0; k < rows.size(); ++k) {
    EXPECT_EQ(rows[k].index, order[k]);
    EXPECT_NEAR(rows[k].score, logits.scores[order[k]], 1e-6);
    EXPECT_NEAR(1 / (1 + std::exp(-rows[k].score)), want.scores[order[k]], 1e-5);
  }

  // --file: one document per non-empty line, the same ranking.
  const std::string path = ::testing::TempDir() + "attn_rerank_docs_" + std::to_string(::getpid()) + ".txt";
  std::string lines;
  for (const std::string& d : kDocs) lines += d + "\n\n";
  io::write_file_atomically(path, lines);
  const auto f = run_attn("rerank --file '" + path + "' --model '" + dir + "' '" + kQuery + "'");
  std::filesystem::remove(path);
  ASSERT_EQ(f.status, 0) << f.err;
  const std::vector<Row> frows = table(f.out);
  ASSERT_EQ(frows.size(), kDocs.size());
  for (std::size_t k = 0; k < frows.size(); ++k) EXPECT_EQ(frows[k].index, order[k]);
}

TEST(RerankCli, ErrorsSayWhatWasExpected) {
  const std::string dir = model_dir("bert_cls");
  const auto none = run_attn("rerank --model '" + dir + "' 'a query'");
  EXPECT_NE(none.status, 0);
  EXPECT_NE(none.err.find("expected at least one document"), std::string::npos) << none.err;
  const auto nothing = run_attn("rerank --model '" + dir + "'");
  EXPECT_NE(nothing.status, 0);
  EXPECT_NE(nothing.err.find("expected the query"), std::string::npos) << nothing.err;
  const auto no_model = run_attn("rerank 'a query' 'a document'");
  EXPECT_NE(no_model.status, 0);
  EXPECT_NE(no_model.err.find("--model DIR is required"), std::string::npos) << no_model.err;
  const std::string missing = ::testing::TempDir() + "attn_no_such_reranker_" + std::to_string(::getpid());
  const auto absent = run_attn("rerank --model '" + missing + "' 'a query' 'a document'");
  EXPECT_NE(absent.status, 0);
  EXPECT_NE(absent.err.find(missing), std::string::npos) << absent.err;
  // An embedding model (no classification head) is not a cross-encoder.
  const auto encoder = run_attn("rerank --model '" + model_dir("xlmr_model") + "' 'a query' 'a document'");
  EXPECT_NE(encoder.status, 0);
  EXPECT_FALSE(encoder.err.empty());
  const auto both = run_attn("rerank --file /dev/null --model '" + dir + "' 'q' 'doc'");
  EXPECT_NE(both.status, 0);
  EXPECT_NE(both.err.find("not both"), std::string::npos) << both.err;
}

}  // namespace
}  // namespace attn
