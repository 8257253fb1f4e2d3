// ScopedFlushDenormals: while alive, this thread's float arithmetic treats denormal inputs as
// zero and flushes denormal results to zero (x86 MXCSR DAZ and FTZ; nothing on other machines),
// and it restores the mode it found when it goes. Nested scopes cost one read of the register.
//
// Why: an optimizer's state decays geometrically where a parameter's gradient stays zero (Adam's
// first moment by 0.9 a step), through the denormal range, where every operation takes a slow
// microcode path. The built-in mlp's Adam update on the pserver took 0.6-0.7 ms a step after
// about 1,400 steps of Fashion-MNIST instead of 0.3 (bench/README.md). Values below 1.2e-38 are
// zero for training; TensorFlow's CPU kernels and oneDNN flush them the same way.
#pragma once

#if defined(__SSE__) || defined(__x86_64__)
#include <xmmintrin.h>
#define TESSERA_HAS_MXCSR 1
#endif

namespace tessera {

class ScopedFlushDenormals {
 public:
#ifdef TESSERA_HAS_MXCSR
  ScopedFlushDenormals() : saved_(_mm_getcsr()) {
    if ((saved_ & kFlushBits) != kFlushBits) _mm_setcsr(saved_ | kFlushBits);
  }
  ~ScopedFlushDenormals() {
    if ((saved_ & kFlushBits) != kFlushBits) _mm_setcsr(saved_);
  }
#else
  ScopedFlushDenormals() = default;
#endif
  ScopedFlushDenormals(const ScopedFlushDenormals&) = delete;
  ScopedFlushDenormals& operator=(const ScopedFlushDenormals&) = delete;

  // Whether this thread flushes denormals now (for tests).
  static bool active() {
#ifdef TESSERA_HAS_MXCSR
    return (_mm_getcsr() & kFlushBits) == kFlushBits;
#else
    return false;
#endif
  }

 private:
#ifdef TESSERA_HAS_MXCSR
  static constexpr unsigned kFlushBits = 0x8040;  // FTZ (bit 15) | DAZ (bit 6)
  unsigned saved_;
#endif
};

}  // namespace tessera
