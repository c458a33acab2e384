// Tests of `attn train classify` and `attn classify`: the built binary on
// small files written here (a synthetic two-class set with planted duplicates
// and conflicts, and, when present, a slice of the real reviews), checked
// against what the library computes from the same files and the saved model;
// and every kind of bad input, which must fail with a clear message, a
// non-zero exit and no model or report left behind.
#include <attn/core/error.h>
#include <attn/core/random.h>
#include <attn/data/reader.h>
#include <attn/data/split.h>
#include <attn/io/json.h>
#include <attn/models/task_model.h>
#include <attn/models/text_classifier.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "testing/cli_runner.h"
#include "testing/testing.h"

namespace attn {
namespace {

namespace fs = std::filesystem;
using testing::CliRun;

fs::path temp_dir(const std::string& name) {
  const fs::path p =
      fs::path(::testing::TempDir()) / ("attn_classify_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

void write_file(const fs::path& p, const std::string& bytes) { std::ofstream(p, std::ios::binary) << bytes; }

std::string q(const fs::path& p) { return std::string("'").append(p.string()).append("'"); }

// Small and fast: the pipeline, not the accuracy, is under test.
const std::string kSmallModel = " --layers 1 --d-model 32 --heads 2 --batch-size 16 --quiet --seed 3";

// Synthetic reviews: a few filler characters around one cue word per class.
// Returns {pos lines, neg lines}; adds `dups` exact duplicates per file and
// two texts that occur in both files (conflicting labels).
std::pair<std::string, std::string> synthetic(int per_class, int dups) {
  const std::vector<std::string> filler = {"这", "个", "东", "西", "物", "流", "包", "装", "价", "格",
                                           "房", "间", "书", "的", "了", "是", "我", "买", "，", "也"};
  const std::vector<std::string> good = {"好", "棒", "赞", "喜欢"}, bad = {"差", "烂", "失望", "退货"};
  Rng rng(77);
  auto line = [&](const std::vector<std::string>& cues) {
    std::string s;
    const int n = 4 + static_cast<int>(rng.below(10));
    const int at = static_cast<int>(rng.below(static_cast<uint64_t>(n)));
    for (int i = 0; i < n; ++i) {
      if (i == at) s += cues[rng.below(cues.size())];
      s += filler[rng.below(filler.size())];
    }
    return s;
  };
  std::vector<std::string> pos, neg;
  std::set<std::string> seen;
  while (static_cast<int>(pos.size()) < per_class)
    if (auto s = line(good); seen.insert(s).second) pos.push_back(s);
  while (static_cast<int>(neg.size()) < per_class)
    if (auto s = line(bad); seen.insert(s).second) neg.push_back(s);
  std::string p, n;
  for (const auto& s : pos) p += s + "\n";
  for (const auto& s : neg) n += s + "\n";
  for (int i = 0; i < dups; ++i) {
    p += pos[i] + "\n";
    n += neg[i] + "\n";
  }
  p += "一般般\n还可以吧\n";
  n += "一般般\n还可以吧\n";
  return {p, n};
}

json::Value read_json(const fs::path& p) { return json::parse(testing::read_text(p)); }

bool no_outputs(const fs::path& out) {
  for (const char* f : {"model.attn", "report.md", "report.json", "split.json", "test-sample.txt"})
    if (fs::exists(out / f)) return false;
  return true;
}

TEST(TrainClassify, SyntheticEndToEnd) {
  const fs::path dir = temp_dir("e2e");
  const auto [pos, neg] = synthetic(300, 40);
  write_file(dir / "pos.txt", pos);
  write_file(dir / "neg.txt", neg);
  const fs::path out = dir / "run";
  const CliRun r =
      testing::run_attn("train classify --pos " + q(dir / "pos.txt") + " --neg " + q(dir / "neg.txt") +
                        " --out " + q(out) + " --epochs 6 --min-freq 1" + kSmallModel);
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("test accuracy"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("naive Bayes baseline"), std::string::npos) << r.out;

  // The data counts are what the library finds in the same files.
  data::Dataset raw = data::read_text_files(
      {{(dir / "neg.txt").string(), 0, "neg"}, {(dir / "pos.txt").string(), 1, "pos"}}, [] {
        data::ReadOptions o;
        o.normalize.lowercase_ascii = true;
        return o;
      }());
  data::DedupReport dr;
  const data::Dataset ds = data::deduplicate(raw, &dr);
  EXPECT_EQ(dr.duplicates_removed, 80);
  EXPECT_EQ(dr.conflicting_texts, 2);
  const json::Value rep = read_json(out / "report.json");
  const json::Value& d = rep.at("data");
  EXPECT_EQ(d.at("examples_read").as_int64(), raw.size());
  EXPECT_EQ(d.at("duplicates_removed").as_int64(), dr.duplicates_removed);
  EXPECT_EQ(d.at("conflicting_texts").as_int64(), 2);
  EXPECT_EQ(d.at("conflicting_removed").as_int64(), dr.conflicting_removed);
  EXPECT_EQ(d.at("distinct_examples").as_int64(), ds.size());
  EXPECT_EQ(ds.size(), 600);

  // The split: made from exactly this data, deterministic, disjoint, no text shared.
  const data::Split split = data::Split::load((out / "split.json").string());
  data::check_split(split, ds);
  data::SplitOptions so;
  so.seed = 3;
  EXPECT_TRUE(split == data::make_split(ds, so));
  EXPECT_EQ(data::count_text_overlap(ds, split.train, split.test), 0);
  EXPECT_EQ(data::count_text_overlap(ds, split.train, split.valid), 0);
  EXPECT_EQ(data::count_text_overlap(ds, split.valid, split.test), 0);
  EXPECT_EQ(rep.at("split").at("input_hash").as_string().size(), 18u);

  // Training worked: the loss fell, and a cue-word task is learned well.
  const json::Value& hist = rep.at("training").at("history");
  ASSERT_GE(hist.size(), 2u);
  EXPECT_LT(hist.at(hist.size() - 1).at("train_loss").as_double(), hist.at(0).at("train_loss").as_double());
  EXPECT_LT(hist.at(hist.size() - 1).at("train_loss").as_double(),
            rep.at("training").at("first_step_loss").as_double());
  EXPECT_GE(rep.at("test").at("accuracy").as_double(), 0.9);
  EXPECT_GE(rep.at("baseline").at("test").at("accuracy").as_double(), 0.9);
  EXPECT_EQ(rep.at("test").at("count").as_int64(), static_cast<int64_t>(split.test.size()));
  EXPECT_NE(testing::read_text(out / "report.md").find("| Transformer encoder |"), std::string::npos);

  // The model file: a classify task with its vocabulary, labels, max_len and split.
  const models::TaskModelHeader h = models::read_task_model((out / "model.attn").string(), "classify");
  EXPECT_EQ(h.data.at("max_len").as_int64(), 100);
  EXPECT_EQ(h.data.at("labels").at(0).as_string(), "neg");
  EXPECT_EQ(h.data.at("split").at("input_hash").as_string(), rep.at("split").at("input_hash").as_string());

  // attn classify: the label and the attended characters, numbers equal to the
  // library's computation with the saved model.
  auto model = models::TextClassifier::load((out / "model.attn").string());
  const std::string text = "这个东西好棒";
  const CliRun cj =
      testing::run_attn("classify --model " + q(out / "model.attn") + " --json --heads '" + text + "'");
  ASSERT_EQ(cj.status, 0) << cj.err;
  const json::Value j = json::parse(cj.out).at("results").at(0);
  const models::Classification ref = model->classify({text}, true)[0];
  EXPECT_EQ(j.at("label").as_string(), model->labels()[ref.label]);
  EXPECT_EQ(j.at("probability").as_double(), ref.probs[ref.label]);
  ASSERT_EQ(j.at("tokens").size(), ref.tokens.size());
  for (std::size_t k = 0; k < ref.tokens.size(); ++k)
    EXPECT_EQ(j.at("tokens").at(k).as_string(), ref.tokens[k]);
  ASSERT_EQ(j.at("attention").size(), ref.attention.size());
  for (std::size_t l = 0; l < ref.attention.size(); ++l) {
    const json::Value& layer = j.at("attention").at(l);
    for (std::size_t hh = 0; hh < ref.attention[l].size(); ++hh)
      for (std::size_t k = 0; k < ref.tokens.size(); ++k)
        EXPECT_EQ(layer.at("heads").at(hh).at(k).as_double(), ref.attention[l][hh][k]);
    // "mean" is the head average; "top" lists the largest non-[CLS] weights in order.
    double best = -1;
    std::size_t best_k = 0;
    for (std::size_t k = 0; k < ref.tokens.size(); ++k) {
      double m = 0;
      for (const auto& head : ref.attention[l]) m += head[k] / static_cast<double>(ref.attention[l].size());
      EXPECT_NEAR(layer.at("mean").at(k).as_double(), m, 1e-15);
      if (k > 0 && m > best) best = m, best_k = k;
    }
    EXPECT_EQ(layer.at("top").at(0).at("token").as_string(), ref.tokens[best_k]);
  }

  // Human-readable output: label, probability and the top character of each layer.
  const CliRun ch = testing::run_attn("classify --model " + q(out / "model.attn") + " '" + text + "'");
  ASSERT_EQ(ch.status, 0) << ch.err;
  EXPECT_NE(ch.out.find("label  " + model->labels()[ref.label]), std::string::npos) << ch.out;
  EXPECT_NE(ch.out.find("layer 1 (mean of 2 heads"), std::string::npos) << ch.out;

  // --file and stdin give one result per non-blank line.
  const CliRun cf = testing::run_attn("classify --json --model " + q(out / "model.attn") + " --file " +
                                      q(out / "test-sample.txt"));
  ASSERT_EQ(cf.status, 0) << cf.err;
  const std::string sample = testing::read_text(out / "test-sample.txt");
  const auto lines = static_cast<std::size_t>(std::count(sample.begin(), sample.end(), '\n'));
  EXPECT_GE(lines, 2u);
  EXPECT_EQ(json::parse(cf.out).at("results").size(), lines);
  const CliRun cs =
      testing::run_attn("classify --json --model " + q(out / "model.attn") + " -", "好\n\n差\n");
  ASSERT_EQ(cs.status, 0) << cs.err;
  EXPECT_EQ(json::parse(cs.out).at("results").size(), 2u);
  fs::remove_all(dir);
}

// A slice of the real reviews (300 per class) when the data is present.
TEST(TrainClassify, RealReviewSlice) {
  const char* env = std::getenv("ATTN_DATA_DIR");
  const fs::path data_dir =
      env != nullptr ? fs::path(env) : fs::path(ATTN_SOURCE_DIR) / ".." / "shared" / "data";
  if (!fs::exists(data_dir / "reviews-zh" / "pos.txt"))
    GTEST_SKIP() << "reviews not found in " << data_dir << "/reviews-zh: set ATTN_DATA_DIR or run "
                 << "scripts/fetch-reviews.sh";
  const fs::path dir = temp_dir("real");
  for (const char* name : {"pos.txt", "neg.txt"}) {
    std::ifstream in(data_dir / "reviews-zh" / name, std::ios::binary);
    std::string all, l;
    for (int i = 0; i < 300 && std::getline(in, l); ++i) all += l + "\n";
    write_file(dir / name, all);
  }
  const CliRun r =
      testing::run_attn("train classify --pos " + q(dir / "pos.txt") + " --neg " + q(dir / "neg.txt") +
                        " --out " + q(dir / "run") + " --epochs 2" + kSmallModel);
  ASSERT_EQ(r.status, 0) << r.err;
  const json::Value rep = read_json(dir / "run" / "report.json");
  EXPECT_GT(
      rep.at("data").at("duplicates_removed").as_int64() + rep.at("data").at("distinct_examples").as_int64(),
      0);
  EXPECT_GT(rep.at("test").at("count").as_int64(), 0);
  const CliRun c =
      testing::run_attn("classify --model " + q(dir / "run" / "model.attn") + " '物流很快，质量很好'");
  EXPECT_EQ(c.status, 0) << c.err;
  EXPECT_NE(c.out.find("[CLS] attended most to"), std::string::npos);
  fs::remove_all(dir);
}

TEST(TrainClassify, CutsLongLinesAndCountsThem) {
  const fs::path dir = temp_dir("cut");
  const auto [pos, neg] = synthetic(40, 0);
  write_file(dir / "pos.txt", pos);
  write_file(dir / "neg.txt", neg);
  const CliRun r =
      testing::run_attn("train classify --pos " + q(dir / "pos.txt") + " --neg " + q(dir / "neg.txt") +
                        " --out " + q(dir / "run") + " --epochs 1 --max-chars 6 --max-len 5" + kSmallModel);
  ASSERT_EQ(r.status, 0) << r.err;
  int64_t longer = 0;  // lines longer than 6 characters (every character here is one code point)
  for (const std::string* s : {&pos, &neg}) {
    std::stringstream ss(*s);
    for (std::string l; std::getline(ss, l);) {
      int64_t cps = 0;
      for (unsigned char ch : l) cps += (ch & 0xC0) != 0x80;
      longer += cps > 6;
    }
  }
  ASSERT_GT(longer, 0);
  const json::Value rep = read_json(dir / "run" / "report.json");
  EXPECT_EQ(rep.at("data").at("lines_cut_to_max_chars").as_int64(), longer);
  const json::Value& cut = rep.at("data").at("texts_cut_to_max_len");
  EXPECT_GT(cut.at("train").as_int64() + cut.at("valid").as_int64() + cut.at("test").as_int64(), 0);
  EXPECT_NE(testing::read_text(dir / "run" / "report.md").find("texts cut"), std::string::npos);
  fs::remove_all(dir);
}

// ---- bad input ----------------------------------------------------------------------------------

struct BadCase {
  const char* name;
  // Files to write in the case's folder (name, bytes).
  std::vector<std::pair<std::string, std::string>> files;
  std::string args;  // {dir} is replaced by the folder
  std::vector<std::string> message;
};

class TrainClassifyBadInput : public ::testing::TestWithParam<BadCase> {};

std::string replace_dir(std::string s, const fs::path& dir) {
  for (std::size_t at; (at = s.find("{dir}")) != std::string::npos;) s.replace(at, 5, dir.string());
  return s;
}

TEST_P(TrainClassifyBadInput, FailsClearlyAndWritesNothing) {
  const BadCase& c = GetParam();
  const fs::path dir = temp_dir(std::string("bad_") + c.name);
  for (const auto& [name, bytes] : c.files) write_file(dir / name, bytes);
  const CliRun r = testing::run_attn("train classify " + replace_dir(c.args, dir) + " --out " +
                                     q(dir / "run") + " --epochs 1" + kSmallModel);
  EXPECT_NE(r.status, 0) << r.out;
  for (const auto& part : c.message)
    EXPECT_NE(r.err.find(replace_dir(part, dir)), std::string::npos) << r.err;
  EXPECT_TRUE(no_outputs(dir / "run"));
  // The run created --out, so it removes it again (it is empty) rather than leave an empty folder.
  EXPECT_FALSE(fs::exists(dir / "run")) << "an empty --out folder was left behind";
  fs::remove_all(dir);
}

TEST(TrainClassify, FailedRunRemovesOnlyTheFoldersItCreated) {
  const fs::path dir = temp_dir("bad_out_folders");
  write_file(dir / "neg.txt", "差\n");
  const std::string data = " --pos " + q(dir / "nope.txt") + " --neg " + q(dir / "neg.txt");
  // Nested folders made by this run: all of them go, the folder above stays.
  CliRun r = testing::run_attn("train classify" + data + " --out " + q(dir / "a" / "b" / "c") +
                               " --epochs 1" + kSmallModel);
  EXPECT_NE(r.status, 0) << r.out;
  EXPECT_NE(r.err.find("nope.txt"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "a")) << "folders created by the failed run were left behind";
  EXPECT_TRUE(fs::is_directory(dir));
  // A trailing slash names the same folder.
  r = testing::run_attn("train classify" + data + " --out " + q(dir / "d") + "/ --epochs 1" + kSmallModel);
  EXPECT_NE(r.status, 0) << r.out;
  EXPECT_FALSE(fs::exists(dir / "d"));
  // A folder that existed before is kept, empty or not, and so is what it holds.
  fs::create_directories(dir / "empty");
  fs::create_directories(dir / "full");
  write_file(dir / "full" / "keep.txt", "x\n");
  for (const char* out : {"empty", "full"}) {
    r = testing::run_attn("train classify" + data + " --out " + q(dir / out) + " --epochs 1" + kSmallModel);
    EXPECT_NE(r.status, 0) << r.out;
    EXPECT_TRUE(fs::is_directory(dir / out)) << out;
    EXPECT_TRUE(no_outputs(dir / out)) << out;
  }
  EXPECT_TRUE(fs::is_empty(dir / "empty"));
  EXPECT_TRUE(fs::is_regular_file(dir / "full" / "keep.txt"));
  fs::remove_all(dir);
}

TEST(TrainClassify, TimeBudgetOnSmallDataFitsTheWarmupIntoTheSchedule) {
  // 64 training texts = 4 steps per epoch: --max-epochs caps the schedule at the 21 steps after the
  // 20 probe steps, below the warmup the time estimate asks for; the run must still train and save.
  const fs::path dir = temp_dir("small_budget");
  const auto [pos, neg] = synthetic(40, 0);
  write_file(dir / "pos.txt", pos);
  write_file(dir / "neg.txt", neg);
  const CliRun r =
      testing::run_attn("train classify --pos " + q(dir / "pos.txt") + " --neg " + q(dir / "neg.txt") +
                        " --out " + q(dir / "run") + " --minutes 0.05 --max-epochs 2" + kSmallModel);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(fs::is_regular_file(dir / "run" / "model.attn"));
  const json::Value rep = read_json(dir / "run" / "report.json");
  EXPECT_GE(rep.at("training").at("steps").as_int64(), 21) << json::dump(rep.at("training"), 2);
  fs::remove_all(dir);
}

TEST(TrainClassify, ProgressHasNoTotalBeforeTheScheduleIsFitted) {
  // With a time budget the number of steps is only estimated after the first steps: until then the
  // progress line says "step 1", never "step 1/0".
  const fs::path dir = temp_dir("progress");
  const auto [pos, neg] = synthetic(40, 0);
  write_file(dir / "pos.txt", pos);
  write_file(dir / "neg.txt", neg);
  const CliRun r = testing::run_attn("train classify --pos " + q(dir / "pos.txt") + " --neg " +
                                     q(dir / "neg.txt") + " --out " + q(dir / "run") +
                                     " --minutes 0.01 --max-epochs 2 --layers 1 --d-model 32 --heads 2 "
                                     "--batch-size 16 --seed 3");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("\nstep 1 epoch 1 loss "), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("/0 epoch"), std::string::npos) << r.err;
  fs::remove_all(dir);
}

std::string good_lines() { return synthetic(30, 0).first; }

INSTANTIATE_TEST_SUITE_P(
    Cases, TrainClassifyBadInput,
    ::testing::Values(
        BadCase{"missing_file",
                {{"neg.txt", "差\n"}},
                "--pos {dir}/nope.txt --neg {dir}/neg.txt",
                {"{dir}/nope.txt"}},
        BadCase{"empty_file",
                {{"pos.txt", good_lines()}, {"neg.txt", ""}},
                "--pos {dir}/pos.txt --neg {dir}/neg.txt",
                {"{dir}/neg.txt", "empty"}},
        BadCase{"invalid_utf8",
                {{"pos.txt", good_lines()}, {"neg.txt", "差\n烂\nab\xff\xfe\n"}},
                "--pos {dir}/pos.txt --neg {dir}/neg.txt",
                {"neg.txt", "line 3"}},
        BadCase{"pos_without_neg", {}, "--pos {dir}/pos.txt", {"--pos and --neg go together"}},
        BadCase{"three_labels",
                {{"d.tsv", "text\tlabel\n好\tpos\n差\tneg\n一般\tmeh\n"}},
                "--data {dir}/d.tsv",
                {"d.tsv", "line 4"}},
        BadCase{"one_label",
                {{"d.csv", "text,label\n好,pos\n很好,pos\n"}},
                "--data {dir}/d.csv",
                {"exactly two classes", "'pos'"}},
        BadCase{"missing_column",
                {{"d.jsonl", "{\"text\": \"好\", \"y\": 1}\n"}},
                "--data {dir}/d.jsonl",
                {"label"}},
        BadCase{"unknown_format", {{"d.txt", "x\n"}}, "--data {dir}/d.txt", {"--format tsv|csv|jsonl"}},
        BadCase{"empty_vocabulary",
                {{"pos.txt", good_lines()}, {"neg.txt", synthetic(30, 0).second}},
                "--pos {dir}/pos.txt --neg {dir}/neg.txt --min-freq 1000000",
                {"vocabulary", "--min-freq 1000000"}},
        BadCase{"too_few_examples",
                {{"pos.txt", "好\n"}, {"neg.txt", "差\n"}},
                "--pos {dir}/pos.txt --neg {dir}/neg.txt",
                {"at least 10 per class"}},
        BadCase{"minutes_and_epochs", {}, "--minutes 1", {"--minutes or --epochs"}}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(TrainClassify, NoDataFoundNamesThePlacesAndTheScript) {
  const fs::path dir = temp_dir("nodata");
  // ATTN_DATA_DIR points at an empty folder.
  const std::string cmd = "ATTN_DATA_DIR='" + dir.string() + "' '" + ATTN_CLI_PATH +
                          "' train classify --out '" + (dir / "run").string() + "' --epochs 1 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  for (std::size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  const int st = pclose(p);
  EXPECT_NE(st, 0);
  EXPECT_NE(out.find("no review data found"), std::string::npos) << out;
  EXPECT_NE(out.find((dir / "reviews-zh").string()), std::string::npos) << out;
  EXPECT_NE(out.find("scripts/fetch-reviews.sh"), std::string::npos) << out;
  EXPECT_TRUE(no_outputs(dir / "run"));
  fs::remove_all(dir);
}

TEST(Classify, BadInput) {
  const fs::path dir = temp_dir("classify_bad");
  models::TransformerConfig c = models::TransformerConfig::preset("micro");
  models::DecoderLM lm(c);
  models::save_task_model((dir / "lm.attn").string(), "lm", c, json::Value::object(), lm.named_parameters());
  CliRun r = testing::run_attn("classify --model " + q(dir / "lm.attn") + " '好'");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("'lm'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("'classify'"), std::string::npos) << r.err;
  r = testing::run_attn("classify --model " + q(dir / "missing.attn") + " '好'");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("missing.attn' not found"), std::string::npos) << r.err;
  r = testing::run_attn("classify --model " + q(dir / "lm.attn"));
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("exactly one source"), std::string::npos) << r.err;
  write_file(dir / "bad.txt", "好\n\xc3\x28\n");
  r = testing::run_attn("classify --model " + q(dir / "lm.attn") + " --file " + q(dir / "bad.txt"));
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("bad.txt line 2: invalid UTF-8"), std::string::npos) << r.err;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace attn
