// `attn explain --stages`: the explainer's stages (teach/stages.h) of one sentence, layer and head of
// a real model, as JSON (--json), as the explainer page in one offline HTML file (--html FILE), or as
// one SVG and one PNG per stage drawn without a browser (--export DIR). docs/explainer.md.
#include <attn/core/error.h>
#include <attn/io/files.h>
#include <attn/teach/lang.h>
#include <attn/teach/report.h>
#include <attn/teach/stages.h>
#include <attn/viz/explain_page.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "args.h"
#include "stage_png.h"

namespace attn::cli {
namespace {

const std::vector<OptionSpec>& stages_options() {
  static const std::vector<OptionSpec> specs = {
      {"stages", "", "this mode: every stage of attention on a sentence in a real model",
       "本模式：真实模型中一句话的注意力的每一步"},
      {"model", "NAME", "e5 (multilingual-e5-small, default), smollm2 (SmolLM2-135M-Instruct) or gemma3",
       "e5（multilingual-e5-small，默认）、smollm2（SmolLM2-135M-Instruct）或 gemma3"},
      {"model-file", "PATH", "the model's file, if not the installed one", "模型文件（不用已安装的那个时）"},
      {"sentence", "TEXT", "the sentence (or give it as an argument)", "句子（也可以作为参数给出）"},
      {"layer", "L", "the layer, from 0 (default 0)", "层，从 0 开始（默认 0）"},
      {"head", "H", "the head, from 0 (default 0)", "头，从 0 开始（默认 0）"},
      {"pad", "P",
       "e5: also show the mask on the sentence padded by P positions in a batch (default 0: none)",
       "e5：另外显示这句话在一批里被补齐 P 个位置时的填充掩码（默认 0：不显示）"},
      {"classifier", "FILE",
       "a review classifier (attn train classify): add its [CLS] attention beside integrated "
       "gradients (attention is not causality)",
       "一个评论分类器（attn train classify）：加上它 [CLS] 的注意力与积分梯度的对照"},
      {"ig-steps", "M", "integrated gradients: midpoint steps, 1..256 (default 32)",
       "积分梯度：中点法的步数，1..256（默认 50）"},
      {"baseline", "pad|zeros", "integrated gradients' baseline (default pad)", "积分梯度的基线（默认 pad）"},
      {"per-head", "", "the classifier's [CLS] attention of every head too",
       "同时给出分类器每个头的 [CLS] 注意力"},
      {"json", "", "print the stages as one JSON object (what the page reads)",
       "以一个 JSON 对象输出各步（页面读取的就是它）"},
      {"html", "FILE", "write the explainer page with these stages as one offline HTML file",
       "把带着这些数据的演示页面写成一个离线 HTML 文件"},
      {"export", "DIR", "write every stage as SVG and PNG into DIR (no browser; a CJK font draws Chinese)",
       "把每一步写成 SVG 和 PNG 放进 DIR（不需要浏览器；用中文字体绘制）"},
      {"lang", "zh|en", "the page's and the drawings' first language (default zh)",
       "页面和图的语言（默认 zh）"},
      {"help", "", "this text", "本说明"},
  };
  return specs;
}

std::string help_text(teach::Lang lang) {
  const bool zh = lang == teach::Lang::zh;
  return std::string(
             zh ? "用法：attn explain --stages [--model e5|smollm2|gemma3] \"句子\" [--layer L] [--head H]\n"
                  "                           [--pad P] [--classifier FILE]\n"
                  "                           [--json] [--html FILE] [--export DIR] [--lang zh|en]\n\n"
                  "在真实的预训练模型上，把一句话在一层、一个头里的注意力逐步算出来：词元 → 嵌入行 →\n"
                  "Q、K、V → Q·Kᵀ → ÷√d_k → 掩码 → 逐行 softmax → 权重 × V → 各头 → 拼接与 W_O →\n"
                  "残差与归一化。每个数都来自引擎。浏览器里一步步看：attn serve --explain e5，打开 "
                  "/explain。\n\n选项：\n"
                : "usage: attn explain --stages [--model e5|smollm2|gemma3] \"sentence\" [--layer L] [--head "
                  "H]\n"
                  "                           [--pad P] [--classifier FILE]\n"
                  "                           [--json] [--html FILE] [--export DIR] [--lang zh|en]\n\n"
                  "Every stage of attention on a sentence in one layer and head of a real pretrained model:\n"
                  "tokens -> embedding rows -> Q, K, V -> Q·Kᵀ -> ÷√d_k -> mask -> softmax row by row ->\n"
                  "weights × V -> the heads -> concatenation and W_O -> residual and norm. Every number is\n"
                  "the engine's. Step through it in a browser: attn serve --explain e5, then open "
                  "/explain.\n\n"
                  "Options:\n") +
         format_options(stages_options(), lang) +
         "\n  attn explain --stages \"今天下雨，我没带伞。\" --json\n"
         "  attn explain --stages \"今天下雨，我没带伞。\" --pad 4 --classifier model.attn --json\n"
         "  attn explain --stages --model smollm2 \"我没带伞\" --layer 3 --head 2 --html explain.html\n"
         "  attn explain --stages \"今天下雨，我没带伞。\" --export slides/\n";
}

}  // namespace

int run_explain_stages(const std::vector<std::string>& raw) {
  std::vector<std::string> argv, positional;
  for (std::size_t i = 0; i < raw.size(); ++i) {
    const std::string& a = raw[i];
    if (a.rfind("--", 0) != 0) {
      positional.push_back(a);
      continue;
    }
    argv.push_back(a);
    if (a.find('=') == std::string::npos)
      for (const auto& o : stages_options())
        if ("--" + o.name == a && !o.metavar.empty() && i + 1 < raw.size()) argv.push_back(raw[++i]);
  }
  const Args args(argv, stages_options());
  const teach::Lang lang = args.has("lang") ? teach::parse_lang(args.str("lang")) : teach::Lang::zh;
  if (args.has("help")) {
    std::fputs(help_text(lang).c_str(), stdout);
    return 0;
  }
  ATTN_CHECK(positional.size() + args.has("sentence") == 1,
             "--stages needs one sentence (an argument or --sentence TEXT); got ",
             positional.size() + args.has("sentence"));
  teach::StagesOptions o;
  if (args.has("model")) o.model = args.str("model");
  if (args.has("model-file")) o.path = args.str("model-file");
  o.request.text = args.has("sentence") ? args.str("sentence") : positional[0];
  constexpr int64_t big = int64_t{1} << 20;
  if (args.has("layer")) o.request.layer = args.integer("layer", 0, big);
  if (args.has("head")) o.request.head = args.integer("head", 0, big);
  if (args.has("pad")) o.request.pad = args.integer("pad", 0, big);
  ATTN_CHECK(o.request.pad == 0 || teach::stage_model_key(o.model) == "e5",
             "--pad: the padding view is for the encoder (e5); a decoder's mask is causal");
  teach::CausalityRequest cr;
  if (args.has("ig-steps")) cr.steps = args.integer("ig-steps", 1, 256);
  if (args.has("baseline")) cr.baseline = args.str("baseline");
  cr.per_head = args.has("per-head");
  ATTN_CHECK(cr.baseline == "pad" || cr.baseline == "zeros", "--baseline: expected pad or zeros; got '",
             cr.baseline, "'");
  const json::Value stages = args.has("classifier") ? teach::explain_stages(o, args.str("classifier"), cr)
                                                    : teach::explain_stages(o);
  const std::string lang_name = teach::lang_name(lang);
  bool wrote = false;
  if (args.has("html")) {
    viz::ExplainPageOptions po;
    po.lang = lang_name;
    io::write_file_atomically(args.str("html"), viz::explain_page_html(stages, po), "explain --html");
    std::fprintf(stderr, "wrote %s\n", args.str("html").c_str());
    wrote = true;
  }
  if (args.has("export")) {
    const std::string dir = args.str("export");
    std::filesystem::create_directories(dir);
    std::string note;
    for (const std::string& stage : viz::drawing_stages(stages)) {
      const viz::Drawing d = viz::stage_drawing(stages, stage, lang_name);
      const std::string stem = (std::filesystem::path(dir) / ("stage-" + stage)).string();
      io::write_file_atomically(stem + ".svg", viz::drawing_svg(d), "explain --export");
      std::fprintf(stderr, "wrote %s.svg\n", stem.c_str());
      if (!png_supported()) continue;
      write_png(d, stem + ".png", &note);
      std::fprintf(stderr, "wrote %s.png\n", stem.c_str());
    }
    if (!png_supported())
      std::fputs("note: this attn was built without FreeType and zlib: no PNG written\n", stderr);
    if (!note.empty()) std::fprintf(stderr, "note: %s\n", note.c_str());
    wrote = true;
  }
  if (args.has("json") || !wrote) std::fputs((teach::json_text(stages) + "\n").c_str(), stdout);
  return 0;
}

}  // namespace attn::cli
