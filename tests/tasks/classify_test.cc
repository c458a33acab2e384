// Tests of tasks::train_classifier and tasks::classify_texts (attn/tasks/classify.h):
// small files written here (a synthetic two-class set with planted duplicates
// and conflicts, and, when present, a slice of the real reviews), checked
// against what the library computes from the same files and the saved model;
// and every kind of bad input, which must fail with a clear message and no
// model or report left behind.
#include <attn/core/error.h>
#include <attn/core/random.h>
#include <attn/data/reader.h>
#include <attn/data/split.h>
#include <attn/io/json.h>
#include <attn/models/task_model.h>
#include <attn/models/text_classifier.h>
#include <attn/tasks/classify.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "testing/testing.h"

namespace attn {
namespace {

namespace fs = std::filesystem;

fs::path temp_dir(const std::string& name) {
  const fs::path p =
      fs::path(::testing::TempDir()) / ("attn_tasks_classify_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

void write_file(const fs::path& p, const std::string& bytes) { std::ofstream(p, std::ios::binary) << bytes; }

// Small and fast: the pipeline, not the accuracy, is under test (no progress: quiet).
tasks::ClassifyTrainOptions small_model() {
  tasks::ClassifyTrainOptions o;
  o.layers = 1;
  o.d_model = 32;
  o.heads = 2;
  o.batch_size = 16;
  o.seed = 3;
  return o;
}

tasks::ClassifyTrainOptions on_files(const fs::path& dir, const fs::path& out) {
  tasks::ClassifyTrainOptions o = small_model();
  o.pos = (dir / "pos.txt").string();
  o.neg = (dir / "neg.txt").string();
  o.out = out.string();
  return o;
}

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
  tasks::ClassifyTrainOptions o = on_files(dir, out);
  o.epochs = 6;
  o.min_freq = 1;
  const tasks::ClassifyTrainResult r = tasks::train_classifier(o);
  EXPECT_NE(r.summary.find("test accuracy"), std::string::npos) << r.summary;
  EXPECT_NE(r.summary.find("naive Bayes baseline"), std::string::npos) << r.summary;

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
  EXPECT_EQ(json::dump(rep), json::dump(r.report));  // the file is the returned report
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
  EXPECT_EQ(r.test_accuracy, rep.at("test").at("accuracy").as_double());
  EXPECT_NE(testing::read_text(out / "report.md").find("| Transformer encoder |"), std::string::npos);
  EXPECT_EQ(testing::read_text(out / "report.md"), r.report_md);

  // The model file: a classify task with its vocabulary, labels, max_len and split.
  const models::TaskModelHeader h = models::read_task_model((out / "model.attn").string(), "classify");
  EXPECT_EQ(h.data.at("max_len").as_int64(), 100);
  EXPECT_EQ(h.data.at("labels").at(0).as_string(), "neg");
  EXPECT_EQ(h.data.at("split").at("input_hash").as_string(), rep.at("split").at("input_hash").as_string());

  // classify_texts: the label and the attended characters, numbers equal to the
  // library's computation with the saved model.
  auto model = models::TextClassifier::load((out / "model.attn").string());
  const std::string text = "这个东西好棒";
  tasks::ClassifyOptions co;
  co.model = (out / "model.attn").string();
  co.texts = {text};
  co.format.heads = true;
  const tasks::ClassifyResult cj = tasks::classify_texts(co);
  const json::Value j = json::parse(json::dump(cj.json)).at("results").at(0);
  const models::Classification ref = model->classify({text}, true)[0];
  EXPECT_EQ(j.at("label").as_string(), model->labels()[ref.label]);
  EXPECT_EQ(j.at("probability").as_double(), ref.probs[ref.label]);
  ASSERT_EQ(j.at("tokens").size(), ref.tokens.size());
  for (std::size_t k = 0; k < ref.tokens.size(); ++k)
    EXPECT_EQ(j.at("tokens").at(k).as_string(), ref.tokens[k]);
  ASSERT_EQ(j.at("attention").size(), ref.attention.size());
  for (std::size_t l = 0; l < ref.attention.size(); ++l) {
    const json::Value& layer = j.at("attention").at(l);
    EXPECT_EQ(layer.at("layer").as_int64(), static_cast<int64_t>(l));  // numbered from 0
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
  co.format.heads = false;
  const tasks::ClassifyResult ch = tasks::classify_texts(co);
  EXPECT_NE(ch.text.find("label  " + model->labels()[ref.label]), std::string::npos) << ch.text;
  EXPECT_NE(ch.text.find("layer 0 (mean of 2 heads"), std::string::npos) << ch.text;
  EXPECT_EQ(ch.text.find("layer 1 ("), std::string::npos) << ch.text;  // one layer: layer 0 only

  // A file's (or stdin's) non-blank lines give one result each.
  const std::string sample = testing::read_text(out / "test-sample.txt");
  const auto lines = static_cast<std::size_t>(std::count(sample.begin(), sample.end(), '\n'));
  EXPECT_GE(lines, 2u);
  co.texts = tasks::nonblank_lines(sample, "test-sample.txt");
  EXPECT_EQ(tasks::classify_texts(co).json.at("results").size(), lines);
  co.texts = tasks::nonblank_lines("好\n\n差\n", "stdin");
  EXPECT_EQ(tasks::classify_texts(co).json.at("results").size(), 2u);
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
  tasks::ClassifyTrainOptions o = on_files(dir, dir / "run");
  o.epochs = 2;
  tasks::train_classifier(o);
  const json::Value rep = read_json(dir / "run" / "report.json");
  EXPECT_GT(
      rep.at("data").at("duplicates_removed").as_int64() + rep.at("data").at("distinct_examples").as_int64(),
      0);
  EXPECT_GT(rep.at("test").at("count").as_int64(), 0);
  tasks::ClassifyOptions co;
  co.model = (dir / "run" / "model.attn").string();
  co.texts = {"物流很快，质量很好"};
  EXPECT_NE(tasks::classify_texts(co).text.find("[CLS] attended most to"), std::string::npos);
  fs::remove_all(dir);
}

TEST(TrainClassify, CutsLongLinesAndCountsThem) {
  const fs::path dir = temp_dir("cut");
  const auto [pos, neg] = synthetic(40, 0);
  write_file(dir / "pos.txt", pos);
  write_file(dir / "neg.txt", neg);
  tasks::ClassifyTrainOptions o = on_files(dir, dir / "run");
  o.epochs = 1;
  o.max_chars = 6;
  o.max_len = 5;
  tasks::train_classifier(o);
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
  std::function<void(tasks::ClassifyTrainOptions&, const fs::path& dir)> set;  // the data options
  std::vector<std::string> message;  // {dir} is replaced by the folder
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
  tasks::ClassifyTrainOptions o = small_model();
  o.out = (dir / "run").string();
  o.epochs = 1;
  c.set(o, dir);
  std::vector<std::string> parts;
  for (const auto& part : c.message) parts.push_back(replace_dir(part, dir));
  EXPECT_ERROR_CONTAINS(tasks::train_classifier(o), parts);
  EXPECT_TRUE(no_outputs(dir / "run"));
  // The run created --out, so it removes it again (it is empty) rather than leave an empty folder.
  EXPECT_FALSE(fs::exists(dir / "run")) << "an empty --out folder was left behind";
  fs::remove_all(dir);
}

TEST(TrainClassify, FailedRunRemovesOnlyTheFoldersItCreated) {
  const fs::path dir = temp_dir("bad_out_folders");
  write_file(dir / "neg.txt", "差\n");
  auto run = [&](const fs::path& out) {
    tasks::ClassifyTrainOptions o = small_model();
    o.pos = (dir / "nope.txt").string();
    o.neg = (dir / "neg.txt").string();
    o.out = out.string();
    o.epochs = 1;
    tasks::train_classifier(o);
  };
  // Nested folders made by this run: all of them go, the folder above stays.
  EXPECT_ERROR_CONTAINS(run(dir / "a" / "b" / "c"), {"nope.txt"});
  EXPECT_FALSE(fs::exists(dir / "a")) << "folders created by the failed run were left behind";
  EXPECT_TRUE(fs::is_directory(dir));
  // A trailing slash names the same folder.
  EXPECT_THROW(run((dir / "d").string() + "/"), Error);
  EXPECT_FALSE(fs::exists(dir / "d"));
  // A folder that existed before is kept, empty or not, and so is what it holds.
  fs::create_directories(dir / "empty");
  fs::create_directories(dir / "full");
  write_file(dir / "full" / "keep.txt", "x\n");
  for (const char* out : {"empty", "full"}) {
    EXPECT_THROW(run(dir / out), Error) << out;
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
  tasks::ClassifyTrainOptions o = on_files(dir, dir / "run");
  o.minutes = 0.05;
  o.max_epochs = 2;
  tasks::train_classifier(o);
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
  tasks::ClassifyTrainOptions o = on_files(dir, dir / "run");
  o.minutes = 0.01;
  o.max_epochs = 2;
  std::string err;
  o.progress.write = [&](const std::string& s) { err += s; };
  tasks::train_classifier(o);
  EXPECT_NE(err.find("\nstep 1 epoch 1 loss "), std::string::npos) << err;
  EXPECT_EQ(err.find("/0 epoch"), std::string::npos) << err;
  fs::remove_all(dir);
}

std::string good_lines() { return synthetic(30, 0).first; }

void pos_neg(tasks::ClassifyTrainOptions& o, const fs::path& dir) {
  o.pos = (dir / "pos.txt").string();
  o.neg = (dir / "neg.txt").string();
}
auto table(const char* name) {
  return [name](tasks::ClassifyTrainOptions& o, const fs::path& dir) { o.data = (dir / name).string(); };
}

INSTANTIATE_TEST_SUITE_P(
    Cases, TrainClassifyBadInput,
    ::testing::Values(
        BadCase{"missing_file",
                {{"neg.txt", "差\n"}},
                [](tasks::ClassifyTrainOptions& o, const fs::path& dir) {
                  o.pos = (dir / "nope.txt").string();
                  o.neg = (dir / "neg.txt").string();
                },
                {"{dir}/nope.txt"}},
        BadCase{
            "empty_file", {{"pos.txt", good_lines()}, {"neg.txt", ""}}, pos_neg, {"{dir}/neg.txt", "empty"}},
        BadCase{"invalid_utf8",
                {{"pos.txt", good_lines()}, {"neg.txt", "差\n烂\nab\xff\xfe\n"}},
                pos_neg,
                {"neg.txt", "line 3"}},
        BadCase{
            "pos_without_neg",
            {},
            [](tasks::ClassifyTrainOptions& o, const fs::path& dir) { o.pos = (dir / "pos.txt").string(); },
            {"--pos and --neg go together"}},
        BadCase{"three_labels",
                {{"d.tsv", "text\tlabel\n好\tpos\n差\tneg\n一般\tmeh\n"}},
                table("d.tsv"),
                {"d.tsv", "line 4"}},
        BadCase{"one_label",
                {{"d.csv", "text,label\n好,pos\n很好,pos\n"}},
                table("d.csv"),
                {"exactly two classes", "'pos'"}},
        BadCase{
            "missing_column", {{"d.jsonl", "{\"text\": \"好\", \"y\": 1}\n"}}, table("d.jsonl"), {"label"}},
        BadCase{"unknown_format", {{"d.txt", "x\n"}}, table("d.txt"), {"--format tsv|csv|jsonl"}},
        BadCase{"empty_vocabulary",
                {{"pos.txt", good_lines()}, {"neg.txt", synthetic(30, 0).second}},
                [](tasks::ClassifyTrainOptions& o, const fs::path& dir) {
                  pos_neg(o, dir);
                  o.min_freq = 1000000;
                },
                {"vocabulary", "--min-freq 1000000"}},
        BadCase{"too_few_examples",
                {{"pos.txt", "好\n"}, {"neg.txt", "差\n"}},
                pos_neg,
                {"at least 10 per class"}},
        BadCase{"minutes_and_epochs",
                {},
                [](tasks::ClassifyTrainOptions& o, const fs::path&) { o.minutes = 1; },
                {"--minutes or --epochs"}}),
    [](const auto& info) { return std::string(info.param.name); });

// The data-folder lookup as a person meets it: ATTN_DATA_DIR (read once, at the
// start of the program) points at an empty folder.
TEST(TrainClassify, NoDataFoundNamesThePlacesAndTheScript) {
  const fs::path dir = temp_dir("nodata");
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
  tasks::ClassifyOptions co;
  co.texts = {"好"};
  co.model = (dir / "lm.attn").string();
  EXPECT_ERROR_CONTAINS(tasks::classify_texts(co), {"'lm'", "'classify'"});
  co.model = (dir / "missing.attn").string();
  EXPECT_ERROR_CONTAINS(tasks::classify_texts(co), {"missing.attn' not found"});
  write_file(dir / "bad.txt", "好\n\xc3\x28\n");
  EXPECT_ERROR_CONTAINS(
      tasks::nonblank_lines(testing::read_text(dir / "bad.txt"), (dir / "bad.txt").string()),
      {"bad.txt line 2: invalid UTF-8"});
  fs::remove_all(dir);
}

}  // namespace
}  // namespace attn
