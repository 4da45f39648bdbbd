#pragma once
// SplitMix64 (Steele, Lea and Flood 2014): one step of its generator, the state advanced by the
// golden-ratio increment and mixed. Every host-side hash and counter-based draw uses this one
// function: the CPU sampler's draws (engine/sampling/sampler.cc), the prefix cache's block
// hashes, the test backends' and the engine bench's seeded tokens. CUDA code takes no engine
// headers: the device sampler has its own copy (kernels/sampling.cu, whose draws the GPU tests
// hold equal to the CPU sampler's), and so has the device's random fill (random_fill.cu).

#include <cstdint>

namespace rtgen {

constexpr uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace rtgen
