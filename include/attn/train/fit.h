// The one training loop of the task recipes (classifier, translator, character
// LM): updates through a Trainer until the epochs, the step limit or the time
// budget run out, with evaluation every N updates or at the end of every epoch
// (and always after the last update), early stopping after `patience`
// evaluations without a better score, the best evaluation's weights restored at
// the end, and checkpoint and progress hooks.
//
//   for each epoch (from trainer.state().epoch; batches = hooks.epoch_batches(epoch)):
//     for each batch (from trainer.state().batch_in_epoch):
//       trainer.step(hooks.loss(epoch, batch, ctx))   -> hooks.on_step(step)
//       end?  epochs done | step >= max_steps | seconds >= time_budget_s
//       evaluate when step % eval_every == 0 (eval_every 0: the epoch's last batch) or at the end
//         -> hooks.on_eval(eval); patience counts evaluations without a better score
//       hooks.checkpoint every checkpoint_every updates
//
// The TrainState's epoch and batch_in_epoch always name the next batch, so a
// checkpoint saved by the hook (Trainer::save) resumes where the loop stopped:
// a new fit on the restored trainer continues with the same batches. Step and
// epoch limits count from the start of training (they include resumed steps);
// the time budget counts from the start of this call.
//
// Data parallel (a Trainer over a communicator of several ranks, train/comm.h):
// fit runs on every rank; epoch_batches is the smallest over the ranks (a rank
// that runs out of data ends the epoch for all), FitStep::seconds is rank 0's
// clock on every rank (so the time budget and on_step's decisions agree),
// max_steps after on_step is rank 0's, and hooks.evaluate runs on rank 0 only:
// its score is sent to the others, whose on_eval sees the same FitEval.
#pragma once

#include <attn/core/params.h>
#include <attn/core/tensor.h>
#include <attn/train/trainer.h>

#include <cstdint>
#include <functional>
#include <string>

namespace attn::train {

// What one evaluation scored: a higher `score` is better; an equal score with a
// lower `loss` is better too.
struct EvalScore {
  double score = 0;
  double loss = 0;
};

enum class StopReason {
  epochs,    // FitOptions::epochs completed
  steps,     // max_steps updates done
  time,      // the time budget is spent
  patience,  // `patience` evaluations without a better score
};
const char* stop_reason_name(StopReason r);  // "epochs", "steps", "time", "patience"

struct FitOptions {
  int64_t epochs = 0;            // > 0: at most this many epochs
  int64_t max_steps = 0;         // > 0: at most this many updates (on_step may change it)
  double time_budget_s = 0;      // > 0: stop after the first update that ends past it
  int64_t eval_every = 0;        // > 0: evaluate every N updates; 0: after every epoch's last batch
  int64_t patience = 0;          // > 0: stop after N evaluations without a better score
  bool keep_best = false;        // restore the weights of the best evaluation at the end
  int64_t checkpoint_every = 0;  // > 0: call hooks.checkpoint every N updates
  // Seconds on a monotonic clock; empty: std::chrono::steady_clock (tests inject one).
  std::function<double()> clock;
};

// After one update. on_step may lower or raise max_steps (e.g. a schedule
// fitted to the time budget once the pace is known).
struct FitStep {
  StepResult result;
  int64_t epoch = 0;    // epoch of the batch (0-based)
  int64_t batch = 0;    // index of the batch in its epoch
  int64_t batches = 0;  // batches in this epoch (0: an endless stream)
  double seconds = 0;   // since fit started, after the update
  int64_t max_steps = 0;
};

struct FitEval {
  int64_t step = 0, epoch = 0;
  bool epoch_complete = false;  // the evaluation follows the epoch's last batch
  bool final = false;           // training ends after it (also when patience stops it)
  double train_loss = 0;        // mean update loss since the previous evaluation
  double lr = 0;                // rate of the last update
  EvalScore score;
  bool best = false;   // better than every earlier evaluation
  double seconds = 0;  // since fit started, after the evaluation
};

struct FitHooks {
  // Batches of an epoch, called when the epoch starts (0: an endless stream; the
  // epoch never ends and only max_steps or the time budget stop training).
  std::function<int64_t(int64_t epoch)> epoch_batches;
  // The loss of batch `batch` of `epoch` (a one-element tensor); ctx as Trainer::step gives it.
  // A Loss carries this rank's weight (tokens, examples) for data parallel training.
  std::function<Loss(int64_t epoch, int64_t batch, const StepContext& ctx)> loss;
  std::function<EvalScore()> evaluate;             // optional: no evaluations without it
  std::function<void(FitStep&)> on_step;           // optional
  std::function<void(const FitEval&)> on_eval;     // optional
  std::function<void(const FitStep&)> checkpoint;  // optional, every checkpoint_every updates
};

struct FitResult {
  StopReason reason = StopReason::steps;
  int64_t steps = 0;            // updates done in all (trainer.state().step)
  int64_t epoch = 0;            // epoch of the last update (0-based)
  bool epoch_complete = false;  // the last update was its epoch's last batch
  int64_t evaluations = 0;
  bool has_best = false;
  int64_t best_step = 0;  // step of the best evaluation
  EvalScore best;
  double seconds = 0;  // of this call (evaluations included)
};

// Trains until a limit is reached; at least one limit (epochs, max_steps,
// time_budget_s, or patience with evaluations) must be set, else attn::Error.
// keep_best needs `params` (the weights to save and restore) and hooks.evaluate.
FitResult fit(Trainer& trainer, const FitHooks& hooks, const FitOptions& options,
              const NamedParams& params = {});

}  // namespace attn::train
