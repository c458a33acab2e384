// Integrated gradients on a real review classifier (`attn train classify --encoder e5`, issue 41):
//   1. convergence: the completeness error (Σ IG − (f(text) − f(baseline))) / (f(text) − f(baseline)) of
//      the midpoint rule at each m of --steps, with the special tokens (<s>, </s>) moved from the
//      baseline like the others (--keep none, the old panel) and kept at their own embeddings (the
//      default now, teach::AttributionReportOptions::keep_special);
//   2. time: the explainer's causality panel (teach::causality_panel) per text, and one batch of path
//      points through the forward and the backward, each timed on its own.
//
//   attribution_bench --model runs/classify/model.attn [--texts FILE] [--n 8] [--steps 20,50,100,256]
//                     [--baseline pad|zeros] [--batch 16] [--threads N] [--panel-steps 20]
//
// Texts: one per line from --texts (the first --n), else eight built-in reviews. Prints one JSON line
// per text and m, then a summary per m and keep, then the timings.
#include <attn/core/autograd.h>
#include <attn/core/parallel.h>
#include <attn/models/attribution.h>
#include <attn/models/text_classifier.h>
#include <attn/ops/basic.h>
#include <attn/teach/attribution.h>
#include <attn/teach/stages.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "bench_util.h"

using namespace attn;
using attn::bench::now_s;
using attn::bench::parse_list;

namespace {

std::string cpu_model() {  // "model name" of /proc/cpuinfo
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos)
      return line.substr(line.find(':') + 2);
  return "?";
}

const char* const kTexts[] = {
    "这个东西质量很好，物流也快",           "书的质量很差,味道也很大.看一会就眼睛疼",
    "我到现在还没有收到书呢，你们在干吗？", "这口锅一点也不粘锅，很好用",
    "虽然便宜，但是用了两天就坏了",         "酒店位置不错，房间干净，服务也热情",
    "电池不耐用，屏幕还有坏点，很失望",     "孩子很喜欢这本书，图画漂亮，故事也有趣"};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_path, texts_path, baseline = "pad";
  std::vector<int64_t> steps = {20, 50, 100, 256};
  int64_t n = 8, batch = 16, panel_steps = 20;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "attribution_bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--model")
      model_path = next();
    else if (a == "--texts")
      texts_path = next();
    else if (a == "--n")
      n = std::stoll(next());
    else if (a == "--steps")
      steps = parse_list(next());
    else if (a == "--baseline")
      baseline = next();
    else if (a == "--batch")
      batch = std::stoll(next());
    else if (a == "--panel-steps")
      panel_steps = std::stoll(next());
    else if (a == "--threads")
      set_num_threads(std::stoi(next()));
    else {
      std::fprintf(stderr, "attribution_bench: unknown option %s\n", a.c_str());
      return 2;
    }
  }
  if (model_path.empty()) {
    std::fprintf(stderr,
                 "attribution_bench: --model FILE (a classifier of attn train classify) is required\n");
    return 2;
  }
  std::vector<std::string> texts;
  if (!texts_path.empty()) {
    std::ifstream in(texts_path);
    for (std::string line; std::getline(in, line) && static_cast<int64_t>(texts.size()) < n;)
      if (!line.empty()) texts.push_back(line);
  } else {
    for (const char* t : kTexts)
      if (static_cast<int64_t>(texts.size()) < n) texts.emplace_back(t);
  }
  auto clf = models::TextClassifier::load(model_path);
  std::printf("{\"cpu\": \"%s\", \"threads\": %d, \"model\": \"%s\", \"texts\": %zu, \"baseline\": \"%s\"}\n",
              cpu_model().c_str(), num_threads(), model_path.c_str(), texts.size(), baseline.c_str());

  // 1. convergence
  std::vector<std::vector<double>> errs[2];  // [keep][m index][text]
  for (auto& e : errs) e.assign(steps.size(), {});
  for (const std::string& text : texts) {
    models::Classification c;
    c.ids = clf->input_ids(text, c);
    const teach::AttributionInput in = teach::attribution_input(*clf, text, c);
    for (int keep = 0; keep < 2; ++keep)
      for (std::size_t si = 0; si < steps.size(); ++si) {
        teach::AttributionReportOptions o;
        o.attribution.steps = steps[si];
        o.attribution.batch = batch;
        o.attribution.rule = models::AttributionRule::midpoint;
        o.attribution.baseline = models::parse_baseline(baseline);
        o.keep_special = keep == 1;
        const models::Attribution a = teach::attribute_prediction(clf->model(), in, o).a;
        const double rel = a.completeness_error / (a.f_input - a.f_baseline);
        errs[keep][si].push_back(rel);
        std::printf(
            "{\"text\": \"%s\", \"L\": %zu, \"keep\": \"%s\", \"m\": %lld, \"f_input\": %.6f, "
            "\"f_baseline\": %.6f, \"completeness_error\": %.3e, \"relative\": %.3e}\n",
            text.c_str(), in.ids.size(), keep ? "special" : "none", static_cast<long long>(steps[si]),
            a.f_input, a.f_baseline, a.completeness_error, rel);
        std::fflush(stdout);
      }
  }
  for (int keep = 0; keep < 2; ++keep)
    for (std::size_t si = 0; si < steps.size(); ++si) {
      std::vector<double> abs;
      for (double v : errs[keep][si]) abs.push_back(std::fabs(v));
      std::printf(
          "{\"summary\": \"relative completeness error\", \"keep\": \"%s\", \"m\": %lld, \"median_abs\": "
          "%.3e, \"max_abs\": %.3e}\n",
          keep ? "special" : "none", static_cast<long long>(steps[si]), median(abs),
          *std::max_element(abs.begin(), abs.end()));
    }

  // 2. time: the panel, and one batch of path points forward and backward.
  std::vector<double> panel_s;
  for (const std::string& text : texts) {
    const double t0 = now_s();
    teach::causality_panel(*clf, {.text = text, .steps = panel_steps, .baseline = baseline});
    panel_s.push_back(now_s() - t0);
  }
  std::printf("{\"time\": \"causality panel\", \"steps\": %lld, \"median_s\": %.3f, \"max_s\": %.3f}\n",
              static_cast<long long>(panel_steps), median(panel_s),
              *std::max_element(panel_s.begin(), panel_s.end()));
  {
    models::EncoderClassifier& m = clf->model();
    m.eval();
    std::vector<Tensor> frozen;
    for (auto& [name, p] : m.named_parameters())
      if (p.requires_grad()) frozen.push_back(p), p.set_requires_grad(false);
    models::Classification c;
    c.ids = clf->input_ids(texts.front(), c);
    const int64_t L = static_cast<int64_t>(c.ids.size()), C = m.config().d_model;
    std::vector<int64_t> ids(c.ids.begin(), c.ids.end());
    Tensor e0;
    {
      NoGradGuard ng;
      e0 = m.embed_tokens(Tensor::from(ids, {1, L}));
    }
    for (int64_t nb : {int64_t{1}, batch}) {
      std::vector<double> fwd, bwd;
      for (int r = 0; r < 3; ++r) {
        Tensor e = e0.expand({nb, L, C}).contiguous();
        e.set_requires_grad(true);
        const double t0 = now_s();
        models::ClassifierCall call;
        Tensor f = slice(m.forward_embeddings(e, call).logits, 1, 0, 1);
        const double t1 = now_s();
        sum(f).backward();
        fwd.push_back(t1 - t0);
        bwd.push_back(now_s() - t1);
      }
      std::printf(
          "{\"time\": \"one batch of path points\", \"points\": %lld, \"L\": %lld, \"forward_s\": %.4f, "
          "\"backward_s\": %.4f, \"per_point_s\": %.4f}\n",
          static_cast<long long>(nb), static_cast<long long>(L), median(fwd), median(bwd),
          (median(fwd) + median(bwd)) / static_cast<double>(nb));
    }
    for (auto& p : frozen) p.set_requires_grad(true);
  }
  return 0;
}
