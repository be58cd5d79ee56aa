// malloc for blocks of any size up to the 4 GB heap (-sMAXIMUM_MEMORY=4GB, wasm/CMakeLists.txt).
//
// Emscripten 3.1.6's malloc (dlmalloc) grows the heap with one sbrk call per request and refuses
// calls of 2 GB or more (HALF_MAX_SIZE_T, "avoid wrapping negative"): malloc(2.1 GB) returns 0
// with 2 GB still free, and the failure switches dlmalloc to its non-contiguous mode for good.
// Its heap top is never given back (MORECORE_CANNOT_TRIM), so a big block is built in steps:
// take blocks of at most 1 GB from the top until they add up to the request, free them (each
// merges back into the top chunk, newest first) and malloc once more, now served from that top
// with no sbrk at all (which works in either mode).
#pragma once

#include <cstddef>
#include <cstdlib>

namespace qkv::wasm {

inline void* heap_alloc(size_t bytes) {
  constexpr size_t kStep = size_t(1) << 30;  // 1 GB: well under dlmalloc's 2 GB per sbrk
  if (bytes <= kStep) return std::malloc(bytes);
  void* steps[5] = {};  // at most 4 GB / 1 GB of them, and a remainder
  int n = 0;
  bool short_of_memory = false;
  for (size_t got = 0; got < bytes + 65536 && n < 5; ++n) {  // 64 KB over: the chunk headers
    const size_t step = bytes + 65536 - got < kStep ? bytes + 65536 - got : kStep;
    if (!(steps[n] = std::malloc(step))) {
      short_of_memory = true;  // the heap cannot grow that far
      break;
    }
    got += step;
  }
  while (n > 0) std::free(steps[--n]);
  return short_of_memory ? nullptr : std::malloc(bytes);
}

}  // namespace qkv::wasm
