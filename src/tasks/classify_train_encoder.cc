// A pretrained encoder for tasks::train_classifier's fine-tune (see classify_train_internal.h): opening
// it, its frozen part computed once per example, the trained layers evaluated over those cached
// hidden states, and the fine-tune's optimizer.
#include <attn/core/autograd.h>
#include <attn/core/error.h>
#include <attn/core/random.h>
#include <attn/io/e5_container.h>
#include <attn/io/model_files.h>
#include <attn/io/safetensors.h>
#include <attn/models/bert.h>
#include <attn/models/bert_classifier.h>
#include <attn/ops/basic.h>
#include <attn/train/optim.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "tasks/classify_train_internal.h"

namespace attn::tasks::classify_detail {

PretrainedEncoder open_encoder(const std::string& name, const std::string& file, const std::string& prefix) {
  PretrainedEncoder e;
  if (name == "minilm") {
    ATTN_CHECK(prefix.empty(), "--prefix is for --encoder e5 (all-MiniLM-L6-v2 reads no prefix)");
    const io::MiniLmFiles f = io::require_minilm(file);
    e.name = "all-MiniLM-L6-v2";
    e.source = f.weights;
    e.config = models::BertConfig::from_file(f.config);
    e.weights = models::safetensors_lookup(io::SafeTensorsFile::open(f.weights));
    e.tokenizer = models::wordpiece_piece_tokenizer(f.dir);
    e.inference = [config = e.config, path = f.weights] { return models::BertModel(config, path); };
    return e;
  }
  if (name == "e5") {
    const io::E5Container c = io::E5Container::open(io::require_e5(file));
    const io::E5HfConfig h = c.hf_config();
    e.name = "multilingual-e5-small";
    e.source = c.path();
    e.config = models::BertConfig::from_e5(h);
    e.position_offset = e.config.position_offset;
    e.weights = [c](const std::string& n) { return c.load_hf(n); };
    e.tokenizer = models::e5_piece_tokenizer(c.path(), prefix);
    e.inference = [c] { return models::BertModel::from_e5(c); };
    e.mean_pool = true;  // multilingual-e5 is trained with mean pooling (sentence-transformers' Pooling)
    return e;
  }
  throw Error("--encoder must be e5 (multilingual-e5-small) or minilm (all-MiniLM-L6-v2); got '" + name +
              "'");
}

std::vector<Tensor> frozen_prefix(models::EncoderClassifier& model, const std::vector<PieceExample>& ex,
                                  const std::vector<int64_t>& rows, int64_t k, int64_t& tokens) {
  NoGradGuard ng;
  model.eval();
  std::vector<std::size_t> order(rows.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return ex[rows[a]].ids.size() < ex[rows[b]].ids.size();
  });
  std::vector<Tensor> out(rows.size());
  const int64_t pad = model.config().pad_id;
  for (std::size_t b0 = 0; b0 < order.size(); b0 += 32) {
    const std::size_t b1 = std::min(order.size(), b0 + 32);
    int64_t L = 0;
    for (std::size_t i = b0; i < b1; ++i)
      L = std::max<int64_t>(L, static_cast<int64_t>(ex[rows[order[i]]].ids.size()));
    const auto B = static_cast<int64_t>(b1 - b0);
    std::vector<int64_t> flat(static_cast<std::size_t>(B * L), pad), lengths;
    for (std::size_t i = b0; i < b1; ++i) {
      const auto& ids = ex[rows[order[i]]].ids;
      std::copy(ids.begin(), ids.end(), flat.begin() + static_cast<int64_t>(i - b0) * L);
      lengths.push_back(static_cast<int64_t>(ids.size()));
      tokens += static_cast<int64_t>(ids.size());
    }
    const Tensor h = model.hidden_after(Tensor::from(flat, {B, L}), lengths, k);  // [B, L, C]
    for (std::size_t i = b0; i < b1; ++i)
      out[order[i]] = slice(h.select(0, static_cast<int64_t>(i - b0)), 0, 0, lengths[i - b0]).contiguous();
  }
  return out;
}

Tensor stack_hidden(const std::vector<Tensor>& cache, const std::vector<int64_t>& idx,
                    std::vector<int64_t>& lengths) {
  int64_t L = 0;
  for (int64_t i : idx) L = std::max(L, cache[i].size(0));
  const int64_t C = cache[idx[0]].size(1), B = static_cast<int64_t>(idx.size());
  Tensor x = Tensor::zeros({B, L, C});
  float* dst = x.data<float>();
  lengths.clear();
  for (int64_t b = 0; b < B; ++b) {
    const Tensor& t = cache[idx[b]];
    std::copy(t.data<float>(), t.data<float>() + t.numel(), dst + b * L * C);
    lengths.push_back(t.size(0));
  }
  return x;
}

Tensor gather_vectors(const std::vector<Tensor>& vecs, const std::vector<int64_t>& idx) {
  if (vecs.empty()) return Tensor();
  const int64_t C = vecs[idx[0]].numel(), B = static_cast<int64_t>(idx.size());
  Tensor x = Tensor::zeros({B, C});
  for (int64_t b = 0; b < B; ++b)
    std::copy(vecs[idx[b]].data<float>(), vecs[idx[b]].data<float>() + C, x.data<float>() + b * C);
  return x;
}

std::vector<Tensor> frozen_vectors(models::EncoderClassifier& model, const std::vector<Tensor>& cache,
                                   int64_t k) {
  if (model.config().frozen_top <= 0) return {};
  ATTN_CHECK(k == model.frozen_branch_input(), "--frozen-vector: the cache holds layer ", k,
             "'s input, the frozen copy reads layer ", model.frozen_branch_input(), "'s");
  NoGradGuard ng;
  std::vector<int64_t> order(cache.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return cache[a].size(0) < cache[b].size(0); });
  std::vector<Tensor> out(cache.size());
  for (std::size_t b0 = 0; b0 < order.size(); b0 += 32) {
    const std::vector<int64_t> idx(order.begin() + b0, order.begin() + std::min(order.size(), b0 + 32));
    std::vector<int64_t> lengths;
    const Tensor v = model.frozen_vector(stack_hidden(cache, idx, lengths), lengths).contiguous();  // [B, C]
    for (std::size_t i = 0; i < idx.size(); ++i)
      out[idx[i]] = v.select(0, static_cast<int64_t>(i)).contiguous();
  }
  return out;
}

EvalResult evaluate_cached(models::EncoderClassifier& model, const std::vector<Tensor>& cache,
                           const std::vector<int32_t>& labels, int64_t k, const std::vector<Tensor>& frozen) {
  NoGradGuard ng;
  model.eval();
  EvalResult r;
  r.predicted.assign(cache.size(), -1);
  r.truth = labels;
  std::vector<int64_t> order(cache.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return cache[a].size(0) < cache[b].size(0); });
  double loss_sum = 0;
  int64_t correct = 0;
  for (std::size_t b0 = 0; b0 < order.size(); b0 += 64) {
    const std::vector<int64_t> idx(order.begin() + b0, order.begin() + std::min(order.size(), b0 + 64));
    std::vector<int64_t> lengths, y;
    for (int64_t i : idx) y.push_back(labels[i]);
    const Tensor h = stack_hidden(cache, idx, lengths);
    const models::ModelOutput o = model.forward_from(
        h, k, lengths, Tensor::from(y, {static_cast<int64_t>(idx.size())}), gather_vectors(frozen, idx));
    loss_sum += o.loss.to_vector()[0] * static_cast<double>(idx.size());
    const Tensor logits = o.logits.contiguous();
    for (std::size_t i = 0; i < idx.size(); ++i) {
      int32_t best = 0;
      for (int64_t c = 1; c < logits.size(1); ++c)
        if (logits.at({static_cast<int64_t>(i), c}) > logits.at({static_cast<int64_t>(i), best}))
          best = static_cast<int32_t>(c);
      r.predicted[idx[i]] = best;
      correct += best == labels[idx[i]];
    }
  }
  r.loss = loss_sum / static_cast<double>(cache.size());
  r.accuracy = static_cast<double>(correct) / static_cast<double>(cache.size());
  return r;
}

namespace {

// Layer-wise learning-rate decay (ClassifyTrainOptions::layer_lr_decay): AdamW where encoder layer i
// of n takes lr · decay^(n - i) and everything else trained (the head) takes lr, so the layers nearest
// the pretrained input move least. One AdamW per rate; the trainer sets the base lr each step.
class LayerwiseAdamW final : public train::Optimizer {
 public:
  LayerwiseAdamW(const NamedParams& params, const train::AdamWOptions& o, int64_t n_layers, double decay)
      : Optimizer(params) {
    std::map<int64_t, NamedParams> groups;  // layer index; n_layers: not in a layer (the head)
    for (const auto& np : params) {
      int64_t layer = n_layers;
      const std::string pre = "encoder.layers.";
      if (np.first.rfind(pre, 0) == 0) layer = std::stoll(np.first.substr(pre.size()));
      groups[layer].push_back(np);
    }
    for (auto& [layer, ps] : groups) {
      scales_.push_back(std::pow(decay, static_cast<double>(n_layers - layer)));
      parts_.push_back(std::make_unique<train::AdamW>(ps, o));
    }
    lr_ = o.lr;
  }
  void step() override {
    for (std::size_t i = 0; i < parts_.size(); ++i) {
      parts_[i]->set_lr(lr_ * scales_[i]);
      parts_[i]->step();
    }
    ++steps_;
  }
  std::string kind() const override { return "adamw"; }
  NamedParams state_tensors() const override {
    NamedParams all;
    for (const auto& p : parts_)
      for (auto& t : p->state_tensors()) all.push_back(t);
    return all;
  }
  // The rates' multipliers, lowest layer first (the head last).
  const std::vector<double>& scales() const { return scales_; }

 private:
  std::vector<double> scales_;
  std::vector<std::unique_ptr<train::AdamW>> parts_;
};

}  // namespace

std::unique_ptr<train::Optimizer> finetune_optimizer(const NamedParams& params, const train::AdamWOptions& o,
                                                     int64_t n_layers, double decay) {
  if (decay < 1.0) return std::make_unique<LayerwiseAdamW>(params, o, n_layers, decay);
  return std::make_unique<train::AdamW>(params, o);
}

std::vector<int64_t> pick_rows(const std::vector<int64_t>& rows, int64_t n, uint64_t seed) {
  std::vector<int64_t> r = rows;
  Rng rng(seed);
  rng.shuffle(r);
  if (n > 0 && static_cast<int64_t>(r.size()) > n) r.resize(static_cast<std::size_t>(n));
  return r;
}

}  // namespace attn::tasks::classify_detail
