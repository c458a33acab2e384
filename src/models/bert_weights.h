// BertModel's weights as the forward pass reads them: private to src/models/bert*.cc.
#pragma once

#include <attn/core/tensor.h>
#include <attn/models/bert.h>
#include <attn/ops/quantized.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

namespace attn::models {

// ============================================================================
// weights
// ============================================================================
struct BertModel::Weights {
  // Projection weights are stored transposed ([in, out]): BLAS reads them as the B of an NN
  // product and the small-M kernel streams their rows. With `packed` (below) they hold 32-column panels.
  struct Layer {
    Tensor wqkv, bqkv;  // [C, 3C], [3C]: query, key, value columns side by side
    Tensor wo, bo;      // [C, C], [C]
    Tensor ln1_w, ln1_b;
    Tensor w1, b1;  // [C, F], [F]
    Tensor w2, b2;  // [F, C], [C]
    Tensor ln2_w, ln2_b;
    // With q4_0_blocks: the same matrices as Q4_1 blocks ([out, in] rows; the query, key and value rows
    // stacked, as wqkv's columns) with their repacked copy for ops::Q8Dot.
    struct Quant {
      std::vector<std::byte> blocks;
      ops::QuantMatrix m;
    };
    Quant qqkv, qo, q1, q2;
  };
  Tensor word, pos, type;  // [V, C], [P, C], [T, C]; word undefined when word_rows reads the rows
  std::function<void(int64_t, float*)> word_rows;
  Tensor emb_ln_w, emb_ln_b;
  std::vector<Layer> layers;
  // wqkv, wo, w1 and w2 hold their packed form (ops::pack_weight_t, 32-column panels) instead of the
  // [in, out] matrix: packed once here, read contiguously by every product (issue 15).
  bool packed = false;
  bool quantized = false;  // every layer has its Quant matrices

  // Activation buffers kept between forward calls (one flat f32 block, grown on demand), so a batch
  // does not page-fault tens of megabytes of fresh memory in every call. A call that finds the
  // block in use (concurrent forwards), or needing more than kMaxCachedScratch floats, allocates its own.
  std::mutex scratch_mu;
  Tensor scratch;
};

namespace bert_detail {
// "a, b, c, ... (n more)": at most max_items names of a list, for messages.
std::string join(const std::vector<std::string>& v, std::size_t max_items = 12);
bool file_exists(const std::string& p);
}  // namespace bert_detail

}  // namespace attn::models
