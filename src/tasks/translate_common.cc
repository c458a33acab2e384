#include <attn/core/error.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "tasks/translate_internal.h"

namespace attn::tasks::detail {

TeacherForcing teacher_forcing(const data::PairBatch& b) {
  TeacherForcing t;
  const int64_t B = b.tgt.size(0), Lt = b.tgt.size(1);
  ATTN_CHECK(Lt >= 2, "translate: target batch of length ", Lt, "; expected at least <s> and </s>");
  for (double v : b.src_lengths.to_vector()) {
    t.src_lengths.push_back(static_cast<int64_t>(v));
    t.source_tokens += static_cast<int64_t>(v);
  }
  for (double v : b.tgt_lengths.to_vector()) t.target_tokens += static_cast<int64_t>(v) - 1;
  t.tgt_in = b.tgt.slice(1, 0, Lt - 1).contiguous();  // [B, Lt-1]
  t.targets = b.tgt.slice(1, 1, Lt).contiguous();     // [B, Lt-1]
  (void)B;
  return t;
}

namespace {

std::string fmt(double v, const char* f = "%.3f") {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

std::string cell(std::string s) {
  for (std::size_t at = s.find('|'); at != std::string::npos; at = s.find('|', at + 2))
    s.replace(at, 1, "\\|");
  return s;
}

}  // namespace

std::string translate_report_markdown(const json::Value& r) {
  const json::Value& tr = r.at("training");
  const json::Value& b = r.at("test_bleu");
  const json::Value& c = r.at("config");
  std::string md = "# attn train translate: English -> Chinese\n\n";
  md += "Command: `" + r.at("command").as_string() + "`\n\n";
  md += "**Test BLEU: " + fmt(b.at("score").as_double(), "%.2f") + "** (" + b.at("signature").as_string() +
        ", " + std::to_string(b.at("pairs").as_int64()) + " held-out pairs, " + b.at("search").as_string() +
        ")\n\n";
  md += "    " + b.at("detail").as_string() + "\n\n";
  md += "| | |\n|---|---|\n";
  md += "| data | " + cell(r.at("data").at("file").as_string()) + ": " +
        std::to_string(r.at("data").at("lines_read").as_int64()) + " pairs read, " +
        r.at("data").at("deduplication").as_string() + " |\n";
  md += "| split | " + cell(r.at("split").as_string()) + " |\n";
  md += "| tokenizers | English BPE " + std::to_string(r.at("tokenizers").at("source_vocab").as_int64()) +
        " tokens, Chinese characters " + std::to_string(r.at("tokenizers").at("target_vocab").as_int64()) +
        " tokens |\n";
  md += "| model | EncoderDecoder " + std::to_string(c.at("encoder_layers").as_int64()) + "+" +
        std::to_string(c.at("decoder_layers").as_int64()) + " layers, d_model " +
        std::to_string(c.at("d_model").as_int64()) + ", " + std::to_string(c.at("heads").as_int64()) +
        " heads, d_ff " + std::to_string(c.at("d_ff").as_int64()) + ", " +
        std::to_string(r.at("parameters").as_int64()) + " parameters, label smoothing 0.1 |\n";
  md += "| training | " + std::to_string(tr.at("steps").as_int64()) + " steps, " +
        std::to_string(tr.at("epochs").as_int64()) + " epochs, batch " +
        std::to_string(tr.at("batch_size").as_int64()) + ", " + fmt(tr.at("seconds").as_double(), "%.0f") +
        " s, " + fmt(tr.at("tokens_per_second").as_double(), "%.0f") + " tokens/s; loss " +
        fmt(tr.at("first_loss").as_double()) + " -> " + fmt(tr.at("final_loss").as_double()) + " |\n";
  md += "| optimizer | " + tr.at("optimizer").as_string() + ", " + json::dump(tr.at("schedule")) + " |\n\n";
  md +=
      "## Validation loss per epoch\n\n| epoch | steps | train loss | validation loss | seconds "
      "|\n|---|---|---|---|---|\n";
  for (const auto& e : tr.at("epoch_log").items())
    md += "| " + std::to_string(e.at("epoch").as_int64()) + (e.at("complete").as_bool() ? "" : " (partial)") +
          " | " + std::to_string(e.at("steps").as_int64()) + " | " + fmt(e.at("train_loss").as_double()) +
          " | " + fmt(e.at("valid_loss").as_double()) + " | " + fmt(e.at("seconds").as_double(), "%.0f") +
          " |\n";
  md +=
      "\n## Held-out examples\n\nTatoeba sentence pairs, CC-BY 2.0 FR; attribution as in the corpus file.\n\n"
      "| English | reference | attn | attribution |\n|---|---|---|---|\n";
  for (const auto& x : r.at("examples").items())
    md += "| " + cell(x.at("source").as_string()) + " | " + cell(x.at("reference").as_string()) + " | " +
          cell(x.at("hypothesis").as_string()) + " | " + cell(x.at("attribution").as_string()) + " |\n";
  return md;
}

}  // namespace attn::tasks::detail
