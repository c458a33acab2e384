// Data-parallel training across processes: the communicator the Trainer reduces
// gradients through, and the helpers a recipe needs around it (docs/training.md).
//
// A Communicator connects `size()` processes ("ranks", numbered from 0 as mpirun
// numbers them). The Trainer only calls the collectives below, so another
// transport (NCCL for GPUs) is one more implementation of this class; nothing in
// the Trainer or the recipes names MPI.
//
//   SingleProcessCommunicator   size 1, every collective a no-op (the default)
//   MpiCommunicator             attn/train/mpi.h, library attn::mpi (CMake option
//                               ATTN_MPI; only that library links MPI)
//
// Every collective must be called by every rank in the same order with the same
// sizes (as in MPI); the results are the same on every rank. A failure is an
// attn::Error; a rank that dies ends the job (mpirun kills the others).
#pragma once

#include <attn/core/params.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace attn::train {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;  // 0 .. size() - 1
  virtual int size() const = 0;
  virtual std::string name() const = 0;  // "single", "mpi"

  // In-place element-wise sums over all ranks.
  virtual void allreduce_sum(float* data, std::size_t n) = 0;
  virtual void allreduce_sum(double* data, std::size_t n) = 0;
  // In-place element-wise maximum over all ranks.
  virtual void allreduce_max(int64_t* data, std::size_t n) = 0;
  // Copies `bytes` bytes at `data` on rank `root` into `data` on every rank.
  virtual void broadcast(void* data, std::size_t bytes, int root) = 0;
  virtual void barrier() = 0;
  // Ends every rank of the job with exit status `code` (after an error on one
  // rank, so that the others do not wait forever in a collective).
  [[noreturn]] virtual void abort(int code) = 0;
};

class SingleProcessCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string name() const override { return "single"; }
  void allreduce_sum(float*, std::size_t) override {}
  void allreduce_sum(double*, std::size_t) override {}
  void allreduce_max(int64_t*, std::size_t) override {}
  void broadcast(void*, std::size_t, int) override {}
  void barrier() override {}
  [[noreturn]] void abort(int code) override;
};

// The single-process communicator (a process-wide instance).
Communicator& single_process();

// ---- helpers (every one is collective: call it on every rank) -------------------------------

// Broadcasts a string (any length) from `root`; returns root's string on every rank.
std::string broadcast_string(Communicator& comm, const std::string& s, int root = 0);

// Copies rank `root`'s values of `params` (f32 or any dtype, contiguous) to every rank.
void broadcast_params(Communicator& comm, const NamedParams& params, int root = 0);

// FNV-1a 64 of every parameter's name, shape and bytes, in order.
uint64_t params_hash(const NamedParams& params);

// What must be the same on every rank, by name: {"config", hash}, {"vocabulary", hash},
// {"data file corpus.txt", hash}, ... Throws attn::Error on every rank when a rank's
// list differs from rank 0's, naming each item that differs and one rank where it
// does ("ranks disagree on: data file x (rank 1 differs from rank 0) ..."). The
// names themselves must be the same on every rank (the number of items is checked).
void check_same_on_all_ranks(Communicator& comm, const std::vector<std::pair<std::string, uint64_t>>& items);

// This rank's shard of a global batch: rows[rank], rows[rank + size], ... The
// shards of all ranks are disjoint and their union is `rows`; striding (rather
// than cutting into blocks) spreads a length-sorted batch evenly over the ranks.
std::vector<int64_t> shard_rows(const std::vector<int64_t>& rows, int rank, int size);

// The number of ranks mpirun (Open MPI, MPICH, any PMI launcher) started this
// process among, read from the environment; 0 when it was not started by one.
int launcher_world_size();

}  // namespace attn::train
