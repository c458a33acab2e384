// attn classify [--model runs/classify/model.attn] TEXT... | --file F | -
// Label, probability and the characters [CLS] attended to most, per layer
// (head-averaged, and per head with --heads; layers and heads numbered from 0),
// from the exact weights the attention kernel computed. --json for
// machine-readable output. The work is tasks::classify_texts (attn/tasks/classify.h).
#include <attn/core/error.h>
#include <attn/io/files.h>
#include <attn/io/json.h>
#include <attn/tasks/classify.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "args.h"
#include "attribution_report.h"
#include "commands.h"

namespace attn::cli {

namespace {

const std::vector<OptionSpec>& classify_options() {
  static const std::vector<OptionSpec> specs = [] {
    std::vector<OptionSpec> v = {
        {"model", "FILE", "the trained model (default runs/classify/model.attn, from 'attn train classify')"},
        {"file", "FILE", "classify every non-blank line of FILE (UTF-8)"},
        {"top", "N", "characters listed per layer and head (default 5)"},
        {"heads", "", "also list the attention of every head"},
        {"json", "", "print JSON (one object with a \"results\" array)"},
        {"help", "", "this text"},
    };
    for (const auto& o : attrib::explain_options()) v.push_back(o);  // --explain and its options
    return v;
  }();
  return specs;
}

}  // namespace

int run_classify(const std::vector<std::string>& raw) {
  // Positional arguments (texts, or "-" for stdin) are taken out before the strict parser.
  std::vector<std::string> args, texts;
  bool from_stdin = false;
  for (std::size_t i = 0; i < raw.size(); ++i) {
    const std::string& a = raw[i];
    if (a == "-") {
      from_stdin = true;
    } else if (a.rfind("--", 0) == 0) {
      args.push_back(a);
      if (a.find('=') == std::string::npos)
        for (const auto& o : classify_options())
          if ("--" + o.name == a && !o.metavar.empty() && i + 1 < raw.size()) args.push_back(raw[++i]);
    } else {
      const std::size_t bad = json::find_invalid_utf8(a);
      ATTN_CHECK(bad == std::string::npos, "argument ", texts.size() + 1, ": invalid UTF-8 at byte ",
                 bad + 1);
      texts.push_back(a);
    }
  }
  const Args opts(args, classify_options());
  if (opts.has("help")) {
    std::printf(
        "usage: attn classify [--model FILE] [--heads] [--top N] [--json] TEXT... | --file FILE | -\n"
        "       attn classify --explain [--target LABEL] [--steps M] [--baseline pad|zeros] [--export F] "
        "TEXT\n\n"
        "Classifies each text with a model from 'attn train classify' and shows the label, its\n"
        "probability and the characters the [CLS] token attended to most in every layer (the\n"
        "attention weights the kernel computed, averaged over heads; --heads: per head).\n"
        "'-' reads one text per line from stdin.\n\n%s",
        format_options(classify_options()).c_str());
    return 0;
  }
  const int sources = !texts.empty() + opts.has("file") + from_stdin;
  ATTN_CHECK(sources == 1,
             "expected exactly one source of texts: TEXT arguments, --file FILE or '-' (stdin); got ",
             sources);
  if (opts.has("file")) {
    const std::string path = opts.str("file");
    texts = tasks::nonblank_lines(io::read_file(path, "text file"), path);
    ATTN_CHECK(!texts.empty(), path, ": no text to classify (the file is empty or blank)");
  } else if (from_stdin) {
    texts = tasks::nonblank_lines(io::read_stream(std::cin, "standard input"), "stdin");
    ATTN_CHECK(!texts.empty(), "stdin: no text to classify");
  }
  for (const auto& o : attrib::explain_options())
    ATTN_CHECK(o.name == "explain" || !opts.has(o.name) || opts.has("explain"), "--", o.name,
               " only applies with --explain");
  tasks::ClassifyOptions co;
  if (opts.has("top")) co.format.top = opts.integer("top", 1, 1000);
  co.format.heads = opts.has("heads");
  if (opts.has("model")) co.model = opts.str("model");
  co.texts = texts;
  const tasks::ClassifyResult r = tasks::classify_texts(co);
  if (opts.has("explain"))
    return attrib::run_classify_explain(*r.model, co.model, texts, r.classifications, opts);
  if (opts.has("json"))
    std::printf("%s\n", json::dump(r.json, 2).c_str());
  else
    std::fputs(r.text.c_str(), stdout);
  return 0;
}

}  // namespace attn::cli
