// tasks::train_classifier's progress lines, the pieces of its reports (report.json, report.md) that the
// from-scratch model and the fine-tune share, and its output folder (see classify_train_internal.h).
#include <attn/data/split.h>
#include <attn/io/files.h>
#include <attn/io/json.h>
#include <attn/models/baseline.h>
#include <attn/models/text_classifier.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "tasks/classify_train_internal.h"
#include "tasks/util.h"

namespace attn::tasks::classify_detail {

using detail::duration;
using detail::fmt;
using detail::pct;

// What a fine-tune with the embeddings frozen keeps frozen, for the log and the report: the embeddings and
// the lowest k layers ("layers 0-(k-1)"), or the embeddings alone when k is 0.
std::string frozen_part_name(int64_t k) {
  return k > 0 ? "embeddings and layers 0-" + std::to_string(k - 1) : std::string("embeddings");
}

// ---- progress -----------------------------------------------------------------------------------

namespace {

// "step 12/340", or "step 12" while the total is not known yet (0: a time budget's
// schedule is fitted after the first steps).
std::string step_str(int64_t step, int64_t total) {
  std::string s = "step ";  // appended, not "step " + ...: GCC 12 warns (-Wrestrict) on that falsely
  s += std::to_string(step);
  if (total > 0) {
    s += '/';
    s += std::to_string(total);
  }
  return s;
}

}  // namespace

void StepProgress::step(int64_t step, int64_t total, int64_t epoch, double loss, double tokens_per_s,
                        double eta_s) {
  if (!sink_) return;
  ema_ = step == 1 ? loss : 0.95 * ema_ + 0.05 * loss;
  const double frac = total > 0 ? std::min(1.0, static_cast<double>(step) / total) : 0.0;
  char line[256];
  if (sink_.terminal) {
    const int width = 24, filled = static_cast<int>(frac * width);
    std::string bar(1, '[');  // appended: GCC 12 warns (-Wrestrict) falsely on "[" + ...
    bar.append(filled, '#').append(width - filled, '.').push_back(']');
    std::snprintf(line, sizeof line, "\r%s %3.0f%% %s epoch %lld loss %.4f %.0f tok/s ETA %s ", bar.c_str(),
                  100 * frac, step_str(step, total).c_str(), static_cast<long long>(epoch + 1), ema_,
                  tokens_per_s, total > 0 ? duration(eta_s).c_str() : "?");
    sink_(line);
    open_ = true;
  } else if (step == 1 || step % 50 == 0 || step == total) {
    std::snprintf(line, sizeof line, "%s epoch %lld loss %.4f %.0f tok/s ETA %s\n",
                  step_str(step, total).c_str(), static_cast<long long>(epoch + 1), ema_, tokens_per_s,
                  total > 0 ? duration(eta_s).c_str() : "?");
    sink_(line);
  }
}

void StepProgress::note(const std::string& s) {
  if (!sink_) return;
  if (open_) sink_("\n");
  open_ = false;
  sink_(s + "\n");
}

void StepProgress::done() {
  if (open_ && sink_) sink_("\n");
  open_ = false;
}

void record_eval(std::vector<HistoryRow>& history, StepProgress& progress, const train::FitEval& e) {
  history.push_back({e.step, e.epoch, e.train_loss, e.score.loss, e.score.score, e.lr, e.seconds});
  progress.note("step " + std::to_string(e.step) + " epoch " + std::to_string(e.epoch + 1) + ": train loss " +
                fmt("%.4f", e.train_loss) + ", valid loss " + fmt("%.4f", e.score.loss) +
                ", valid accuracy " + pct(e.score.score) + (e.best ? " (best)" : ""));
}

// ---- report pieces --------------------------------------------------------------------------------

Value int_array(const std::vector<int64_t>& v) {
  Value a = Value::array();
  for (int64_t x : v) a.push_back(Value::integer(x));
  return a;
}

std::string hex64(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(v));
  return buf;
}

Value labels_json(const std::vector<std::string>& names) {
  Value l = Value::array();
  for (const auto& n : names) l.push_back(Value::string(n));
  return l;
}

Value history_json(const std::vector<HistoryRow>& history) {
  Value hist = Value::array();
  for (const auto& h : history)
    hist.push_back(Value::object({{"step", Value::integer(h.step)},
                                  {"epoch", Value::integer(h.epoch + 1)},
                                  {"train_loss", Value::number(h.train_loss)},
                                  {"valid_loss", Value::number(h.valid_loss)},
                                  {"valid_accuracy", Value::number(h.valid_accuracy)},
                                  {"lr", Value::number(h.lr)},
                                  {"seconds", Value::number(h.seconds)}}));
  return hist;
}

Value clean_eval_json(const ClassifyTrainOptions& s, const std::optional<data::Dataset>& eval_set,
                      const std::optional<models::Metrics>& model, const Baseline& base,
                      const std::vector<std::string>& labels) {
  if (!eval_set) return Value();
  return Value::object({{"file", Value::string(s.eval)},
                        {"count", Value::integer(eval_set->size())},
                        {"model", model->to_json(labels)},
                        {"baseline", base.eval->to_json(labels)},
                        {"logistic_regression", base.lr_eval->to_json(labels)}});
}

std::string metrics_table_head(const std::vector<std::string>& labels) {
  std::string md = "| model | accuracy | macro F1";
  for (const auto& l : labels) md += " | " + l + " P / R / F1";
  md += " |\n|---|---:|---:";
  for (std::size_t i = 0; i < labels.size(); ++i) md += "|---:";
  md += "|\n";
  return md;
}

// Markdown table of one set of metrics.
std::string metrics_rows(const std::string& name, const models::Metrics& m) {
  std::string s = "| " + name + " | " + pct(m.accuracy) + " | " + fmt("%.4f", m.macro_f1);
  for (const auto& c : m.per_class)
    s += " | " + fmt("%.4f", c.precision) + " / " + fmt("%.4f", c.recall) + " / " + fmt("%.4f", c.f1);
  return s + " |\n";
}

std::string confusion_md(const std::string& name, const models::Metrics& m,
                         const std::vector<std::string>& labels) {
  std::string s = "\n";
  s += name;
  s += " (rows: true label, columns: predicted)\n\n| |";
  for (const auto& l : labels) s += " " + l + " |";
  s += "\n|---|";
  for (std::size_t i = 0; i < labels.size(); ++i) s += "---:|";
  s += "\n";
  for (std::size_t r = 0; r < labels.size(); ++r) {
    s += "| " + labels[r] + " |";
    for (int64_t v : m.confusion[r]) {
      s += ' ';
      s += std::to_string(v);
      s += " |";
    }
    s += "\n";
  }
  return s;
}

// ---- the output folder ----------------------------------------------------------------------------

CreatedFolders::CreatedFolders(const std::string& path) {
  std::error_code ec;
  fs::path start = fs::path(path).lexically_normal();
  if (!start.has_filename()) start = start.parent_path();  // "a/b/" -> "a/b"
  for (fs::path p = start; !p.empty() && !fs::exists(p, ec); p = p.parent_path()) {
    missing_.insert(missing_.begin(), p);
    if (p == p.parent_path() || !p.has_relative_path()) break;
  }
}

CreatedFolders::~CreatedFolders() {
  if (kept_) return;
  std::error_code ec;
  for (auto it = missing_.rbegin(); it != missing_.rend(); ++it) {
    if (!fs::is_directory(*it, ec) || !fs::is_empty(*it, ec) || ec) return;
    fs::remove(*it, ec);
  }
}

void write_outputs(const std::string& out, const models::TextClassifier& clf, const Value& extra,
                   const data::Split& split, const std::string& sample_text, const Value& report,
                   const std::string& md) {
  io::StagedFolder stage(out, "");
  clf.save(stage.path("model.attn"), extra);
  split.save(stage.path("split.json"));
  io::write_file_atomically(stage.path("test-sample.txt"), sample_text);
  io::write_file_atomically(stage.path("report.json"), json::dump(report, 2) + "\n");
  io::write_file_atomically(stage.path("report.md"), md);
  stage.commit();
}

void fill_result(ClassifyTrainResult& result, const ClassifyTrainOptions& s, Value report, std::string md,
                 const models::Metrics& test, const Baseline& base,
                 const std::optional<models::Metrics>& eval_metrics) {
  result.report = std::move(report);
  result.report_md = std::move(md);
  result.test_accuracy = test.accuracy;
  result.baseline_test_accuracy = base.test.accuracy;
  result.lr_test_accuracy = base.lr_test.accuracy;
  if (eval_metrics) {
    result.eval_accuracy = eval_metrics->accuracy;
    result.baseline_eval_accuracy = base.eval->accuracy;
    result.lr_eval_accuracy = base.lr_eval->accuracy;
  }
  result.test_count = test.count;
  result.model_path = (fs::path(s.out) / "model.attn").string();
}

}  // namespace attn::tasks::classify_detail
