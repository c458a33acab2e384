// One training update (include/attn/train/trainer.h).
#include <attn/core/autograd.h>
#include <attn/core/error.h>
#include <attn/core/random.h>
#include <attn/ops/basic.h>
#include <attn/train/trainer.h>

#include <algorithm>
#include <chrono>
#include <cstring>

namespace attn::train {

namespace {

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

Trainer::Trainer(Optimizer& optimizer, const Schedule& schedule, const TrainerOptions& options, uint64_t seed)
    : opt_(optimizer),
      schedule_(schedule),
      options_(options),
      comm_(options.comm ? options.comm : &single_process()) {
  ATTN_CHECK(options.accumulation_steps >= 1, "trainer: accumulation_steps must be >= 1; got ",
             options.accumulation_steps);
  ATTN_CHECK(options.clip_norm >= 0, "trainer: clip_norm must be >= 0 (0 = off); got ", options.clip_norm);
  ATTN_CHECK(options.bucket_bytes >= sizeof(float), "trainer: bucket_bytes must be >= 4; got ",
             options.bucket_bytes);
  state_.rng = TrainRng(seed);
  if (comm_->size() > 1) sync_from_root();
}

// Rank 0's weights, optimizer state and training state, on every rank.
void Trainer::sync_from_root() {
  Communicator& c = *comm_;
  broadcast_params(c, opt_.params());
  NamedParams st = opt_.state_tensors();
  broadcast_params(c, st);
  int64_t s[8] = {state_.step,
                  state_.epoch,
                  state_.batch_in_epoch,
                  state_.skipped_steps,
                  static_cast<int64_t>(state_.rng.seed()),
                  static_cast<int64_t>(state_.rng.counter()),
                  opt_.steps(),
                  0};
  double lr = opt_.lr();
  std::memcpy(&s[7], &lr, sizeof lr);
  c.broadcast(s, sizeof s, 0);
  state_.step = s[0], state_.epoch = s[1], state_.batch_in_epoch = s[2], state_.skipped_steps = s[3];
  state_.rng.restore(static_cast<uint64_t>(s[4]), static_cast<uint64_t>(s[5]));
  std::memcpy(&lr, &s[7], sizeof lr);
  if (opt_.steps() != s[6]) {
    NamedParams copy;
    for (const auto& [n, t] : st) copy.emplace_back(n, t.clone());
    opt_.load_state_tensors(copy, s[6]);
  }
  opt_.set_lr(lr);
}

StepResult Trainer::step(const std::function<Loss(const StepContext&)>& loss_fn) {
  StepResult r;
  r.step = state_.step + 1;
  r.lr = schedule_.lr(r.step);
  opt_.set_lr(r.lr);
  opt_.zero_grad(/*set_to_none=*/true);  // the backward's fresh gradients become the .grad
  const int64_t k = options_.accumulation_steps;
  const int world = comm_->size();
  double loss_sum = 0;
  for (int64_t micro = 0; micro < k; ++micro) {
    StepContext ctx;
    ctx.step = r.step;
    ctx.micro = micro;
    ctx.dropout_seed = step_seed(state_.rng.seed(), r.step, micro);
    // Each rank's rows are numbered from 0 in its shard: its own dropout stream.
    if (comm_->rank() > 0)
      ctx.dropout_seed = mix_seed(ctx.dropout_seed, static_cast<uint64_t>(comm_->rank()));
    ctx.state = &state_;
    ctx.rank = comm_->rank();
    ctx.world = world;
    const Loss l = loss_fn(ctx);
    const Tensor& loss = l.value;
    ATTN_CHECK(l.weight >= 0 && (loss.defined() || l.weight == 0),
               "trainer: a loss weight must be >= 0, and 0 when the loss is undefined; got ", l.weight);
    ATTN_CHECK(!loss.defined() || loss.numel() == 1, "trainer: the loss must have one element; got ",
               shape_str(loss.shape()));
    ATTN_CHECK(loss.defined() || world > 1, "trainer: the loss callback returned an undefined tensor");
    if (world == 1) {
      r.weight += l.weight;
      loss_sum += loss.at(std::vector<int64_t>(static_cast<std::size_t>(loss.rank()), 0));
      (k == 1 ? loss : scale(loss, 1.0 / static_cast<double>(k))).backward();
      continue;
    }
    double total = loss.defined() ? l.weight : 0.0;
    comm_->allreduce_sum(&total, 1);
    ATTN_CHECK(total > 0, "trainer: no rank has rows in micro-batch ", micro, " of update ", r.step,
               " (the weights of all ranks sum to 0)");
    r.weight += total;
    if (!loss.defined() || l.weight == 0) continue;
    const double share = l.weight / total;  // this rank's part of the batch mean
    loss_sum += share * loss.at(std::vector<int64_t>(static_cast<std::size_t>(loss.rank()), 0));
    scale(loss, share / static_cast<double>(k)).backward();
  }
  if (world > 1) reduce_gradients(loss_sum, r);
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
  if (world > 1 && options_.check_params) {
    const uint64_t h = params_hash(opt_.params());
    uint64_t root = h;
    comm_->broadcast(&root, sizeof root, 0);
    int64_t bad = root == h ? -1 : comm_->rank();
    comm_->allreduce_max(&bad, 1);
    ATTN_CHECK(bad < 0, "trainer: after update ", r.step, " rank ", bad,
               " holds different parameters from rank 0 (hash mismatch)");
  }
  return r;
}

// Sums the gradients (and the loss) over the ranks. A parameter that got a
// gradient on some rank gets one on every rank (zeros where it got none), so
// every rank's optimizer updates the same parameters.
void Trainer::reduce_gradients(double& loss_sum, StepResult& r) {
  const NamedParams& params = opt_.params();
  std::vector<double> head(params.size() + 1, 0.0);  // per parameter: ranks with a gradient; then the loss
  for (std::size_t i = 0; i < params.size(); ++i) head[i] = params[i].second.grad().defined() ? 1.0 : 0.0;
  head.back() = loss_sum;
  comm_->allreduce_sum(head.data(), head.size());
  loss_sum = head.back();

  const double t_wait = seconds_now();
  comm_->barrier();  // the wait for the slowest rank, timed apart from the reduction
  const double t0 = seconds_now();
  r.comm_wait_seconds = t0 - t_wait;
  std::vector<Tensor> grads;
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (head[i] == 0) continue;
    Tensor p = params[i].second;
    Tensor g = p.grad();
    if (!g.defined() || !g.is_contiguous() || g.dtype() != DType::f32) {
      Tensor fresh = Tensor::zeros(p.shape(), DType::f32);
      if (g.defined()) fresh.copy_from(g);
      p.set_grad(fresh);
      g = p.grad();
    }
    ATTN_CHECK(g.is_contiguous() && g.dtype() == DType::f32, "trainer: the gradient of '", params[i].first,
               "' must be contiguous f32 to be reduced");
    grads.push_back(g);
  }
  const std::size_t cap = options_.bucket_bytes / sizeof(float);
  std::vector<float> bucket;
  std::vector<std::pair<float*, std::size_t>> members;  // the gradients packed into the bucket
  auto flush = [&] {
    if (bucket.empty()) return;
    comm_->allreduce_sum(bucket.data(), bucket.size());
    ++r.buckets;
    std::size_t at = 0;
    for (auto [p, n] : members) {
      std::memcpy(p, bucket.data() + at, n * sizeof(float));
      at += n;
    }
    bucket.clear();
    members.clear();
  };
  bucket.reserve(cap);
  for (const Tensor& g : grads) {
    float* p = g.data<float>();
    const auto n = static_cast<std::size_t>(g.numel());
    r.comm_bytes += n * sizeof(float);
    if (n >= cap) {  // a large gradient is its own bucket, reduced in place
      comm_->allreduce_sum(p, n);
      ++r.buckets;
      continue;
    }
    if (bucket.size() + n > cap) flush();
    bucket.insert(bucket.end(), p, p + n);
    members.emplace_back(p, n);
  }
  flush();
  r.comm_seconds = seconds_now() - t0;
}

void Trainer::save(const std::string& path, const json::Value& model_config) const {
  if (comm_->rank() != 0) return;
  save_checkpoint(path, opt_.params(), &opt_, &schedule_, state_, model_config);
}

json::Value Trainer::load(const std::string& path) {
  if (comm_->size() == 1) {
    LoadedCheckpoint c = load_checkpoint(path, opt_.params(), &opt_);
    state_ = c.state;
    return c.model_config;
  }
  // Rank 0 reads; an error there is every rank's error.
  std::string error, config;
  if (comm_->rank() == 0) {
    try {
      LoadedCheckpoint c = load_checkpoint(path, opt_.params(), &opt_);
      state_ = c.state;
      config = json::dump(c.model_config);
    } catch (const Error& e) {
      error = e.what();
    }
  }
  error = broadcast_string(*comm_, error);
  ATTN_CHECK(error.empty(), error, comm_->rank() == 0 ? "" : " (read on rank 0)");
  config = broadcast_string(*comm_, config);
  sync_from_root();
  return json::parse(config);
}

}  // namespace attn::train
