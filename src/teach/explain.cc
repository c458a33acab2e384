// The explain modes' entry points (attn/teach/explain.h): options in, Report out.
#include <attn/core/error.h>
#include <attn/teach/explain.h>

#include <string>

#include "explain_internal.h"

namespace attn::teach {

Page page_in(Lang lang) {
  Page page;
  page.lang = lang;
  return page;
}

Report finish(Page& page) {
  page.json.set("lang", jv(lang_name(page.lang)));
  return std::move(page);
}

Report walkthrough(const WalkthroughOptions& options) {
  const Example ex = example_of(options.sentence);
  Page page = page_in(options.lang);
  walkthrough(ex, resolve_query(ex, options.query), page);
  return finish(page);
}

Report softmax_scores(const ScoresOptions& options) {
  ATTN_CHECK(!options.scores.empty(), "--scores: expected at least one score; got none");
  ATTN_CHECK(options.scores.size() <= 1000, "--scores: expected at most 1000 numbers; got ",
             options.scores.size());
  ATTN_CHECK(options.tokens.empty() || options.tokens.size() == options.scores.size(), "--tokens: expected ",
             options.scores.size(), " names (one per score); got ", options.tokens.size());
  Page page = page_in(options.lang);
  softmax_of_scores(options.scores, options.tokens, page);
  return finish(page);
}

Report multi_head(const MultiHeadOptions& options) {
  const Example ex = example_of(options.sentence);
  ATTN_CHECK(options.heads >= 1 && options.heads <= ex.d_model(), "--heads must be in [1, ", ex.d_model(),
             "]; got ", options.heads);
  Page page = page_in(options.lang);
  multi_head(ex, resolve_query(ex, options.query), options.heads, page);
  return finish(page);
}

Report cost(const CostOptions& options) {
  ATTN_CHECK(options.n >= 1 && options.d >= 1 && options.batch >= 1,
             "--cost: expected --n, --d and --batch >= 1; got n = ", options.n, ", d = ", options.d,
             ", batch = ", options.batch);
  ATTN_CHECK(options.heads >= 1 && options.heads <= options.d, "--heads must be in [1, ", options.d,
             "]; got ", options.heads);
  Page page = page_in(options.lang);
  cost(options, page);
  return finish(page);
}

Report mask(const MaskOptions& options) {
  const Example ex = example_of(options.sentence);
  const std::string& kind = options.kind;
  ATTN_CHECK(kind == "causal" || kind == "padding" || kind == "window",
             "--mask: expected causal, padding or window; got '", kind, "'");
  const bool want_length = kind == "padding", want_window = kind == "window";
  ATTN_CHECK((options.length >= 0) == want_length,
             want_length ? "--mask padding needs --length L (real tokens, 0.." + std::to_string(ex.n()) + ")"
                         : "--length only applies to --mask padding; got --mask " + kind);
  ATTN_CHECK((options.window >= 0) == want_window,
             want_window ? "--mask window needs --window W (>= 0)"
                         : "--window only applies to --mask window; got --mask " + kind);
  ATTN_CHECK(
      !options.causal || want_window,
      "--causal with --mask only applies to --mask window (--mask causal is causal already); got --mask ",
      kind);
  if (want_length)
    ATTN_CHECK(options.length <= ex.n(), "--length must be in [0, ", ex.n(), "]; got ", options.length);
  Page page = page_in(options.lang);
  mask(ex, options, page);
  return finish(page);
}

}  // namespace attn::teach
