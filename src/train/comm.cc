// The single-process communicator and the collective helpers (include/attn/train/comm.h).
#include <attn/core/error.h>
#include <attn/core/random.h>
#include <attn/train/comm.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace attn::train {

void SingleProcessCommunicator::abort(int code) {
  std::fflush(nullptr);
  std::_Exit(code);
}

Communicator& single_process() {
  static SingleProcessCommunicator c;
  return c;
}

std::string broadcast_string(Communicator& comm, const std::string& s, int root) {
  if (comm.size() == 1) return s;
  uint64_t n = s.size();
  comm.broadcast(&n, sizeof n, root);
  std::string out = comm.rank() == root ? s : std::string(n, '\0');
  if (n > 0) comm.broadcast(out.data(), n, root);
  return out;
}

void broadcast_params(Communicator& comm, const NamedParams& params, int root) {
  if (comm.size() == 1) return;
  for (const auto& [name, p] : params) {
    ATTN_CHECK(p.defined() && p.is_contiguous(), "broadcast_params: parameter '", name,
               "' must be a defined, contiguous tensor");
    comm.broadcast(p.raw_data(), static_cast<std::size_t>(p.numel()) * dtype_size(p.dtype()), root);
  }
}

uint64_t params_hash(const NamedParams& params) {
  uint64_t h = kFnvOffset;
  for (const auto& [name, p] : params) {
    h = fnv1a64(name, h);
    const std::string shape = shape_str(p.shape());
    h = fnv1a64(shape, h);
    const Tensor c = p.is_contiguous() ? p.detach() : p.contiguous();
    h = fnv1a64(std::string_view(static_cast<const char*>(c.raw_data()),
                                 static_cast<std::size_t>(c.numel()) * dtype_size(c.dtype())),
                h);
  }
  return h;
}

void check_same_on_all_ranks(Communicator& comm, const std::vector<std::pair<std::string, uint64_t>>& items) {
  if (comm.size() == 1) return;
  uint64_t n_root = items.size();
  comm.broadcast(&n_root, sizeof n_root, 0);
  std::vector<uint64_t> root(static_cast<std::size_t>(n_root));
  if (comm.rank() == 0)
    for (std::size_t i = 0; i < items.size(); ++i) root[i] = items[i].second;
  if (n_root > 0) comm.broadcast(root.data(), root.size() * sizeof(uint64_t), 0);
  // differs[i]: the highest rank whose item i differs from rank 0's (-1: none);
  // the last entry: the highest rank with a different number of items.
  std::vector<int64_t> differs(items.size() + 1, -1);
  const bool same_count = items.size() == n_root;
  if (!same_count) differs.back() = comm.rank();
  for (std::size_t i = 0; i < items.size() && same_count; ++i)
    if (items[i].second != root[i]) differs[i] = comm.rank();
  // Every rank must pass buffers of the same size: a rank with another count
  // would deadlock or corrupt, so the counts are agreed on first.
  int64_t count_mismatch = same_count ? -1 : comm.rank();
  comm.allreduce_max(&count_mismatch, 1);
  ATTN_CHECK(
      count_mismatch < 0, "ranks disagree on what they check: rank ", count_mismatch, " has ",
      comm.rank() == count_mismatch ? std::to_string(items.size()) : std::string("a different number of"),
      " items, rank 0 has ", n_root, " (different builds of attn?)");
  comm.allreduce_max(differs.data(), items.size());
  std::string msg;
  for (std::size_t i = 0; i < items.size(); ++i)
    if (differs[i] >= 0)
      msg += "\n  " + items[i].first + " (rank " + std::to_string(differs[i]) + " differs from rank 0)";
  ATTN_CHECK(msg.empty(),
             "ranks disagree on (each must read the same configuration, vocabulary and data files):", msg);
}

std::vector<int64_t> shard_rows(const std::vector<int64_t>& rows, int rank, int size) {
  ATTN_CHECK(size >= 1 && rank >= 0 && rank < size, "shard_rows: rank ", rank, " of ", size, " ranks");
  std::vector<int64_t> out;
  for (std::size_t i = static_cast<std::size_t>(rank); i < rows.size(); i += static_cast<std::size_t>(size))
    out.push_back(rows[i]);
  return out;
}

int launcher_world_size() {
  // Open MPI's mpirun sets OMPI_COMM_WORLD_SIZE; MPICH's and other PMI launchers set PMI_SIZE.
  for (const char* v : {std::getenv("OMPI_COMM_WORLD_SIZE"), std::getenv("PMI_SIZE")}) {
    if (v && *v) {
      const int n = std::atoi(v);
      if (n >= 1) return n;
    }
  }
  return 0;
}

}  // namespace attn::train
