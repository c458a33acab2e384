// Measurement-only knobs of the GGUF Llama (models/llama.h): which form each
// phase multiplies in, 8-bit activations, the f16 decode cache and llama.cpp's
// roundings. The defaults are what LlamaModel::load(path, options) uses; the
// benchmarks (bench/llama_bench --forms) and the parity tests set the others.
// Not part of the stable API: fields may change between minor versions.
#pragma once

#include <cstdint>

namespace attn::models {

// How a pass multiplies by a quantized (Q4_1, Q8_0) matrix.
enum class WeightForm {
  quantized,  // in block form (attn/ops/quantized.h): every weight byte read once per pass
  f32,        // expanded to f32 (on load when expand_on_load, else per pass into a scratch) + sgemm
};

// The defaults are the faster form per phase, measured (docs/models.md): decoding is memory bound and
// multiplies in block form; prompt passes expand each matrix to f32 once per pass (K·N conversions,
// ~1/L of the product's work) and use BLAS sgemm.
struct LlamaTuning {
  WeightForm prefill = WeightForm::f32;       // passes over more than one token ...
  int64_t prefill_f32_min_tokens = 16;        // ... of at least this many (shorter ones: quantized)
  WeightForm decode = WeightForm::quantized;  // one-token steps
  // Keep an f32 copy of every quantized matrix from load time on (4 bytes per weight instead of
  // ~0.6); only for measuring "dequantize on load" against the per-pass expansion.
  bool expand_on_load = false;
  // Quantized products over few rows (decode steps, passes shorter than prefill_f32_min_tokens) first
  // quantize the activation rows to 8 bits per block of 32 (ggml's Q8_1 against Q4_1 weights, Q8_0
  // against Q8_0) and sum integer products (ops::Q8Dot; AVX512-VNNI where the CPU has it, else AVX2), as
  // llama.cpp's CPU backend does; a decode step then runs as one parallel region with barriers between
  // its phases. false keeps the activations f32 (the oracle path) and skips the repacked copy of the
  // quantized weights (~0.63 bytes per weight). Ignored with llama_cpp_rounding, and where neither
  // vector kernel runs (ATTN_ISA=scalar) at load time.
  bool q8_activations = true;
  // With q8_activations: decode steps read an f16 copy of the KV cache (llama.cpp's cache type, half the
  // bytes of f32 per step; prompt passes keep the f32 cache). false: they read the f32 cache.
  bool decode_kv_f16 = true;
  // For parity measurements only: emulate the roundings llama.cpp's CPU backend applies — the
  // activations quantized to 8 bits (ggml's Q8_1 blocks for Q4_1 weights, Q8_0 for Q8_0: per 32
  // values q = round(x·127/max|x|), scale stored as f16) before every quantized product, and Q, K, V
  // rounded to f16 (its KV cache type). Slower; off by default.
  bool llama_cpp_rounding = false;
  // The batched step (forward_batch, the runtime's decoder: runtime/decoder.h) with 8-bit activations
  // where the CPU has a vector kernel for them; false keeps them f32 (for comparisons with the f32
  // one-sequence path). Independent of q8_activations, which only concerns prefill and step.
  bool batch_q8_activations = true;
};

}  // namespace attn::models
