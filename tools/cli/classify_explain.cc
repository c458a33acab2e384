// `attn classify --explain`: next to the attention [CLS] pays, the attribution
// of the prediction to every character (the library's attn/teach/attribution.h),
// as text, JSON (--json) and a viewer export (--export FILE, with the
// attribution; make_export is the one function that builds that export).
#include <attn/core/autograd.h>
#include <attn/core/error.h>
#include <attn/io/files.h>
#include <attn/models/text_classifier.h>
#include <attn/teach/attribution.h>

#include <cstdio>
#include <filesystem>

#include "attribution_report.h"
#include "classify_internal.h"

namespace attn::cli::attrib {

view::Export make_export(models::EncoderClassifier& model, const teach::AttributionInput& input,
                         const teach::AttributionResult& r, const std::string& model_name) {
  const int64_t L = static_cast<int64_t>(input.ids.size());
  view::Export e;
  e.model = model_name;
  e.text = input.text;
  e.tokens = input.tokens;
  view::AttentionSet set;
  set.key = "attention";
  set.label = "self-attention";
  set.row_tokens = set.col_tokens = input.tokens;
  {
    NoGradGuard ng;
    const bool was_training = model.is_training();
    model.eval();
    models::ClassifierCall call;
    call.capture = true;
    for (int64_t i = 0; i < L; ++i) call.capture_rows.push_back(i);
    const models::ModelOutput out =
        model.forward_embeddings(model.embed_tokens(Tensor::from(input.ids, {1, L})), call);
    model.train(was_training);
    for (const Tensor& w : out.attention) {  // w: [1, H, L, L]
      view::Layer layer;
      layer.heads = w.size(1);
      layer.rows = layer.cols = L;
      layer.w = w.to_vector();
      set.layers.push_back(std::move(layer));
    }
  }
  for (std::size_t l = 0; l < set.layers.size(); ++l) e.layer_names.push_back("layer " + std::to_string(l));
  e.sets.push_back(std::move(set));
  view::Attribution at;
  at.tokens = input.tokens;
  at.target = input.labels[r.a.target];
  at.baseline = models::baseline_name(r.a.baseline);
  at.steps = r.a.steps;
  at.has_completeness = true;
  at.completeness_error = r.a.completeness_error;
  at.methods = {{"ig", r.a.integrated_gradients},
                {"input_x_grad", r.a.input_x_grad},
                {"input_x_grad_norm", r.a.input_x_grad_norm}};
  e.attribution = std::move(at);
  // The export is validated as `attn view` would read it (shapes, row sums).
  return view::parse_export(view::export_json(e));
}

const std::vector<OptionSpec>& explain_options() {
  static const std::vector<OptionSpec> specs = {
      {"explain", "",
       "next to the attention of [CLS], the attribution of the prediction to each\n"
       "character (integrated gradients and input x gradient), sorted by |attribution|,\n"
       "with the rank correlation between the two (docs/attribution.md)"},
      {"target", "LABEL", "with --explain: the class to explain (default: the predicted one)"},
      {"steps", "M",
       "with --explain: integrated-gradients steps (default 32; raise it when the\ncompleteness error is "
       "large)"},
      {"baseline", "KIND", "with --explain: pad (every character [PAD], the default) or zeros"},
      {"export", "FILE",
       "with --explain and one text: write a viewer export (attn view FILE -o page.html)\nwith every layer's "
       "attention and the attribution"},
  };
  return specs;
}

int run_classify_explain(models::TextClassifier& model, const std::string& model_path,
                         const std::vector<std::string>& texts,
                         const std::vector<models::Classification>& results, const Args& opts) {
  teach::AttributionReportOptions o;
  if (opts.has("target")) o.target = opts.str("target");
  if (opts.has("steps")) o.attribution.steps = opts.integer("steps", 1, 10000);
  if (opts.has("baseline")) o.attribution.baseline = models::parse_baseline(opts.str("baseline"));
  ATTN_CHECK(!opts.has("export") || texts.size() == 1, "--export writes the export of one text; got ",
             texts.size(), " texts");
  classify::PrintOptions po;
  if (opts.has("top")) po.top = opts.integer("top", 1, 1000);
  po.heads = opts.has("heads");
  json::Value arr = json::Value::array();
  for (std::size_t i = 0; i < texts.size(); ++i) {
    const teach::AttributionInput in = teach::attribution_input(model, texts[i], results[i]);
    const teach::AttributionResult r = teach::attribute_prediction(model.model(), in, o);
    if (opts.has("json")) {
      json::Value j = classify::classification_json(texts[i], results[i], model.labels(), po);
      j.set("explain", teach::attribution_json(in, r));
      arr.push_back(std::move(j));
    } else {
      if (i > 0) std::printf("\n");
      std::fputs(classify::format_classification(texts[i], results[i], model.labels(), po).c_str(), stdout);
      std::printf("\n");
      std::fputs(teach::attribution_text(in, r).c_str(), stdout);
    }
    if (opts.has("export")) {
      const view::Export e =
          make_export(model.model(), in, r, std::filesystem::path(model_path).filename().string());
      io::write_file_atomically(opts.str("export"), view::export_json(e) + "\n");
      if (!opts.has("json"))
        std::printf("\nwrote %s: open it with  attn view %s -o page.html\n", opts.str("export").c_str(),
                    opts.str("export").c_str());
    }
  }
  if (opts.has("json")) {
    json::Value doc = json::Value::object({{"model", json::Value::string(model_path)}, {"results", arr}});
    std::printf("%s\n", json::dump(doc, 2).c_str());
  }
  return 0;
}

}  // namespace attn::cli::attrib
