// rtgen-boundary-bench: what one kernel boundary costs inside a CUDA graph on this GPU, the floor
// under a layered decode step, which runs five dependent launches per layer at batch 1.
//
// usage: rtgen-boundary-bench [--kernels 200] [--repeats 9] [--device 0]
//
// A chain of `kernels` launches is captured into one graph; launch i's blocks each read one word
// launch i - 1 wrote (a real dependency through L2) and write their own. Per grid size (blocks of
// 256 threads) and launch kind — plain stream order, or programmatic dependent launch (PDL) as
// the decode step launches, with the wait at the top of each kernel — the graph is replayed and
// timed with events; the figure is the median over `repeats` replays of the replay's time divided
// by `kernels`. Grids with 64 KiB of shared memory per block stand in for decode attention's large
// blocks. Every launch does the same trivial work, so the figure is the boundary itself: the
// launch, the wait for the previous grid, and the write that the next grid reads.

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/launch.h"
#include "tools/bench_check.h"
#include "tools/graph_replay_timer.h"
#include "tools/median.h"

namespace rtgen {
namespace {

// Block b reads word (7 b + 1) mod grid of the previous launch's output and writes word b.
// kPdl: the wait comes first (nothing is read before it), then the next launch may start.
template <bool kPdl>
__global__ void __launch_bounds__(256) ChainKernel(const uint32_t* in, uint32_t* out) {
  if constexpr (kPdl) {
    kernels::PdlWait();
    kernels::PdlLaunchDependents();
  }
  // The dynamic shared memory only sizes the block (the large-block variants).
  if (threadIdx.x == 0) out[blockIdx.x] = __ldcg(in + (7u * blockIdx.x + 1u) % gridDim.x) + 1u;
}

struct Options {
  int kernels = 200;
  int repeats = 9;
  int device = 0;
};

// Median µs per launch of a graph holding `o.kernels` chained launches.
double TimeChain(const Options& o, int blocks, size_t smem, bool pdl, cudaStream_t stream,
                 uint32_t* a, uint32_t* b) {
  auto* kernel = pdl ? ChainKernel<true> : ChainKernel<false>;
  if (smem > 48 * 1024) {
    BENCH_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(smem)));
  }
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  BENCH_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < o.kernels; ++i) {
    uint32_t* in = i % 2 ? b : a;
    uint32_t* out = i % 2 ? a : b;
    BENCH_CHECK(kernels::LaunchKernelPdlIf(pdl, kernel, dim3(blocks), dim3(256), smem, stream,
                                           static_cast<const uint32_t*>(in), out));
  }
  BENCH_CHECK(cudaStreamEndCapture(stream, &graph));
  BENCH_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  std::vector<double> replay_ms;
  BENCH_CHECK(tools::TimeGraphReplays(exec, stream, 3, o.repeats, &replay_ms));
  BENCH_CHECK(cudaGraphExecDestroy(exec));
  BENCH_CHECK(cudaGraphDestroy(graph));
  return 1000.0 * tools::Median(replay_ms) / o.kernels;  // ms per replay -> us per launch
}

int Main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 < argc && arg == "--kernels") {
      o.kernels = std::atoi(argv[++i]);
    } else if (i + 1 < argc && arg == "--repeats") {
      o.repeats = std::atoi(argv[++i]);
    } else if (i + 1 < argc && arg == "--device") {
      o.device = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--kernels 200] [--repeats 9] [--device 0]\n", argv[0]);
      return 2;
    }
  }
  if (o.kernels < 2 || o.repeats < 1) {
    std::fprintf(stderr, "--kernels must be >= 2 and --repeats >= 1\n");
    return 2;
  }
  BENCH_CHECK(cudaSetDevice(o.device));
  cudaDeviceProp prop;
  BENCH_CHECK(cudaGetDeviceProperties(&prop, o.device));
  std::printf("device: %s, %d SMs; %d chained launches per graph, median of %d replays\n",
              prop.name, prop.multiProcessorCount, o.kernels, o.repeats);
  std::printf("floor: none (this is the floor: the cost of one dependent launch in a graph)\n");
  const int sms = prop.multiProcessorCount;
  const int max_blocks = 8 * sms;
  uint32_t *a = nullptr, *b = nullptr;
  BENCH_CHECK(cudaMalloc(&a, max_blocks * sizeof(uint32_t)));
  BENCH_CHECK(cudaMalloc(&b, max_blocks * sizeof(uint32_t)));
  BENCH_CHECK(cudaMemset(a, 0, max_blocks * sizeof(uint32_t)));
  BENCH_CHECK(cudaMemset(b, 0, max_blocks * sizeof(uint32_t)));
  BENCH_CHECK(cudaDeviceSynchronize());
  cudaStream_t stream;
  BENCH_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::printf("%8s %10s %14s %14s\n", "blocks", "smem KiB", "plain us", "PDL us");
  struct Shape {
    int blocks;
    size_t smem;
  };
  for (const Shape s : {Shape{1, 0}, Shape{8, 0}, Shape{sms, 0}, Shape{2 * sms, 0},
                        Shape{8 * sms, 0}, Shape{sms, 64 * 1024}, Shape{2 * sms, 64 * 1024}}) {
    const double plain = TimeChain(o, s.blocks, s.smem, false, stream, a, b);
    const double pdl = TimeChain(o, s.blocks, s.smem, true, stream, a, b);
    std::printf("%8d %10zu %14.3f %14.3f\n", s.blocks, s.smem / 1024, plain, pdl);
  }
  BENCH_CHECK(cudaStreamDestroy(stream));
  BENCH_CHECK(cudaFree(a));
  BENCH_CHECK(cudaFree(b));
  return 0;
}

}  // namespace
}  // namespace rtgen

int main(int argc, char** argv) { return rtgen::Main(argc, argv); }
