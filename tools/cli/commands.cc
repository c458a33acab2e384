#include "commands.h"

namespace attn::cli {

const std::vector<Command>& commands() {
  static const std::vector<Command> list = {
      {"explain", "walk through attention step by step", run_explain},
      {"quiz", "test your understanding of attention", run_quiz},
      {"tutorial", "the self-attention tutorial section by section, computed (--lang zh|en)", run_tutorial},
      {"view", "see attention weights: an HTML page or a terminal heatmap", run_view},
      {"train", "train a model for a task and save it as one file", run_train},
      {"generate", "continue a prompt with SmolLM2 (GGUF) or a trained character LM (streamed)",
       run_generate},
      {"classify", "classify texts with a trained model; show what [CLS] attended to", run_classify},
      {"translate", "translate English to Chinese and show the cross-attention alignment", run_translate},
      {"chat", "talk to SmolLM2-135M-Instruct (interactive or from stdin)", run_chat},
      {"embed", "sentence embeddings from all-MiniLM-L6-v2 (json, npy or csv)", run_embed},
      {"similarity", "cosine similarity of two texts (all-MiniLM-L6-v2)", run_similarity},
      {"search", "semantic search over the lines of a file (all-MiniLM-L6-v2)", run_search},
      {"rerank", "score documents against a query with a cross-encoder (bge-reranker, ms-marco MiniLM)",
       run_rerank},
      {"attention", "a pretrained model's attention on a text: summary and export", run_attention},
#ifdef ATTN_HAVE_SERVE
      {"serve", "an OpenAI-compatible HTTP server: embeddings, chat, classification, attention", run_serve},
#endif
  };
  return list;
}

}  // namespace attn::cli
