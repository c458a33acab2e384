// The training step: one optimizer update from a loss callback, with gradient
// accumulation, clipping, NaN/Inf skipping and the schedule's learning rate,
// over a TrainState that checkpoints save and restore (train/checkpoint.h).
// The loop around it (epochs, time budget, evaluation, patience, best weights)
// is train::fit in train/fit.h.
//
// Data parallel (TrainerOptions::comm with more than one rank, train/comm.h):
// every rank runs the same Trainer over its own shard of each global batch.
//   - The constructor (and load) copies rank 0's weights, optimizer state and
//     training state to every rank, so all start from the same parameters.
//   - The loss callback returns its shard's mean loss and the count it is a mean
//     over (Loss::weight: target tokens, examples). Micro-batch m's gradient on
//     rank r is that of loss_r · w_r / (Σ_ranks w) / k: summed over the ranks it
//     is the gradient of the whole batch's mean, exactly what one process
//     computes on the union of the shards (the sum of the weights is one small
//     all-reduce before the backward). A rank with no rows (a short last batch)
//     returns an undefined loss with weight 0 and adds zeros.
//   - The gradients are summed over the ranks in flat f32 buckets of
//     bucket_bytes, in parameter order, after the backward of the last
//     micro-batch; then NaN/Inf skipping, clipping (on the reduced gradient) and
//     the optimizer step run on every rank on identical gradients.
//   - The reported loss is the whole batch's; StepResult counts the bytes and
//     seconds of the gradient all-reduce.
// One rank (no comm, or size 1) computes exactly what it computed before.
#pragma once

#include <attn/core/tensor.h>
#include <attn/io/json.h>
#include <attn/train/checkpoint.h>
#include <attn/train/comm.h>
#include <attn/train/optim.h>
#include <attn/train/schedule.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace attn::train {

struct TrainerOptions {
  int64_t accumulation_steps = 1;                   // k micro-batches per update, gradients averaged
  double clip_norm = 0;                             // > 0: clip the global gradient norm to it
  Communicator* comm = nullptr;                     // null: one process; must outlive the trainer
  std::size_t bucket_bytes = std::size_t{4} << 20;  // gradient all-reduce bucket (data parallel)
  // Data parallel: after every update, check that every rank holds the same
  // parameters (a hash, one small all-reduce); attn::Error on every rank when not.
  bool check_params = false;
};

// What a loss callback returns: the mean loss of this rank's rows (a
// one-element tensor) and how many tokens or examples it is the mean over. A
// Tensor converts to a Loss of weight 1 (all that one process needs).
struct Loss {
  Loss() = default;
  Loss(Tensor v) : value(std::move(v)) {}  // NOLINT: implicit on purpose
  Loss(Tensor v, double w) : value(std::move(v)), weight(w) {}
  Tensor value;       // undefined (with weight 0): this rank has no rows of the batch
  double weight = 1;  // >= 0
};

struct StepContext {
  int64_t step = 0;   // 1-based number of the update being computed
  int64_t micro = 0;  // micro-batch index in [0, accumulation_steps)
  uint64_t dropout_seed = 0;
  TrainState* state = nullptr;  // data position and RNG (the callback may advance them)
  int rank = 0, world = 1;      // this process's shard of the batch: shard_rows(rows, rank, world)
};

struct StepResult {
  int64_t step = 0;
  double loss = 0;       // mean of the micro-batch losses
  double grad_norm = 0;  // global norm before clipping (NaN/Inf when skipped)
  double lr = 0;
  bool skipped = false;                // NaN/Inf gradient: no update
  std::vector<std::string> nonfinite;  // parameters with NaN/Inf gradients
  double weight = 0;                   // sum of the micro-batches' weights over all ranks
  // Data parallel: the gradient all-reduce of this update (0 for one process), and before it the
  // wait at a barrier for the slowest rank to finish its backward (load imbalance, not transfer).
  double comm_wait_seconds = 0;
  double comm_seconds = 0;
  std::size_t comm_bytes = 0;  // bytes each rank contributed (4 per gradient element)
  int64_t buckets = 0;
};

class Trainer {
 public:
  // `optimizer` and `schedule` must outlive the trainer.
  Trainer(Optimizer& optimizer, const Schedule& schedule, const TrainerOptions& options, uint64_t seed);

  // One update: lr = schedule.lr(step + 1); for each micro-batch, backward of
  // loss_fn(ctx) / k; then skip on NaN/Inf gradients, else clip and step.
  // loss_fn returns a rank-0 (one element) loss tensor, or a Loss.
  StepResult step(const std::function<Loss(const StepContext&)>& loss_fn);

  TrainState& state() { return state_; }
  Optimizer& optimizer() { return opt_; }
  const TrainState& state() const { return state_; }
  // Writes a checkpoint (atomically); with several ranks only rank 0 writes
  // (the others hold the same state) and the call is a no-op elsewhere.
  void save(const std::string& path, const json::Value& model_config = json::Value()) const;
  // Restores weights, optimizer state and training state; returns the model config.
  // With several ranks rank 0 reads the file and sends it to the others (the file
  // needs to exist on rank 0's machine only; any number of ranks may resume a
  // checkpoint written by any number of ranks).
  json::Value load(const std::string& path);

  Communicator& comm() const { return *comm_; }

 private:
  void sync_from_root();
  void reduce_gradients(double& loss_sum, StepResult& r);

  Optimizer& opt_;
  const Schedule& schedule_;
  TrainerOptions options_;
  TrainState state_;
  Communicator* comm_;
};

}  // namespace attn::train
