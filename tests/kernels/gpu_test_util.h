#pragma once
// Helpers for the GPU tests: device arrays, bf16 on the host, error norms, random inputs,
// random Llama weights and a small step builder over a paged KV cache.

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <span>
#include <vector>

#include "engine/backend.h"
#include "engine/model/model_config.h"
#include "engine/model/model_weights.h"

namespace rtgen::testing_gpu {

// Aborts the test binary on a CUDA error (a broken context makes every later test meaningless).
void CheckCuda(cudaError_t err, const char* what, const char* file, int line);
#define GPU_CHECK(expr) ::rtgen::testing_gpu::CheckCuda((expr), #expr, __FILE__, __LINE__)

template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(size_t n) : n_(n) {
    GPU_CHECK(cudaMalloc(&ptr_, std::max<size_t>(n, 1) * sizeof(T)));
    GPU_CHECK(cudaMemset(ptr_, 0xff, std::max<size_t>(n, 1) * sizeof(T)));  // poison (NaN)
  }
  explicit DeviceArray(const std::vector<T>& host) : DeviceArray(host.size()) {
    GPU_CHECK(cudaMemcpy(ptr_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice));
  }
  ~DeviceArray() { cudaFree(ptr_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  T* get() const { return ptr_; }
  // Views a uint16_t array as bf16 for kernel parameters.
  __nv_bfloat16* bf16() const { return reinterpret_cast<__nv_bfloat16*>(ptr_); }
  std::vector<T> ToHost() const {
    GPU_CHECK(cudaDeviceSynchronize());
    std::vector<T> out(n_);
    GPU_CHECK(cudaMemcpy(out.data(), ptr_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
    return out;
  }

 private:
  T* ptr_ = nullptr;
  size_t n_ = 0;
};

uint16_t ToBf16(float f);   // round to nearest even
float FromBf16(uint16_t b);
std::vector<uint16_t> ToBf16(std::span<const float> v);
std::vector<float> FromBf16(std::span<const uint16_t> v);
// Rounds each value to bf16 and back (so references see the kernel's exact inputs).
std::vector<float> RoundBf16(std::vector<float> v);

// y[i][j] = sum_k x[i][k] w[j][k] in fp64 over bf16 inputs x [m, k] and w [n, k] (row-major).
std::vector<double> MatmulReference(const std::vector<uint16_t>& x,
                                    const std::vector<uint16_t>& w, int m, int n, int k);

// ||a - b|| / ||b|| in fp64; +inf when any value of `a` is not finite.
double RelL2(std::span<const float> a, std::span<const double> ref);
double RelL2(std::span<const float> a, std::span<const float> ref);

// The smallest k (a multiple of 8) at which a weight of n rows streams by rows by default
// (kernels/gemv.h GemvRowsMinBytes; needs n >= 4096 and RTGEN_GEMV_ROWS_MIN_MB not 0).
int SmallestRowsK(int n);

// The GEMV's row counts under test: every one of a slice (1..kGemvMaxRows), then several sliced
// ones up to kGemvMaxSlicedRows (kernels/gemv.h): a second slice of one row, of eight, a full one.
std::vector<int> GemvRowCounts();

// A fresh seed per test run (printed by the tests through SCOPED_TRACE); RTGEN_TEST_SEED=N gives
// N instead, to replay a failure (every call of the run gives it).
uint64_t FreshSeed();
std::vector<float> RandomUniform(size_t n, float lo, float hi, std::mt19937_64& rng);
std::vector<float> RandomNormal(size_t n, float stddev, std::mt19937_64& rng);

ModelConfig TinyConfig();     // 2 layers, GQA 4/2, head_dim 32, vocab 512
// RoPE's inverse frequencies (kernels/rope_inv_freq.h) for heads of head_dim at TinyConfig's base.
std::vector<float> TinyRopeInvFreq(int head_dim);
ModelConfig SmolLm2Config();  // SmolLM2-135M shape: 30 layers, 9/3 heads, head_dim 64
// 2 layers at Llama-3-8B's hidden size (4096, 32/8 heads of 128) with intermediate 4096 and vocab
// 4096: every projection of a one-token step streams by rows at the default threshold, so its
// linked norms (kernels/model_forward.h) run through the row-streaming GEMV.
ModelConfig AllRowsConfig();
// 2 layers at Llama-3.2-1B's width (2048, 32/8 heads of 64, intermediate 8192) with vocab 4096:
// a one-row step's qkv GEMV (a 12 MiB weight) releases decode attention early, which copies its
// older keys before its wait in 16-warp blocks (gemv.cu TcRopeReleasesEarly).
ModelConfig Llama1BLayersConfig();
ModelWeights RandomWeights(const ModelConfig& c, uint64_t seed);
// n token ids drawn uniformly from c's vocabulary.
std::vector<int32_t> RandomTokens(const ModelConfig& c, int n, std::mt19937_64& rng);

// Builds StepInputs for sequences in a paged cache with sequentially handed-out blocks.
struct TestSeq {
  std::vector<int32_t> tokens;  // prompt then generated tokens
  std::vector<int32_t> output;  // generated tokens only (the RNG counter is output.size())
  int32_t computed = 0;         // tokens whose KV is written
  std::vector<int32_t> blocks;
  uint64_t seed = 0;
};

class StepBuilder {
 public:
  StepBuilder(int32_t block_size, int32_t* next_block) : bs_(block_size), next_(next_block) {}
  // Schedules `count` tokens of `seq` from seq.computed (and counts them as computed: the
  // built step must be run); a sample of its last token when params != null.
  void Add(TestSeq& seq, int32_t count, const SamplingParams* params);
  StepInput Build(bool decode_only);

 private:
  int32_t bs_;
  int32_t* next_;
  StepInput in_;
  std::vector<std::vector<int32_t>> tables_;
};

}  // namespace rtgen::testing_gpu
