#pragma once
// BENCH_CHECK: the GPU micro-benchmarks' check of a CUDA runtime call — on failure it prints the
// call and the error and exits (a benchmark has nothing to fall back to).

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define BENCH_CHECK(expr)                                                                    \
  do {                                                                                       \
    const cudaError_t err_ = (expr);                                                         \
    if (err_ != cudaSuccess) {                                                               \
      std::fprintf(stderr, "%s failed: %s\n", #expr, cudaGetErrorString(err_));             \
      std::exit(1);                                                                          \
    }                                                                                        \
  } while (0)
