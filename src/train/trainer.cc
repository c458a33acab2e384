// One training update (include/attn/train/trainer.h).
#include <attn/core/autograd.h>
#include <attn/core/error.h>
#include <attn/ops/basic.h>
#include <attn/train/trainer.h>

namespace attn::train {

Trainer::Trainer(Optimizer& optimizer, const Schedule& schedule, const TrainerOptions& options, uint64_t seed)
    : opt_(optimizer), schedule_(schedule), options_(options) {
  ATTN_CHECK(options.accumulation_steps >= 1, "trainer: accumulation_steps must be >= 1; got ",
             options.accumulation_steps);
  ATTN_CHECK(options.clip_norm >= 0, "trainer: clip_norm must be >= 0 (0 = off); got ", options.clip_norm);
  state_.rng = TrainRng(seed);
}

StepResult Trainer::step(const std::function<Tensor(const StepContext&)>& loss_fn) {
  StepResult r;
  r.step = state_.step + 1;
  r.lr = schedule_.lr(r.step);
  opt_.set_lr(r.lr);
  opt_.zero_grad(/*set_to_none=*/true);  // the backward's fresh gradients become the .grad
  const int64_t k = options_.accumulation_steps;
  double loss_sum = 0;
  for (int64_t micro = 0; micro < k; ++micro) {
    StepContext ctx;
    ctx.step = r.step;
    ctx.micro = micro;
    ctx.dropout_seed = step_seed(state_.rng.seed(), r.step, micro);
    ctx.state = &state_;
    const Tensor loss = loss_fn(ctx);
    ATTN_CHECK(loss.defined() && loss.numel() == 1, "trainer: the loss must have one element; got ",
               loss.defined() ? shape_str(loss.shape()) : std::string("an undefined tensor"));
    loss_sum += loss.at(std::vector<int64_t>(static_cast<std::size_t>(loss.rank()), 0));
    (k == 1 ? loss : scale(loss, 1.0 / static_cast<double>(k))).backward();
  }
  r.loss = loss_sum / static_cast<double>(k);
  state_.step = r.step;
  r.nonfinite = nonfinite_grads(opt_.params());
  if (!r.nonfinite.empty()) {
    r.skipped = true;
    r.grad_norm = grad_norm(opt_.params());
    ++state_.skipped_steps;
    opt_.zero_grad(/*set_to_none=*/true);
    return r;
  }
  r.grad_norm =
      options_.clip_norm > 0 ? clip_grad_norm(opt_.params(), options_.clip_norm) : grad_norm(opt_.params());
  opt_.step();
  return r;
}

void Trainer::save(const std::string& path, const json::Value& model_config) const {
  save_checkpoint(path, opt_.params(), &opt_, &schedule_, state_, model_config);
}

json::Value Trainer::load(const std::string& path) {
  LoadedCheckpoint c = load_checkpoint(path, opt_.params(), &opt_);
  state_ = c.state;
  return c.model_config;
}

}  // namespace attn::train
