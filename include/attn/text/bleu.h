// Corpus BLEU (Papineni et al. 2002) with the conventions of sacreBLEU 2.x, so
// scores are comparable with published numbers and with `sacrebleu -tok zh`.
//
//   BLEU = BP · exp( (1/N) Σ_n log p_n ) · 100,  N = 4
//   p_n  = Σ_seg clipped matched n-grams / Σ_seg hypothesis n-grams  (corpus totals)
//   BP   = 1 if c >= r else exp(1 − r / c)  (c = hypothesis tokens, r = closest reference lengths)
//
// Smoothing is sacreBLEU's default "exp" (mteval-v13a, Chen & Cherry method 3):
// the k-th order with zero matches gets p_n = 1 / (2^k · total_n). No match at
// any order gives 0. With several references per segment, a hypothesis n-gram
// is clipped to its largest count in any reference, and r is the reference
// length closest to the hypothesis length (the shorter one on ties).
//
// Tokenizers (applied to hypotheses and references alike):
//   none  the segment as it is (n-grams are cut at whitespace).
//   13a   mteval-v13a: drops "<skipped>", joins "-\n", unescapes &quot; &amp; &lt; &gt;,
//         then the regex rules below.
//   zh    sacreBLEU's TokenizerZh: every "Chinese" character is surrounded by
//         spaces, then the regex rules. The character ranges are sacreBLEU's
//         table, INCLUDING its two Python escape slips: '\u20000' .. '\u2a6d6'
//         is really U+2001..U+2A6D (general punctuation, arrows, symbols: e.g.
//         '…' and '’' are split off) and '\u2f800' .. '\u2fa1d' is U+2F81..U+2FA1;
//         the ideographs of extensions B.. are NOT split. Reproducing this is
//         what makes the scores equal sacreBLEU's.
//   regex rules (both): every ASCII punctuation mark except ' , - . is split off;
//         '.' and ',' are split off unless between digits; '-' after a digit is
//         split off; whitespace runs become one space.
// Lower-casing (BleuOptions::lowercase) is ASCII only (sacreBLEU's -lc also
// lower-cases other scripts).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace attn::text {

enum class BleuTokenizer { none, v13a, zh };

// "none", "13a", "zh" <-> the enum; parse throws attn::Error on anything else.
const char* bleu_tokenizer_name(BleuTokenizer t);
BleuTokenizer parse_bleu_tokenizer(std::string_view name);

struct BleuOptions {
  BleuTokenizer tokenizer = BleuTokenizer::v13a;
  bool lowercase = false;  // ASCII only
  int max_order = 4;
};

struct BleuScore {
  double score = 0;                // 0..100
  std::vector<int64_t> correct;    // per order 1..max_order: clipped matches
  std::vector<int64_t> total;      // per order: hypothesis n-grams
  std::vector<double> precisions;  // per order, in percent (after smoothing)
  double bp = 0;                   // brevity penalty
  int64_t sys_len = 0, ref_len = 0;
  double ratio() const { return ref_len > 0 ? static_cast<double>(sys_len) / ref_len : 0.0; }
  // "BLEU = 23.45 55.1/30.2/18.0/11.1 (BP = 1.000 ratio = 1.012 hyp_len = 1234 ref_len = 1219)",
  // sacreBLEU's format.
  std::string describe() const;
};

// The tokenised segment as sacreBLEU's tokenizer returns it (13a, zh: tokens
// joined by one space; none: the segment without trailing whitespace).
std::string bleu_tokenize(std::string_view segment, BleuTokenizer tokenizer);

// hypotheses: one per segment; references: one or more reference streams, each
// holding one reference per segment (sacreBLEU's corpus_score(hyps, [refs1, refs2])).
// Throws attn::Error when a stream's length differs from the hypotheses', when
// there is no stream, or on invalid UTF-8 (naming the stream and segment).
BleuScore corpus_bleu(const std::vector<std::string>& hypotheses,
                      const std::vector<std::vector<std::string>>& references,
                      const BleuOptions& options = {});

}  // namespace attn::text
