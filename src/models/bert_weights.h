// BertModel's weights as the forward pass reads them: private to src/models/bert*.cc.
#pragma once

#include <attn/core/tensor.h>
#include <attn/models/bert.h>
#include <attn/ops/weight_matrix.h>

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
  // The products' weights as ops::DenseMatrix (ops/weight_matrix.h: held in the layout the CPU's kernels
  // read, ops::dense_linear picks the kernel), with their quantized twins when the model has them.
  struct Layer {
    ops::DenseMatrix qkv;     // [3C, C]: the query, key and value rows stacked (outputs side by side)
    ops::DenseMatrix o;       // [C, C]
    ops::DenseMatrix up;      // [F, C]
    ops::DenseMatrix down;    // [C, F]
    Tensor bqkv, bo, b1, b2;  // [3C], [C], [F], [C]
    Tensor ln1_w, ln1_b, ln2_w, ln2_b;
  };
  Tensor word, pos, type;  // [V, C], [P, C], [T, C]; word undefined when word_rows reads the rows
  std::function<void(int64_t, float*)> word_rows;
  Tensor emb_ln_w, emb_ln_b;
  std::vector<Layer> layers;
  bool quantized = false;  // every matrix of every layer has its quantized twin

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
