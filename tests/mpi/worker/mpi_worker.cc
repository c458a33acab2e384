// The program the MPI tests (tests/mpi/mpi_test.cc) start under mpirun: trains
// tests/train/tiny_model.h data parallel on seeded, padded sequences through
// train::Trainer and train::fit, and writes what the tests compare.
//
//   mpi_worker --out DIR [--batch B] [--steps K] [--epochs E] [--accum A] [--clip C]
//              [--save FILE] [--save-at S] [--resume FILE] [--check-params]
//              [--die-rank R --die-step S] [--salt-rank R] [--short-rank R]
//
// DIR/rank<r>.txt: one line per update: "step loss weight paramhash" (%.17g).
// --save FILE: a checkpoint after update S (--save-at; 0: at the end), by rank 0.
// --die-rank/--die-step: that rank kills itself (SIGKILL) after that update.
// --salt-rank R: rank R reports a different configuration (the start-up check must refuse it).
// --short-rank R: rank R has one batch fewer per epoch (runs out of data first).
#include <attn/core/error.h>
#include <attn/core/random.h>
#include <attn/io/files.h>
#include <attn/train/comm.h>
#include <attn/train/fit.h>
#include <attn/train/mpi.h>
#include <attn/train/optim.h>
#include <attn/train/schedule.h>
#include <attn/train/trainer.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "train/tiny_model.h"

using namespace attn;

namespace {

struct Args {
  std::string out, save, resume;
  int64_t batch = 8, steps = 0, epochs = 0, accum = 1, save_at = 0;
  double clip = 0.5;
  bool check_params = false;
  int die_rank = -1, die_step = -1, salt_rank = -1, short_rank = -1;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto next = [&]() -> std::string {
      ATTN_CHECK(i + 1 < argc, k, " needs a value");
      return argv[++i];
    };
    if (k == "--out")
      a.out = next();
    else if (k == "--save")
      a.save = next();
    else if (k == "--resume")
      a.resume = next();
    else if (k == "--batch")
      a.batch = std::stoll(next());
    else if (k == "--steps")
      a.steps = std::stoll(next());
    else if (k == "--epochs")
      a.epochs = std::stoll(next());
    else if (k == "--accum")
      a.accum = std::stoll(next());
    else if (k == "--save-at")
      a.save_at = std::stoll(next());
    else if (k == "--clip")
      a.clip = std::stod(next());
    else if (k == "--check-params")
      a.check_params = true;
    else if (k == "--die-rank")
      a.die_rank = std::stoi(next());
    else if (k == "--die-step")
      a.die_step = std::stoi(next());
    else if (k == "--salt-rank")
      a.salt_rank = std::stoi(next());
    else if (k == "--short-rank")
      a.short_rank = std::stoi(next());
    else
      throw Error("mpi_worker: unknown option " + k);
  }
  ATTN_CHECK(!a.out.empty(), "mpi_worker: --out DIR is required");
  return a;
}

constexpr int64_t N = 60, L = 6;  // sequences (7 full batches of 8 and one of 4), positions

int run(train::Communicator& comm, const Args& a) {
  const int rank = comm.rank();
  // Data: x [N, L, C], targets [N, L] with a seeded length per row (the rest is padding, -100).
  const Tensor x = attn::testing::random_uniform({N, L, attn::testing::TinyModel::C}, 7);
  std::vector<int64_t> y(static_cast<std::size_t>(N * L), -100);
  Rng rng(11);
  for (int64_t i = 0; i < N; ++i) {
    const int64_t len = 1 + static_cast<int64_t>(rng.below(L));
    for (int64_t j = 0; j < len; ++j)
      y[static_cast<std::size_t>(i * L + j)] = static_cast<int64_t>(rng.below(attn::testing::TinyModel::V));
  }
  const Tensor yt = Tensor::from(y, {N, L});
  // Each rank seeds its model differently: the trainer must start all from rank 0's weights.
  attn::testing::TinyModel model(100 + static_cast<uint64_t>(rank));

  std::vector<std::pair<std::string, uint64_t>> same = {
      {"config", fnv1a64("tiny C8 H2 V5 batch " + std::to_string(a.batch) + " accum " +
                         std::to_string(a.accum) + (rank == a.salt_rank ? " salted" : ""))},
      {"data", fnv1a64(std::string_view(static_cast<const char*>(x.raw_data()), x.numel() * sizeof(float)))}};
  train::check_same_on_all_ranks(comm, same);

  train::AdamWOptions ao;
  ao.lr = 1e-2;
  train::AdamW opt(model.params, ao);
  train::ConstantSchedule sched(1e-2);
  train::TrainerOptions to;
  to.accumulation_steps = a.accum;
  to.clip_norm = a.clip;
  to.comm = &comm;
  to.check_params = a.check_params;
  to.bucket_bytes = 256;  // several buckets even for this tiny model
  train::Trainer trainer(opt, sched, to, 5);
  if (!a.resume.empty()) trainer.load(a.resume);

  std::vector<std::vector<int64_t>> batches;
  train::FitHooks hooks;
  hooks.epoch_batches = [&](int64_t epoch) {
    const std::vector<int64_t> order = train::epoch_order(N, 3, epoch);
    batches.clear();
    for (int64_t s = 0; s < N; s += a.batch)
      batches.emplace_back(order.begin() + s, order.begin() + std::min(N, s + a.batch));
    return static_cast<int64_t>(batches.size()) - (rank == a.short_rank ? 1 : 0);
  };
  hooks.loss = [&](int64_t, int64_t b, const train::StepContext& ctx) -> train::Loss {
    // Micro-batch m of k: the m-th of k equal cuts of the global batch; then this rank's shard.
    const std::vector<int64_t>& rows = batches[static_cast<std::size_t>(b)];
    const std::size_t k = static_cast<std::size_t>(a.accum), n = rows.size();
    const std::size_t m = static_cast<std::size_t>(ctx.micro);
    const std::vector<int64_t> micro(rows.begin() + static_cast<std::ptrdiff_t>(m * n / k),
                                     rows.begin() + static_cast<std::ptrdiff_t>((m + 1) * n / k));
    const std::vector<int64_t> mine = train::shard_rows(micro, ctx.rank, ctx.world);
    if (mine.empty()) return train::Loss{Tensor(), 0.0};
    const Tensor ys = attn::testing::gather_rows(yt, mine);
    double tokens = 0;
    for (int64_t v : ys.to_vector()) tokens += v >= 0;
    if (tokens == 0) return train::Loss{Tensor(), 0.0};
    return train::Loss{model.loss(attn::testing::gather_rows(x, mine), ys, 0.0, ctx.dropout_seed), tokens};
  };
  std::string log;
  hooks.on_step = [&](train::FitStep& fs) {
    const train::StepResult& r = fs.result;
    char line[160];
    std::snprintf(line, sizeof line, "%lld %.17g %.17g %016llx\n", static_cast<long long>(r.step), r.loss,
                  r.weight, static_cast<unsigned long long>(train::params_hash(model.params)));
    log += line;
    io::write_file_atomically(a.out + "/rank" + std::to_string(rank) + ".txt", log);
    if (!a.save.empty() && a.save_at == r.step) trainer.save(a.save);
    if (rank == a.die_rank && r.step == a.die_step) raise(SIGKILL);
  };
  train::FitOptions fo;
  fo.max_steps = a.steps;
  fo.epochs = a.epochs;
  train::fit(trainer, hooks, fo);
  if (!a.save.empty() && a.save_at == 0) trainer.save(a.save);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::unique_ptr<train::Communicator> comm;
  try {
    comm = train::mpi_communicator(&argc, &argv);
    const int rc = run(*comm, parse(argc, argv));
    comm.reset();  // MPI_Finalize
    return rc;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mpi_worker: error (rank %d): %s\n", comm ? comm->rank() : -1, e.what());
    std::fflush(stderr);
    if (comm && comm->size() > 1) comm->abort(1);
    return 1;
  }
}
