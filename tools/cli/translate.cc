// attn translate: English -> Chinese with a model from `attn train translate`,
// and the cross-attention alignment: flags -> tasks::TranslateOptions ->
// tasks::translate_sentences (include/attn/tasks/translate.h) -> print.
// --export writes the encoder / decoder / cross-attention triple for `attn view`.
// See docs/translate.md.
#include <attn/core/error.h>
#include <attn/io/files.h>
#include <attn/io/json.h>
#include <attn/tasks/translate.h>
#include <attn/viz/attention.h>
#include <attn/viz/export.h>

#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "args.h"
#include "commands.h"

namespace attn::cli {
namespace {

const std::vector<OptionSpec>& specs() {
  static const std::vector<OptionSpec> s = {
      {"model", "FILE", "a model from 'attn train translate' (default runs/translate/model.attn)"},
      {"beam", "K", "beam width (default 4; 1 = greedy)"},
      {"alpha", "A", "length penalty alpha, ((5+n)/6)^alpha (default 0.6)"},
      {"max-new", "N", "most characters to generate (default: the model's max length - 1)"},
      {"top", "K", "source tokens listed per character (default 2)"},
      {"layers", "", "also show the strongest source token of every decoder layer (teacher-forced)"},
      {"export", "FILE", "write the encoder/decoder/cross attention of the (last) sentence for 'attn view'"},
      {"json", "", "print JSON instead of tables"},
      {"help", "", "this text"},
  };
  return s;
}

void usage(FILE* f) {
  std::fprintf(
      f,
      "usage: attn translate [--model runs/translate/model.attn] \"English sentence\" [more ...] "
      "[--beam 4 --alpha 0.6] [--json] [--layers] [--export FILE]\n\n"
      "Translates each sentence (or each line of stdin when the sentence is '-') and shows, for every\n"
      "generated character, the source tokens it attended to most: cross-attention of the last\n"
      "decoder layer, averaged over heads (exact weights captured while decoding). Source tokens\n"
      "are English BPE subwords; '\xE2\x96\x81' marks the start of a word.\n\n"
      "options:\n%s",
      format_options(specs()).c_str());
}

// Splits argv into option words (for Args) and positional sentences.
void split_positional(const std::vector<std::string>& argv, std::vector<std::string>* opts,
                      std::vector<std::string>* sentences) {
  for (std::size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a.size() > 2 && a.compare(0, 2, "--") == 0) {
      opts->push_back(a);
      if (a.find('=') != std::string::npos) continue;
      const std::string name = a.substr(2);
      for (const auto& s : specs())
        if (s.name == name && !s.metavar.empty() && i + 1 < argv.size()) opts->push_back(argv[++i]);
    } else {
      sentences->push_back(a);
    }
  }
}

void write_export(const tasks::TranslateResult& r, const std::string& model, const std::string& path) {
  viz::save_export(path,
                   viz::export_translation(r.translations.back(), r.last_capture, "attn translate: " + model),
                   "--export");
  std::fprintf(stderr, "wrote %s (open it with: attn view %s -o page.html)\n", path.c_str(), path.c_str());
}

}  // namespace

int run_translate(const std::vector<std::string>& argv) {
  std::vector<std::string> opt_words, sentences;
  split_positional(argv, &opt_words, &sentences);
  const Args a(opt_words, specs());
  if (a.has("help")) {
    usage(stdout);
    return 0;
  }
  if (sentences.size() == 1 && sentences[0] == "-") {
    sentences.clear();
    std::istringstream in(io::read_stream(std::cin, "standard input"));
    for (std::string line; std::getline(in, line);)
      if (line.find_first_not_of(" \t\r") != std::string::npos) sentences.push_back(line);
  }
  tasks::TranslateOptions o;
  o.sentences = sentences;
  if (a.has("model")) o.model = a.str("model");
  if (a.has("beam")) o.beam = a.integer("beam", 1, 64);
  if (a.has("alpha")) o.alpha = parse_number(a.str("alpha"), "--alpha");
  if (a.has("top")) o.top = a.integer("top", 1, 100);
  if (a.has("max-new")) o.max_new = a.integer("max-new", 1, 100000);
  o.layers = a.has("layers");
  o.capture = a.has("export");
  ATTN_CHECK(!sentences.empty(), "translate: expected an English sentence to translate (or '-' for stdin)");
  const tasks::TranslateResult r = tasks::translate_sentences(o);
  if (a.has("json"))
    std::printf("%s\n", json::dump(r.json, json::DumpOptions{2, true}).c_str());
  else
    std::fputs(r.text.c_str(), stdout);
  if (a.has("export")) write_export(r, o.model, a.str("export"));
  return 0;
}

}  // namespace attn::cli
