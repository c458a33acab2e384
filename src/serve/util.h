// Pieces shared by the server's files (src/serve): the error a handler throws, the compute gate.
// Private to the serve floor.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace attn::serve::detail {

// An error answered with an OpenAI-style body {"error": {"message", "type", "param", "code"}}.
struct HttpError : std::runtime_error {
  int status;
  std::string type, param, code;
  int retry_after_s = 0;  // > 0: a Retry-After header
  HttpError(int status, std::string message, std::string param = "", std::string code = "",
            std::string type = "")
      : std::runtime_error(std::move(message)),
        status(status),
        type(type.empty() ? default_type(status) : std::move(type)),
        param(std::move(param)),
        code(std::move(code)) {}
  static std::string default_type(int status) {
    if (status == 429) return "rate_limit_error";
    if (status >= 500) return "server_error";
    return "invalid_request_error";
  }
};

// 400 invalid_request_error naming the parameter.
inline HttpError bad_request(std::string message, std::string param = "", std::string code = "") {
  return HttpError(400, std::move(message), std::move(param), std::move(code));
}

// The one door to the models' compute: first come, first served (a ticket lock). A holder runs one
// unit (an embedding batch, a prompt pass, a decoding step) and lets the next one in, so streams
// and batches interleave without two of them competing for the cores.
class ComputeGate {
 public:
  void lock() {
    std::unique_lock<std::mutex> lk(mu_);
    const uint64_t ticket = next_++;
    cv_.wait(lk, [&] { return serving_ == ticket; });
  }
  void unlock() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      ++serving_;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t next_ = 0, serving_ = 0;
};

// Holds the gate for a scope; release() and acquire() let a loop give way between its units.
class GateHold {
 public:
  explicit GateHold(ComputeGate& g) : g_(g) { acquire(); }
  ~GateHold() { release(); }
  GateHold(const GateHold&) = delete;
  GateHold& operator=(const GateHold&) = delete;
  void acquire() {
    if (!held_) g_.lock();
    held_ = true;
  }
  void release() {
    if (held_) g_.unlock();
    held_ = false;
  }

 private:
  ComputeGate& g_;
  bool held_ = false;
};

}  // namespace attn::serve::detail
