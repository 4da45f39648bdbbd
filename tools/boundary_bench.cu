// rtgen-boundary-bench: what one kernel boundary costs inside a CUDA graph on this GPU, the floor
// under a layered decode step, which runs five dependent launches per layer at batch 1.
//
// usage: rtgen-boundary-bench [--kernels 200] [--repeats 9] [--device 0] [--work-ns 0]
//
// A chain of `kernels` launches is captured into one graph; launch i's blocks each read one word
// launch i - 1 wrote (a real dependency through L2) and write their own. Per grid size (blocks of
// 256 threads) and launch kind — plain stream order; programmatic dependent launch (PDL) as the
// decode step launches, with the wait at the top of each kernel; or PDL without the wait, one
// thread a block polling a counter the previous launch's blocks raise after their write — the
// graph is replayed and timed with events; the figure is the median over `repeats` replays of
// the replay's time divided by `kernels`. Grids with 64 KiB of shared memory per block stand in
// for decode attention's large blocks. Every launch does the same trivial work, so the figure is
// the boundary itself: the launch, the wait for the previous grid, and the write that the next
// grid reads; with --work-ns each block first spins that long (a kernel's work, under which the
// next launch gets ready, as in the decode step), and the figure is that plus the boundary.

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/device_utils.cuh"
#include "kernels/launch.h"
#include "tools/bench_check.h"
#include "tools/graph_replay_timer.h"
#include "tools/int_flag.h"
#include "tools/median.h"

namespace rtgen {
namespace {

// How launch k waits for launch k - 1.
enum class Wait {
  kPlain,  // stream order: it starts after k - 1 has completed
  kPdl,    // programmatic dependent: griddepcontrol.wait at the top, then the next may start
  kFlag,   // programmatic dependent without the wait: one thread polls a counter that each block
           // of k - 1 raised (release) after its write, then the next may start
};

// Spins for `ns` nanoseconds of the global timer (a kernel's work, during which the next launch
// can get ready).
__device__ __forceinline__ void Busy(uint32_t ns) {
  if (ns == 0) return;
  const uint64_t start = kernels::GlobalTimerNs();
  while (kernels::GlobalTimerNs() - start < ns) {
  }
}

// Block b reads word (7 b + 1) mod grid of the previous launch's output and writes that plus one
// to word b. counters[k]: blocks of launch k done (kFlag; zeroed before the chain).
template <Wait kWait>
__global__ void __launch_bounds__(256) ChainKernel(const uint32_t* in, uint32_t* out,
                                                   uint32_t* counters, int k, uint32_t work_ns) {
  if constexpr (kWait == Wait::kPdl) {
    kernels::PdlWait();
    kernels::PdlLaunchDependents();
  } else if constexpr (kWait == Wait::kFlag) {
    if (k > 0) {
      if (threadIdx.x == 0) {
        while (kernels::LoadAcquire(counters + k - 1) < gridDim.x) {
        }
      }
      __syncthreads();
    }
    kernels::PdlLaunchDependents();
  }
  // The dynamic shared memory only sizes the block (the large-block variants).
  if (threadIdx.x == 0) {
    Busy(work_ns);
    out[blockIdx.x] = __ldcg(in + (7u * blockIdx.x + 1u) % gridDim.x) + 1u;
    if constexpr (kWait == Wait::kFlag) {
      kernels::AddRelease(counters + k, 1u);
    }
  }
}

struct Options {
  int kernels = 200;
  int repeats = 9;
  int device = 0;
  uint32_t work_ns = 0;  // each block's work after its wait, before its write
};

constexpr int kWarmups = 3;  // untimed replays before the timed ones

// Median µs per launch of a graph holding `o.kernels` chained launches.
double TimeChain(const Options& o, int blocks, size_t smem, Wait wait, cudaStream_t stream,
                 uint32_t* a, uint32_t* b, uint32_t* counters) {
  auto* kernel = wait == Wait::kPdl    ? ChainKernel<Wait::kPdl>
                 : wait == Wait::kFlag ? ChainKernel<Wait::kFlag>
                                       : ChainKernel<Wait::kPlain>;
  if (smem > 48 * 1024) {
    BENCH_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(smem)));
  }
  BENCH_CHECK(cudaMemsetAsync(a, 0, blocks * sizeof(uint32_t), stream));
  BENCH_CHECK(cudaMemsetAsync(b, 0, blocks * sizeof(uint32_t), stream));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  BENCH_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  if (wait == Wait::kFlag) {
    BENCH_CHECK(cudaMemsetAsync(counters, 0, o.kernels * sizeof(uint32_t), stream));
  }
  for (int i = 0; i < o.kernels; ++i) {
    uint32_t* in = i % 2 ? b : a;
    uint32_t* out = i % 2 ? a : b;
    BENCH_CHECK(kernels::LaunchKernelPdlIf(wait != Wait::kPlain, kernel, dim3(blocks), dim3(256),
                                           smem, stream, static_cast<const uint32_t*>(in), out,
                                           counters, i, o.work_ns));
  }
  BENCH_CHECK(cudaStreamEndCapture(stream, &graph));
  BENCH_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  std::vector<double> replay_ms;
  BENCH_CHECK(tools::TimeGraphReplays(exec, stream, kWarmups, o.repeats, &replay_ms));
  BENCH_CHECK(cudaGraphExecDestroy(exec));
  BENCH_CHECK(cudaGraphDestroy(graph));
  // Every launch read the previous one's words: replaying the chain's arithmetic from zeros on the
  // host gives each buffer's one value at the end; a stale read leaves a word behind. (When 7 and
  // the grid share a factor, (7 b + 1) mod grid skips some words; a stale word among those read
  // still shows.)
  uint32_t want_a = 0, want_b = 0;
  for (int r = 0; r < kWarmups + o.repeats; ++r) {
    for (int i = 0; i < o.kernels; ++i) {
      if (i % 2) {
        want_a = want_b + 1;
      } else {
        want_b = want_a + 1;
      }
    }
  }
  std::vector<uint32_t> ha(blocks), hb(blocks);
  BENCH_CHECK(cudaMemcpy(ha.data(), a, blocks * sizeof(uint32_t), cudaMemcpyDeviceToHost));
  BENCH_CHECK(cudaMemcpy(hb.data(), b, blocks * sizeof(uint32_t), cudaMemcpyDeviceToHost));
  const char* kind = wait == Wait::kPdl ? "PDL" : wait == Wait::kFlag ? "flag" : "plain";
  for (int i = 0; i < blocks; ++i) {
    if (ha[i] != want_a || hb[i] != want_b) {
      std::fprintf(stderr,
                   "boundary bench: a stale read (%s, %d blocks, %zu KiB: word %d holds %u / %u, "
                   "want %u / %u)\n",
                   kind, blocks, smem / 1024, i, ha[i], hb[i], want_a, want_b);
      std::exit(1);
    }
  }
  return 1000.0 * tools::Median(replay_ms) / o.kernels;  // ms per replay -> us per launch
}

int Main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 < argc && arg == "--kernels") {
      if (!tools::ParseIntFlag("--kernels", argv[++i], 2, 100000, &o.kernels)) return 2;
    } else if (i + 1 < argc && arg == "--repeats") {
      if (!tools::ParseIntFlag("--repeats", argv[++i], 1, 1000, &o.repeats)) return 2;
    } else if (i + 1 < argc && arg == "--device") {
      if (!tools::ParseIntFlag("--device", argv[++i], 0, 1023, &o.device)) return 2;
    } else if (i + 1 < argc && arg == "--work-ns") {
      int ns = 0;
      if (!tools::ParseIntFlag("--work-ns", argv[++i], 0, 1000000, &ns)) return 2;
      o.work_ns = static_cast<uint32_t>(ns);
    } else {
      std::fprintf(stderr, "usage: %s [--kernels 200] [--repeats 9] [--device 0] [--work-ns 0]\n",
                   argv[0]);
      return 2;
    }
  }
  BENCH_CHECK(cudaSetDevice(o.device));
  cudaDeviceProp prop;
  BENCH_CHECK(cudaGetDeviceProperties(&prop, o.device));
  std::printf("device: %s, %d SMs; %d chained launches per graph, median of %d replays; "
              "%u ns of work a launch (in the figures)\n",
              prop.name, prop.multiProcessorCount, o.kernels, o.repeats, o.work_ns);
  std::printf("floor: none (this is the floor: the cost of one dependent launch in a graph)\n");
  const int sms = prop.multiProcessorCount;
  const int max_blocks = 8 * sms;
  uint32_t *a = nullptr, *b = nullptr, *counters = nullptr;
  BENCH_CHECK(cudaMalloc(&counters, o.kernels * sizeof(uint32_t)));
  BENCH_CHECK(cudaMalloc(&a, max_blocks * sizeof(uint32_t)));
  BENCH_CHECK(cudaMalloc(&b, max_blocks * sizeof(uint32_t)));
  BENCH_CHECK(cudaMemset(a, 0, max_blocks * sizeof(uint32_t)));
  BENCH_CHECK(cudaMemset(b, 0, max_blocks * sizeof(uint32_t)));
  BENCH_CHECK(cudaDeviceSynchronize());
  cudaStream_t stream;
  BENCH_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::printf("%8s %10s %14s %14s %14s\n", "blocks", "smem KiB", "plain us", "PDL us",
              "flag us");
  struct Shape {
    int blocks;
    size_t smem;
  };
  for (const Shape s : {Shape{1, 0}, Shape{8, 0}, Shape{sms, 0}, Shape{2 * sms, 0},
                        Shape{8 * sms, 0}, Shape{sms, 64 * 1024}, Shape{2 * sms, 64 * 1024}}) {
    const double plain = TimeChain(o, s.blocks, s.smem, Wait::kPlain, stream, a, b, counters);
    const double pdl = TimeChain(o, s.blocks, s.smem, Wait::kPdl, stream, a, b, counters);
    const double flag = TimeChain(o, s.blocks, s.smem, Wait::kFlag, stream, a, b, counters);
    std::printf("%8d %10zu %14.3f %14.3f %14.3f\n", s.blocks, s.smem / 1024, plain, pdl, flag);
  }
  BENCH_CHECK(cudaStreamDestroy(stream));
  BENCH_CHECK(cudaFree(counters));
  BENCH_CHECK(cudaFree(a));
  BENCH_CHECK(cudaFree(b));
  return 0;
}

}  // namespace
}  // namespace rtgen

int main(int argc, char** argv) { return rtgen::Main(argc, argv); }
