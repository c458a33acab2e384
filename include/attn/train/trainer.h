// The training step: one optimizer update from a loss callback, with gradient
// accumulation, clipping, NaN/Inf skipping and the schedule's learning rate,
// over a TrainState that checkpoints save and restore (train/checkpoint.h).
// The loop around it (epochs, time budget, evaluation, patience, best weights)
// is train::fit in train/fit.h.
#pragma once

#include <attn/core/tensor.h>
#include <attn/io/json.h>
#include <attn/train/checkpoint.h>
#include <attn/train/optim.h>
#include <attn/train/schedule.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace attn::train {

struct TrainerOptions {
  int64_t accumulation_steps = 1;  // k micro-batches per update, gradients averaged
  double clip_norm = 0;            // > 0: clip the global gradient norm to it
};

struct StepContext {
  int64_t step = 0;   // 1-based number of the update being computed
  int64_t micro = 0;  // micro-batch index in [0, accumulation_steps)
  uint64_t dropout_seed = 0;
  TrainState* state = nullptr;  // data position and RNG (the callback may advance them)
};

struct StepResult {
  int64_t step = 0;
  double loss = 0;       // mean of the micro-batch losses
  double grad_norm = 0;  // global norm before clipping (NaN/Inf when skipped)
  double lr = 0;
  bool skipped = false;                // NaN/Inf gradient: no update
  std::vector<std::string> nonfinite;  // parameters with NaN/Inf gradients
};

class Trainer {
 public:
  // `optimizer` and `schedule` must outlive the trainer.
  Trainer(Optimizer& optimizer, const Schedule& schedule, const TrainerOptions& options, uint64_t seed);

  // One update: lr = schedule.lr(step + 1); for each micro-batch, backward of
  // loss_fn(ctx) / k; then skip on NaN/Inf gradients, else clip and step.
  // loss_fn returns a rank-0 (one element) loss tensor.
  StepResult step(const std::function<Tensor(const StepContext&)>& loss_fn);

  TrainState& state() { return state_; }
  Optimizer& optimizer() { return opt_; }
  const TrainState& state() const { return state_; }
  void save(const std::string& path, const json::Value& model_config = json::Value()) const;
  // Restores weights, optimizer state and training state; returns the model config.
  json::Value load(const std::string& path);

 private:
  Optimizer& opt_;
  const Schedule& schedule_;
  TrainerOptions options_;
  TrainState state_;
};

}  // namespace attn::train
