// The shared training loop (include/attn/train/fit.h).
#include <attn/core/autograd.h>
#include <attn/core/error.h>
#include <attn/train/fit.h>

#include <chrono>
#include <cstdint>
#include <vector>

namespace attn::train {

const char* stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::epochs:
      return "epochs";
    case StopReason::steps:
      return "steps";
    case StopReason::time:
      return "time";
    case StopReason::patience:
      return "patience";
  }
  return "?";
}

namespace {

std::function<double()> steady_clock_seconds() {
  return [] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  };
}

}  // namespace

FitResult fit(Trainer& trainer, const FitHooks& hooks, const FitOptions& o, const NamedParams& params) {
  ATTN_CHECK(hooks.epoch_batches && hooks.loss, "fit: hooks.epoch_batches and hooks.loss are required");
  ATTN_CHECK(o.epochs > 0 || o.max_steps > 0 || o.time_budget_s > 0,
             "fit: set a limit: epochs, max_steps or time_budget_s (all are 0)");
  ATTN_CHECK(o.epochs >= 0 && o.max_steps >= 0 && o.time_budget_s >= 0 && o.eval_every >= 0 &&
                 o.patience >= 0 && o.checkpoint_every >= 0,
             "fit: limits must be >= 0 (0 = off)");
  ATTN_CHECK(!o.keep_best || (hooks.evaluate && !params.empty()),
             "fit: keep_best needs hooks.evaluate and the parameters to keep");
  ATTN_CHECK(o.patience == 0 || hooks.evaluate, "fit: patience needs hooks.evaluate");
  const std::function<double()> clock = o.clock ? o.clock : steady_clock_seconds();
  const double t0 = clock();
  auto elapsed = [&] { return clock() - t0; };

  TrainState& st = trainer.state();
  // Data parallel: every decision below is taken from the same numbers on every
  // rank (rank 0's clock and evaluation, the smallest epoch), so that all ranks
  // run the same updates and stop together.
  Communicator& comm = trainer.comm();
  const bool multi = comm.size() > 1;
  FitResult res;
  int64_t max_steps = o.max_steps;
  int64_t since_best = 0, window_n = 0;
  double window_loss = 0;
  std::vector<Tensor> best_weights;
  bool stop = false;
  while (!stop) {
    if (o.epochs > 0 && st.epoch >= o.epochs) {  // resumed after the last epoch
      res.reason = StopReason::epochs;
      break;
    }
    const int64_t epoch = st.epoch;
    int64_t batches = hooks.epoch_batches(epoch);
    if (multi) {  // a rank that runs out of data ends the epoch for all
      int64_t neg = batches == 0 ? INT64_MIN + 1 : -batches;  // max of -n: the smallest n (0: endless)
      comm.allreduce_max(&neg, 1);
      batches = neg == INT64_MIN + 1 ? 0 : -neg;
    }
    ATTN_CHECK(batches >= 0, "fit: epoch ", epoch, " has ", batches, " batches");
    ATTN_CHECK(batches > 0 || o.max_steps > 0 || o.time_budget_s > 0,
               "fit: an endless epoch (0 batches) needs max_steps or time_budget_s");
    for (int64_t b = st.batch_in_epoch; (batches == 0 || b < batches) && !stop; ++b) {
      FitStep fs;
      fs.result = trainer.step([&](const StepContext& ctx) { return hooks.loss(epoch, b, ctx); });
      fs.epoch = epoch;
      fs.batch = b;
      fs.batches = batches;
      fs.seconds = elapsed();
      if (multi) comm.broadcast(&fs.seconds, sizeof fs.seconds, 0);
      fs.max_steps = max_steps;
      const bool last_of_epoch = batches > 0 && b + 1 == batches;
      st.batch_in_epoch = last_of_epoch ? 0 : b + 1;
      if (last_of_epoch) st.epoch = epoch + 1;
      if (hooks.on_step) hooks.on_step(fs);
      if (multi) comm.broadcast(&fs.max_steps, sizeof fs.max_steps, 0);
      max_steps = fs.max_steps;
      const int64_t step = fs.result.step;
      window_loss += fs.result.loss;
      ++window_n;
      res.steps = step;
      res.epoch = epoch;
      res.epoch_complete = last_of_epoch;

      bool end = false;
      if (o.epochs > 0 && last_of_epoch && epoch + 1 >= o.epochs) {
        end = true;
        res.reason = StopReason::epochs;
      } else if (max_steps > 0 && step >= max_steps) {
        end = true;
        res.reason = StopReason::steps;
      } else if (o.time_budget_s > 0 && fs.seconds >= o.time_budget_s) {
        end = true;
        res.reason = StopReason::time;
      }
      const bool due = o.eval_every > 0 ? step % o.eval_every == 0 : last_of_epoch;
      if (hooks.evaluate && (due || end)) {
        FitEval ev;
        ev.step = step;
        ev.epoch = epoch;
        ev.epoch_complete = last_of_epoch;
        ev.train_loss = window_loss / static_cast<double>(window_n);
        ev.lr = fs.result.lr;
        if (!multi || comm.rank() == 0) ev.score = hooks.evaluate();
        if (multi) {  // rank 0 evaluates (the weights are the same on every rank)
          double sc[2] = {ev.score.score, ev.score.loss};
          comm.broadcast(sc, sizeof sc, 0);
          ev.score = EvalScore{sc[0], sc[1]};
        }
        ev.seconds = elapsed();
        window_loss = 0;
        window_n = 0;
        ++res.evaluations;
        ev.best = !res.has_best || ev.score.score > res.best.score ||
                  (ev.score.score == res.best.score && ev.score.loss < res.best.loss);
        if (ev.best) {
          res.has_best = true;
          res.best = ev.score;
          res.best_step = step;
          since_best = 0;
          if (o.keep_best) {
            best_weights.clear();
            for (const auto& [n, p] : params) best_weights.push_back(p.detach().clone());
          }
        } else if (o.patience > 0 && ++since_best >= o.patience) {
          end = true;
          res.reason = StopReason::patience;
        }
        ev.final = end;
        if (hooks.on_eval) hooks.on_eval(ev);
      }
      if (hooks.checkpoint && o.checkpoint_every > 0 && step % o.checkpoint_every == 0) hooks.checkpoint(fs);
      stop = end;
    }
  }
  if (o.keep_best && !best_weights.empty()) {
    NoGradGuard ng;
    for (std::size_t i = 0; i < params.size(); ++i) params[i].second.detach().copy_from(best_weights[i]);
  }
  res.seconds = elapsed();
  return res;
}

}  // namespace attn::train
