// `attn view`: shows attention weights. Writes a self-contained HTML page
// (head, model, matrix and cross-attention views, drawn on <canvas> by the
// embedded script of src/viz/page.html) or prints a heatmap to the terminal;
// both are library code (include/attn/viz/view.h). The export format is
// described in docs/viewer.md.
#include <attn/core/error.h>
#include <attn/io/files.h>
#include <attn/teach/explain.h>
#include <attn/viz/view.h>

#include <cstdio>
#include <string>
#include <vector>

#include "args.h"
#include "commands.h"

namespace attn::cli {
namespace {

const std::vector<OptionSpec>& view_options() {
  static const std::vector<OptionSpec> specs = {
      {"output", "FILE", "write the HTML page to FILE (also -o FILE); written atomically"},
      {"demo", "", "instead of an export: the attn explain sentence, 2 layers x 4 heads, computed now"},
      {"demo-translation", "",
       "instead of an export: an encoder-decoder demo (encoder, decoder and\ncross-attention), computed now"},
      {"save-export", "FILE", "also write the (validated) export as JSON to FILE"},
      {"terminal", "", "print a heatmap of one layer and head to the terminal instead of a page"},
      {"layer", "L", "with --terminal: the layer, from 0 (default 0)"},
      {"head", "H", "with --terminal: the head, from 0 (default 0)"},
      {"set", "KEY",
       "with --terminal: attention, encoder_attention, decoder_attention or\ncross_attention (default: the "
       "first "
       "present)"},
      {"help", "", "this text"},
  };
  return specs;
}

std::string help_text() {
  return "usage: attn view EXPORT.json -o page.html\n"
         "       attn view --demo -o page.html\n"
         "       attn view EXPORT.json --terminal [--layer L] [--head H] [--set KEY]\n\n"
         "Shows attention weights. The page is one self-contained HTML file (no network):\n"
         "a head view (lines between tokens), a model view (every layer x head), a matrix\n"
         "view (heatmap, windowed for long inputs) and, for encoder-decoder exports, a\n"
         "cross-attention (alignment) view; each exports PNG and SVG. The export is\n"
         "validated first (shapes against token counts, no NaN or negative weights, rows\n"
         "summing to 1 within 0.001 or to 0 for fully masked rows); see docs/viewer.md.\n\n"
         "Options:\n" +
         format_options(view_options()) +
         "\nExamples:\n"
         "  attn view --demo -o demo.html\n"
         "  attn view --demo-translation -o translation.html\n"
         "  attn view export.json -o page.html\n"
         "  attn view export.json --terminal --layer 1 --head 3\n";
}

// The worked example of `attn explain` as the demos' input.
viz::DemoExample demo_example() {
  const teach::Example ex = teach::default_example();
  return {ex.words, ex.gloss, ex.d_model(), ex.X.v, ex.WQ.v, ex.WK.v, ex.WV.v, ex.WO.v};
}

// The example as the encoder's input and its translation, embedded by explain's
// seeded word generator, as the decoder's.
viz::DemoTranslation demo_translation_input() {
  viz::DemoTranslation t;
  t.source = demo_example();
  for (const std::string& w : t.target) {
    const std::vector<double> e = teach::generated_embedding(w, teach::kDefaultSeed, t.source.d_model);
    t.target_x.insert(t.target_x.end(), e.begin(), e.end());
  }
  return t;
}

}  // namespace

int run_view(const std::vector<std::string>& raw) {
  // One positional argument (the export) and -o are taken out before the
  // strict option parser sees the rest.
  std::vector<std::string> args;
  std::string input;
  for (std::size_t i = 0; i < raw.size(); ++i) {
    const std::string& a = raw[i];
    if (a == "-o") {
      ATTN_CHECK(i + 1 < raw.size(), "option -o needs a value (FILE); got nothing after it");
      args.push_back("--output");
      args.push_back(raw[++i]);
    } else if (!a.empty() && a[0] != '-') {
      ATTN_CHECK(input.empty(), "expected one export file; got '", input, "' and '", a, "'");
      input = a;
    } else {
      args.push_back(a);
      // Keep an option's value out of the positional check.
      if (a.size() > 2 && a.find('=') == std::string::npos)
        for (const auto& o : view_options())
          if ("--" + o.name == a && !o.metavar.empty() && i + 1 < raw.size()) args.push_back(raw[++i]);
    }
  }
  const Args opts(args, view_options());
  if (opts.has("help")) {
    std::fputs(help_text().c_str(), stdout);
    return 0;
  }
  const int sources = !input.empty() + opts.has("demo") + opts.has("demo-translation");
  ATTN_CHECK(sources == 1, "expected exactly one source: an export file, --demo or --demo-translation; got ",
             sources);
  const bool terminal = opts.has("terminal");
  ATTN_CHECK(terminal != opts.has("output"),
             terminal ? "--terminal prints to the terminal; -o/--output is not used"
                      : "expected -o FILE (the page to write) or --terminal");
  if (!terminal)
    for (const char* o : {"layer", "head", "set"})
      ATTN_CHECK(!opts.has(o), "--", o, " is only used with --terminal");

  const viz::Export e = opts.has("demo")               ? viz::demo_self_attention(demo_example())
                        : opts.has("demo-translation") ? viz::demo_translation(demo_translation_input())
                                                       : viz::parse_export(io::read_file(input, "export"));
  if (opts.has("save-export")) viz::save_export(opts.str("save-export"), e);
  if (terminal) {
    viz::TerminalOptions t;
    if (opts.has("set")) t.set = opts.str("set");
    if (opts.has("layer")) t.layer = opts.integer("layer", 0, 1 << 20);
    if (opts.has("head")) t.head = opts.integer("head", 0, 1 << 20);
    std::fputs(viz::terminal_heatmap(e, t).c_str(), stdout);
    return 0;
  }
  const std::string page = viz::page_html(e);
  io::write_file_atomically(opts.str("output"), page);
  std::printf("wrote %s (%zu bytes)\n", opts.str("output").c_str(), page.size());
  return 0;
}

}  // namespace attn::cli
