// `attn classify --explain`: next to the attention [CLS] pays, the attribution
// of the prediction to every character (the library's attn/teach/attribution.h),
// as text, JSON (--json) and a viewer export (--export FILE, with the
// attribution: teach::attribution_export).
#include <attn/core/autograd.h>
#include <attn/core/error.h>
#include <attn/io/files.h>
#include <attn/models/text_classifier.h>
#include <attn/tasks/classify.h>
#include <attn/teach/attribution.h>
#include <attn/viz/export.h>

#include <cstdio>
#include <filesystem>

#include "attribution_report.h"

namespace attn::cli::attrib {

const std::vector<OptionSpec>& explain_options() {
  static const std::vector<OptionSpec> specs = {
      {"explain", "",
       "next to the attention of [CLS], the attribution of the prediction to each\n"
       "character (integrated gradients and input x gradient), sorted by |attribution|,\n"
       "with the rank correlation between the two (docs/attribution.md)",
       "在 [CLS] 的注意力旁边，列出预测对每个字符的归因（积分梯度与\n"
       "输入 × 梯度），按 |归因| 排序，并给出两者的秩相关（docs/attribution.md）"},
      {"target", "LABEL", "with --explain: the class to explain (default: the predicted one)",
       "配合 --explain：要解释的类别（默认：预测的类别）"},
      {"steps", "M",
       "with --explain: integrated-gradients steps (default 32; raise it when the\ncompleteness error is "
       "large)",
       "配合 --explain：积分梯度的步数（默认 32；完备性误差大时调高）"},
      {"baseline", "KIND", "with --explain: pad (every character [PAD], the default) or zeros",
       "配合 --explain：pad（每个字符都换成 [PAD]，默认）或 zeros（全零）"},
      {"export", "FILE",
       "with --explain and one text: write a viewer export (attn view FILE -o page.html)\nwith every layer's "
       "attention and the attribution",
       "配合 --explain 且只有一条文本时：写出一个查看器导出文件（attn view FILE -o page.html），\n"
       "包含每一层的注意力和归因"},
      {"lang", "zh|en",
       "with --explain: the language of the report (default: from LC_ALL / LC_MESSAGES /\nLANG, else en); "
       "the numbers are the same in both",
       "配合 --explain：报告的语言（默认：取自 LC_ALL / LC_MESSAGES / LANG，\n否则为 "
       "en）；两种语言中的数字完全相同"},
  };
  return specs;
}

int run_classify_explain(models::TextClassifier& model, const std::string& model_path,
                         const std::vector<std::string>& texts,
                         const std::vector<models::Classification>& results, const Args& opts) {
  teach::AttributionReportOptions o;
  o.lang = opts.has("lang") ? teach::parse_lang(opts.str("lang")) : teach::default_lang();
  if (opts.has("target")) o.target = opts.str("target");
  if (opts.has("steps")) o.attribution.steps = opts.integer("steps", 1, 10000);
  if (opts.has("baseline")) o.attribution.baseline = models::parse_baseline(opts.str("baseline"));
  ATTN_CHECK(!opts.has("export") || texts.size() == 1, "--export writes the export of one text; got ",
             texts.size(), " texts");
  tasks::ClassifyFormat po;
  if (opts.has("top")) po.top = opts.integer("top", 1, 1000);
  po.heads = opts.has("heads");
  po.chinese = o.lang == teach::Lang::zh;
  json::Value arr = json::Value::array();
  for (std::size_t i = 0; i < texts.size(); ++i) {
    const teach::AttributionInput in = teach::attribution_input(model, texts[i], results[i]);
    const teach::AttributionResult r = teach::attribute_prediction(model.model(), in, o);
    if (opts.has("json")) {
      json::Value j = tasks::classification_json(texts[i], results[i], model.labels(), po);
      json::Value ex = teach::attribution_json(in, r);
      ex.set("lang", json::Value::string(teach::lang_name(o.lang)));
      j.set("explain", std::move(ex));
      arr.push_back(std::move(j));
    } else {
      if (i > 0) std::printf("\n");
      std::fputs(tasks::format_classification(texts[i], results[i], model.labels(), po).c_str(), stdout);
      std::printf("\n");
      std::fputs(teach::attribution_text(in, r, o.lang).c_str(), stdout);
    }
    if (opts.has("export")) {
      viz::save_export(opts.str("export"),
                       teach::attribution_export(model.model(), in, r,
                                                 std::filesystem::path(model_path).filename().string()),
                       "--export");
      if (!opts.has("json"))
        std::printf(o.lang == teach::Lang::zh ? "\n已写入 %s：用  attn view %s -o page.html  打开\n"
                                              : "\nwrote %s: open it with  attn view %s -o page.html\n",
                    opts.str("export").c_str(), opts.str("export").c_str());
    }
  }
  if (opts.has("json")) {
    json::Value doc = json::Value::object({{"model", json::Value::string(model_path)}, {"results", arr}});
    std::printf("%s\n", json::dump(doc, 2).c_str());
  }
  return 0;
}

}  // namespace attn::cli::attrib
