// rtgen-sm-stream-bench: how fast a few SMs can stream bytes on this GPU, and what a hand-off
// between SMs costs. It answers whether a batch-1 decode step could run its layers on one
// thread-block cluster (16 SMs, hand-offs through distributed shared memory) instead of on the
// whole GPU (hand-offs through L2): such a step needs each of the 16 SMs to stream its share of a
// layer's weights (SmolLM2-135M: ~440 KiB per SM per layer) far faster than its fair share of
// DRAM bandwidth (~32 GB/s when all 132 SMs read).
//
// usage: rtgen-sm-stream-bench [--repeats 7] [--device 0]
//                              [--only stream-l2|stream-dram|matrix|latency]
//
// Streams: every active block (one per SM: ~192 KiB of shared memory each) reads its own bytes,
// either by the TMA (one thread keeps 11 of 12 16-KiB bulk copies in flight) or by plain loads
// (1024 threads, four or eight 16-byte loads each in flight: 64 or 128 KiB per SM). Sources: an
// L2-resident region (256 KiB per block, read 32 times) or DRAM (8 MiB per block, a fresh region
// on every launch). Placements: one block; 16 blocks as one cluster (one GPC); 16 blocks spread
// over the GPU (every 8th block of a full grid); every SM. Each block times itself with the global
// timer; the figure is GB/s per active SM (median over blocks, then over repeats) and the sum
// over SMs.
// Matrix: every SM reads a row-major [131072, 4096] bf16 matrix in the 2D TMA boxes a GEMM's
// weight operand is copied in (64 columns x 64 / 128 / 256 rows, 128-byte swizzle), GB/s by
// events. Latencies: a cluster barrier over 16 blocks (arrive + wait, 4096 rounds), a one-way
// flag hand-off between two SMs through L2 (ping-pong), and an all-to-all flag exchange over 16
// and over all SMs (a grid barrier of flags).

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/hopper_ptx.cuh"
#include "tools/bench_check.h"
#include "tools/int_flag.h"
#include "tools/median.h"

namespace rtgen {
namespace {

constexpr int kStages = 12;
constexpr uint32_t kChunk = 16 * 1024;  // bytes per bulk copy
constexpr size_t kSmem = size_t{kStages} * kChunk;
constexpr int kLdgThreads = 1024;
constexpr int kClusterBlocks = 16;

__device__ __forceinline__ uint64_t GlobalNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

struct StreamArgs {
  const uint8_t* src = nullptr;
  uint64_t block_stride = 0;  // bytes between consecutive active blocks' regions
  uint64_t region = 0;        // bytes of a block's region (read `passes` times)
  int passes = 1;
  int active_every = 1;       // blocks with blockIdx.x % active_every == 0 stream
  uint64_t* ns = nullptr;     // [gridDim.x] own time, 0 for inactive blocks
  uint32_t* sink = nullptr;   // keeps the loads
};

// kTma: thread 0 streams by bulk copies into a ring of kStages; otherwise every thread keeps
// kLoads 16-byte loads in flight.
template <bool kTma, int kLoads>
__global__ void StreamKernel(StreamArgs a) {
  extern __shared__ __align__(128) uint8_t ring[];
  __shared__ uint64_t full[kStages];
  if (blockIdx.x % a.active_every != 0) {
    if (threadIdx.x == 0) a.ns[blockIdx.x] = 0;
    return;
  }
  const uint8_t* base = a.src + (blockIdx.x / a.active_every) * a.block_stride;
  const uint64_t total = a.region * a.passes;
  uint32_t acc = 0;
  __syncthreads();
  const uint64_t t0 = GlobalNs();
  if constexpr (kTma) {
#if RTGEN_HOPPER_DEVICE_CODE
    if (threadIdx.x == 0) {
      for (int s = 0; s < kStages; ++s) kernels::hopper::MbarInit(&full[s], 1);
      kernels::hopper::FenceBarrierInit();
      const uint64_t chunks = total / kChunk, per_region = a.region / kChunk;
      const auto issue = [&](uint64_t c) {
        const int s = static_cast<int>(c % kStages);
        kernels::hopper::MbarArriveExpectTx(&full[s], kChunk);
        asm volatile(
            "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
            " [%0], [%1], %2, [%3];"
            ::"r"(kernels::hopper::SmemAddr(ring + static_cast<size_t>(s) * kChunk)),
            "l"(reinterpret_cast<uint64_t>(base + (c % per_region) * kChunk)), "r"(kChunk),
            "r"(kernels::hopper::SmemAddr(&full[s]))
            : "memory");
      };
      for (uint64_t c = 0; c < kStages && c < chunks; ++c) issue(c);
      for (uint64_t c = 0; c < chunks; ++c) {
        const int s = static_cast<int>(c % kStages);
        const uint32_t parity = static_cast<uint32_t>((c / kStages) & 1);
        for (uint64_t spins = 0; !kernels::hopper::MbarTestWait(&full[s], parity);) {
          if (++spins > (1ull << 26)) __trap();  // a copy that never lands: fail, do not hang
        }
        acc ^= *reinterpret_cast<const uint32_t*>(ring + static_cast<size_t>(s) * kChunk);
        if (c + kStages < chunks) issue(c + kStages);
      }
    }
#endif
  } else {
    const uint4* p = reinterpret_cast<const uint4*>(base);
    const uint64_t per_iter = uint64_t{kLoads} * kLdgThreads;  // 16-byte pieces per iteration
    const uint64_t pieces = total / 16, region_pieces = a.region / 16;
    for (uint64_t i = 0; i < pieces; i += per_iter) {
      uint4 v[kLoads];
#pragma unroll
      for (int u = 0; u < kLoads; ++u) {
        const uint64_t idx = (i + u * kLdgThreads + threadIdx.x) % region_pieces;
        asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                     : "=r"(v[u].x), "=r"(v[u].y), "=r"(v[u].z), "=r"(v[u].w)
                     : "l"(p + idx));
      }
#pragma unroll
      for (int u = 0; u < kLoads; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    }
  }
  __syncthreads();
  const uint64_t t1 = GlobalNs();
  if (threadIdx.x == 0) a.ns[blockIdx.x] = t1 - t0;
  if (acc == 0x9e3779b9u) a.sink[blockIdx.x] = acc;  // practically never: keeps the loads
}

// A GEMM's weight stream: a row-major bf16 matrix [rows, k] read in 2D boxes of 64 (k) x
// kBoxRows rows by the TMA (128-byte swizzle, as a wgmma operand needs), tile by tile (tile t:
// rows t kBoxRows.., every k), tiles dealt round-robin to the blocks; one thread keeps a ring of
// ~192 KiB of boxes in flight.
template <int kBoxRows>
__global__ void MatrixStreamKernel(const __grid_constant__ CUtensorMap map, int tiles,
                                   int k_blocks, uint32_t* sink) {
#if RTGEN_HOPPER_DEVICE_CODE
  constexpr uint32_t kBox = 64 * 2 * kBoxRows;
  constexpr int kStages = kSmem / kBox;  // the same ~192 KiB ring at every box size
  extern __shared__ __align__(1024) uint8_t ring[];
  __shared__ uint64_t full[kStages];
  if (threadIdx.x != 0) return;
  for (int s = 0; s < kStages; ++s) kernels::hopper::MbarInit(&full[s], 1);
  kernels::hopper::FenceBarrierInit();
  const int my_tiles = (tiles - static_cast<int>(blockIdx.x) + gridDim.x - 1) / gridDim.x;
  const int64_t boxes = int64_t{my_tiles} * k_blocks;
  const auto issue = [&](int64_t c) {
    const int s = static_cast<int>(c % kStages);
    const int tile = static_cast<int>(blockIdx.x + (c / k_blocks) * gridDim.x);
    const int kb = static_cast<int>(c % k_blocks);
    kernels::hopper::MbarArriveExpectTx(&full[s], kBox);
    kernels::hopper::TmaLoad2dNoHint(ring + static_cast<size_t>(s) * kBox, &map, kb * 64,
                                     tile * kBoxRows, &full[s]);
  };
  uint32_t acc = 0;
  for (int64_t c = 0; c < kStages && c < boxes; ++c) issue(c);
  for (int64_t c = 0; c < boxes; ++c) {
    const int s = static_cast<int>(c % kStages);
    const uint32_t parity = static_cast<uint32_t>((c / kStages) & 1);
    for (uint64_t spins = 0; !kernels::hopper::MbarTestWait(&full[s], parity);) {
      if (++spins > (1ull << 26)) __trap();
    }
    acc ^= *reinterpret_cast<const uint32_t*>(ring + static_cast<size_t>(s) * kBox);
    if (c + kStages < boxes) issue(c + kStages);
  }
  if (acc == 0x9e3779b9u) sink[blockIdx.x] = acc;
#endif
}

PFN_cuTensorMapEncodeTiled_v12000 Encoder() {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult found{};
  BENCH_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000,
                                               cudaEnableDefault, &found));
  if (found != cudaDriverEntryPointSuccess) {
    std::fprintf(stderr, "cuTensorMapEncodeTiled not found\n");
    std::exit(1);
  }
  return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
}

// GB/s of MatrixStreamKernel<kBoxRows> over a fresh [rows, k] matrix per launch (three in turn,
// 1 GiB apart from each other's start), by events, median of `repeats`.
template <int kBoxRows>
double TimeMatrix(uint8_t* buf, int rows, int k, int sms, int repeats, uint32_t* sink,
                  cudaStream_t stream) {
  const auto kernel = MatrixStreamKernel<kBoxRows>;
  BENCH_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   static_cast<int>(kSmem)));
  const auto encode = Encoder();
  cudaEvent_t start, stop;
  BENCH_CHECK(cudaEventCreate(&start));
  BENCH_CHECK(cudaEventCreate(&stop));
  std::vector<double> gbs;
  const size_t bytes = size_t{static_cast<size_t>(rows)} * k * 2;
  for (int r = -1; r < repeats; ++r) {
    CUtensorMap map;
    const cuuint64_t dims[2] = {static_cast<cuuint64_t>(k), static_cast<cuuint64_t>(rows)};
    const cuuint64_t strides[1] = {static_cast<cuuint64_t>(k) * 2};
    const cuuint32_t box[2] = {64, kBoxRows};
    const cuuint32_t elem[2] = {1, 1};
    void* base = buf + (size_t{static_cast<size_t>(r + 1) % 3} << 30);
    if (encode(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, base, dims, strides, box, elem,
               CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
               CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) !=
        CUDA_SUCCESS) {
      std::fprintf(stderr, "tensor map encoding failed\n");
      std::exit(1);
    }
    BENCH_CHECK(cudaEventRecord(start, stream));
    kernel<<<sms, 32, kSmem, stream>>>(map, rows / kBoxRows, k / 64, sink);
    BENCH_CHECK(cudaGetLastError());
    BENCH_CHECK(cudaEventRecord(stop, stream));
    BENCH_CHECK(cudaEventSynchronize(stop));
    float ms = 0.0f;
    BENCH_CHECK(cudaEventElapsedTime(&ms, start, stop));
    if (r >= 0) gbs.push_back(static_cast<double>(bytes) / (ms * 1e6));
  }
  BENCH_CHECK(cudaEventDestroy(start));
  BENCH_CHECK(cudaEventDestroy(stop));
  return tools::Median(gbs);
}

// Thread 0 of block 0 times `rounds` cluster barriers that every thread of the 16 blocks joins.
__global__ void ClusterBarrierKernel(int rounds, uint64_t* ns) {
  __syncthreads();
  const uint64_t t0 = GlobalNs();
  for (int i = 0; i < rounds; ++i) {
    asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
    asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
  }
  const uint64_t t1 = GlobalNs();
  if (blockIdx.x == 0 && threadIdx.x == 0) *ns = t1 - t0;
}

// Block 0 sets the flag to i and waits for block 1's acknowledgement of i; block 1 waits for
// i and acknowledges it. Round trip / 2 is one hand-off through L2.
__global__ void PingPongKernel(int rounds, volatile uint32_t* flag, volatile uint32_t* ack,
                               uint64_t* ns) {
  if (threadIdx.x != 0) return;
  if (blockIdx.x == 0) {
    const uint64_t t0 = GlobalNs();
    for (int i = 1; i <= rounds; ++i) {
      *flag = static_cast<uint32_t>(i);
      for (uint64_t spins = 0; *ack != static_cast<uint32_t>(i);) {
        if (++spins > (1ull << 28)) __trap();
      }
    }
    *ns = GlobalNs() - t0;
  } else if (blockIdx.x == 1) {
    for (int i = 1; i <= rounds; ++i) {
      for (uint64_t spins = 0; *flag != static_cast<uint32_t>(i);) {
        if (++spins > (1ull << 28)) __trap();
      }
      *ack = static_cast<uint32_t>(i);
    }
  }
}

// `rounds` all-to-all exchanges among the grid's blocks (one per SM): in round r block b stores
// r to its word, then threads t < gridDim.x of every block poll word t until it holds r; the
// block moves on once all have. Block 0's time / rounds is what a hand-off costs when every
// block needs something from every other (a grid barrier made of flags).
__global__ void AllToAllKernel(int rounds, volatile uint32_t* words, uint64_t* ns) {
  const uint64_t t0 = GlobalNs();
  for (int r = 1; r <= rounds; ++r) {
    __syncthreads();
    if (threadIdx.x == 0) words[blockIdx.x * 32] = static_cast<uint32_t>(r);
    if (threadIdx.x < gridDim.x) {
      for (uint64_t spins = 0; words[threadIdx.x * 32] < static_cast<uint32_t>(r);) {
        if (++spins > (1ull << 28)) __trap();
      }
    }
  }
  __syncthreads();
  if (blockIdx.x == 0 && threadIdx.x == 0) *ns = GlobalNs() - t0;
}

// Makes `cfg` a launch in clusters of kClusterBlocks blocks; `attr` holds the attribute.
void AsCluster(cudaLaunchConfig_t* cfg, cudaLaunchAttribute* attr) {
  attr->id = cudaLaunchAttributeClusterDimension;
  attr->val.clusterDim.x = kClusterBlocks;
  attr->val.clusterDim.y = 1;
  attr->val.clusterDim.z = 1;
  cfg->attrs = attr;
  cfg->numAttrs = 1;
}

struct Placement {
  const char* name;
  int grid;          // blocks launched
  int active_every;  // every n-th streams
  bool cluster;      // launched as clusters of kClusterBlocks
};

struct Source {
  const char* name;
  uint64_t region;
  int passes;
  bool fresh;  // a new region on every launch (DRAM)
};

template <bool kTma, int kLoads>
cudaError_t LaunchStream(const Placement& pl, const StreamArgs& a, cudaStream_t stream) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(pl.grid);
  cfg.blockDim = dim3(kTma ? 32 : kLdgThreads);
  cfg.dynamicSmemBytes = kSmem;
  cfg.stream = stream;
  cudaLaunchAttribute attr;
  if (pl.cluster) AsCluster(&cfg, &attr);
  return cudaLaunchKernelEx(&cfg, StreamKernel<kTma, kLoads>, a);
}

struct StreamFigure {
  double per_sm_gbs;  // median over repeats of the median block's rate
  double total_gbs;   // median over repeats of the sum of the active blocks' rates
};

template <bool kTma, int kLoads>
StreamFigure TimeStream(const Placement& pl, const Source& src, int repeats, uint8_t* buf,
                        size_t buf_bytes, uint64_t* d_ns, uint32_t* sink, cudaStream_t stream) {
  const int active = (pl.grid + pl.active_every - 1) / pl.active_every;
  StreamArgs a;
  a.region = src.region;
  a.passes = src.passes;
  a.block_stride = src.region;
  a.active_every = pl.active_every;
  a.ns = d_ns;
  a.sink = sink;
  const uint64_t span = uint64_t{static_cast<uint64_t>(active)} * src.region;
  std::vector<double> per_sm, total;
  std::vector<uint64_t> ns(pl.grid);
  uint64_t offset = 0;
  for (int r = -1; r < repeats; ++r) {  // r = -1: warm-up (and fills L2 for the resident source)
    if (src.fresh) {
      offset = (offset + span) % (buf_bytes - span);
      offset -= offset % 4096;
    }
    a.src = buf + offset;
    BENCH_CHECK((LaunchStream<kTma, kLoads>(pl, a, stream)));
    BENCH_CHECK(cudaStreamSynchronize(stream));
    if (r < 0) continue;
    BENCH_CHECK(cudaMemcpy(ns.data(), d_ns, pl.grid * sizeof(uint64_t), cudaMemcpyDeviceToHost));
    std::vector<double> rates;
    for (int b = 0; b < pl.grid; b += pl.active_every) {
      rates.push_back(static_cast<double>(src.region * src.passes) / static_cast<double>(ns[b]));
    }
    per_sm.push_back(tools::Median(rates));
    double sum = 0.0;
    for (double x : rates) sum += x;
    total.push_back(sum);
  }
  return {tools::Median(per_sm), tools::Median(total)};
}

int Main(int argc, char** argv) {
  int repeats = 7, device = 0;
  std::string only;  // "stream-l2", "stream-dram", "latency" or all
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 < argc && arg == "--repeats") {
      if (!tools::ParseIntFlag("--repeats", argv[++i], 1, 1000, &repeats)) return 2;
    } else if (i + 1 < argc && arg == "--only") {
      only = argv[++i];
      if (only != "stream-l2" && only != "stream-dram" && only != "matrix" && only != "latency") {
        std::fprintf(stderr, "--only must be stream-l2, stream-dram, matrix or latency (got "
                     "'%s')\n", only.c_str());
        return 2;
      }
    } else if (i + 1 < argc && arg == "--device") {
      if (!tools::ParseIntFlag("--device", argv[++i], 0, 1023, &device)) return 2;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--repeats 7] [--device 0] "
                   "[--only stream-l2|stream-dram|matrix|latency]\n",
                   argv[0]);
      return 2;
    }
  }
  BENCH_CHECK(cudaSetDevice(device));
  cudaDeviceProp prop;
  BENCH_CHECK(cudaGetDeviceProperties(&prop, device));
  const int sms = prop.multiProcessorCount;
  std::printf("device: %s, %d SMs, L2 %d MiB; median of %d launches\n", prop.name, sms,
              prop.l2CacheSize >> 20, repeats);
  std::printf("floor: fair share of DRAM per SM = copy bandwidth / %d (~32 GB/s on an H200)\n",
              sms);
  for (const auto kernel : {StreamKernel<true, 4>, StreamKernel<false, 4>,
                            StreamKernel<false, 8>}) {
    BENCH_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(kSmem)));
    BENCH_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  }
  BENCH_CHECK(cudaFuncSetAttribute(ClusterBarrierKernel,
                                   cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  const size_t buf_bytes = size_t{4} << 30;
  uint8_t* buf = nullptr;
  BENCH_CHECK(cudaMalloc(&buf, buf_bytes));
  BENCH_CHECK(cudaMemset(buf, 0x5b, buf_bytes));  // not zeros
  uint64_t* d_ns = nullptr;
  uint32_t* sink = nullptr;
  BENCH_CHECK(cudaMalloc(&d_ns, sms * 8 * sizeof(uint64_t)));
  BENCH_CHECK(cudaMalloc(&sink, sms * 8 * sizeof(uint32_t)));
  cudaStream_t stream;
  BENCH_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  const Placement placements[] = {{"1 block", 1, 1, false},
                                  {"16, one cluster", kClusterBlocks, 1, true},
                                  {"16 spread", 8 * kClusterBlocks, 8, false},
                                  {"every SM", sms, 1, false}};
  const Source sources[] = {{"L2 (256 KiB x 32)", 256 * 1024, 32, false},
                            {"DRAM (8 MiB fresh)", 8u << 20, 1, true}};
  std::printf("%-18s %-20s %8s %12s %12s\n", "placement", "source", "method", "GB/s per SM",
              "GB/s total");
  for (const Source& src : sources) {
    const bool l2 = !src.fresh;
    if (!only.empty() && only != (l2 ? "stream-l2" : "stream-dram")) continue;
    for (const Placement& pl : placements) {
      for (const int method : {0, 4, 8}) {  // 0: TMA; else plain loads in flight per thread
        const StreamFigure f =
            method == 0 ? TimeStream<true, 4>(pl, src, repeats, buf, buf_bytes, d_ns, sink, stream)
            : method == 4
                ? TimeStream<false, 4>(pl, src, repeats, buf, buf_bytes, d_ns, sink, stream)
                : TimeStream<false, 8>(pl, src, repeats, buf, buf_bytes, d_ns, sink, stream);
        std::printf("%-18s %-20s %8s %12.1f %12.1f\n", pl.name, src.name,
                    method == 0 ? "tma" : method == 4 ? "loads x4" : "loads x8", f.per_sm_gbs,
                    f.total_gbs);
      }
    }
  }

  if (only.empty() || only == "matrix") {
    // Llama-3-8B's LM head shape (k 4096, ~128 K rows: 1 GiB), one block per SM.
    constexpr int kRows = 131072, kK = 4096;
    std::printf("matrix [%d x %d] bf16 by 2D TMA boxes, every SM, DRAM: 64 x 64 rows %.0f GB/s, "
                "64 x 128 rows %.0f GB/s, 64 x 256 rows %.0f GB/s (contiguous 16 KiB copies: "
                "the 'every SM, DRAM, tma' row above)\n",
                kRows, kK, TimeMatrix<64>(buf, kRows, kK, sms, repeats, sink, stream),
                TimeMatrix<128>(buf, kRows, kK, sms, repeats, sink, stream),
                TimeMatrix<256>(buf, kRows, kK, sms, repeats, sink, stream));
  }
  if (!only.empty() && only != "latency") return 0;
  constexpr int kRounds = 4096;
  std::vector<double> barrier_ns, hand_off_ns, sixteen_ns, all_sms_ns;
  uint32_t *flags = nullptr, *words = nullptr;
  BENCH_CHECK(cudaMalloc(&flags, 2 * 128));
  BENCH_CHECK(cudaMalloc(&words, sms * 128));
  // One block per SM: two blocks of ~192 KiB shared memory cannot share one.
  BENCH_CHECK(cudaFuncSetAttribute(PingPongKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   static_cast<int>(kSmem)));
  BENCH_CHECK(cudaFuncSetAttribute(AllToAllKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   static_cast<int>(kSmem)));
  for (int r = 0; r < repeats; ++r) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(kClusterBlocks);
    cfg.blockDim = dim3(256);
    cfg.stream = stream;
    cudaLaunchAttribute attr;
    AsCluster(&cfg, &attr);
    BENCH_CHECK(cudaLaunchKernelEx(&cfg, ClusterBarrierKernel, kRounds, d_ns));
    BENCH_CHECK(cudaStreamSynchronize(stream));
    uint64_t ns = 0;
    BENCH_CHECK(cudaMemcpy(&ns, d_ns, sizeof(ns), cudaMemcpyDeviceToHost));
    barrier_ns.push_back(static_cast<double>(ns) / kRounds);

    BENCH_CHECK(cudaMemsetAsync(flags, 0, 2 * 128, stream));
    PingPongKernel<<<2, 32, kSmem, stream>>>(kRounds, flags, flags + 32, d_ns);
    BENCH_CHECK(cudaGetLastError());
    BENCH_CHECK(cudaStreamSynchronize(stream));
    BENCH_CHECK(cudaMemcpy(&ns, d_ns, sizeof(ns), cudaMemcpyDeviceToHost));
    hand_off_ns.push_back(static_cast<double>(ns) / (2.0 * kRounds));
    for (const int blocks : {kClusterBlocks, sms}) {
      BENCH_CHECK(cudaMemsetAsync(words, 0, sms * 128, stream));
      AllToAllKernel<<<blocks, 256, kSmem, stream>>>(kRounds, words, d_ns);
      BENCH_CHECK(cudaGetLastError());
      BENCH_CHECK(cudaStreamSynchronize(stream));
      BENCH_CHECK(cudaMemcpy(&ns, d_ns, sizeof(ns), cudaMemcpyDeviceToHost));
      (blocks == sms ? all_sms_ns : sixteen_ns).push_back(static_cast<double>(ns) / kRounds);
    }
  }
  std::printf("cluster barrier (16 blocks, arrive + wait): %.0f ns\n", tools::Median(barrier_ns));
  std::printf("flag hand-off between two SMs through L2 (one way): %.0f ns\n",
              tools::Median(hand_off_ns));
  BENCH_CHECK(cudaStreamDestroy(stream));
  std::printf("all-to-all flag exchange, 16 SMs: %.0f ns; every SM: %.0f ns\n",
              tools::Median(sixteen_ns), tools::Median(all_sms_ns));
  BENCH_CHECK(cudaFree(flags));
  BENCH_CHECK(cudaFree(words));
  BENCH_CHECK(cudaFree(buf));
  BENCH_CHECK(cudaFree(d_ns));
  BENCH_CHECK(cudaFree(sink));
  return 0;
}

}  // namespace
}  // namespace rtgen

int main(int argc, char** argv) { return rtgen::Main(argc, argv); }
