// Sparse row initializers (see initializer.h).
#include "pserver/initializer.h"

#include <cmath>

#include "common/hash.h"

namespace tessera {
namespace {

// splitmix64 stream: next() returns the next 64 random bits.
struct Stream {
  uint64_t state;
  uint64_t Next() {
    state += 0x9e3779b97f4a7c15ULL;
    uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1) with 24 bits, exactly representable as float.
  float Unit() { return static_cast<float>(Next() >> 40) * (1.0f / 16777216.0f); }
};

}  // namespace

void InitRow(const InitializerConfig& init, uint64_t table_hash, uint64_t key, float* row, int dim) {
  switch (init.type) {
    case InitializerConfig::Type::kZeros:
      for (int i = 0; i < dim; ++i) row[i] = 0.0f;
      return;
    case InitializerConfig::Type::kUniform: {
      Stream s{HashCombine(HashCombine(init.seed, table_hash), key)};
      for (int i = 0; i < dim; ++i) row[i] = init.a + (init.b - init.a) * s.Unit();
      return;
    }
    case InitializerConfig::Type::kNormal: {
      Stream s{HashCombine(HashCombine(init.seed, table_hash), key)};
      // Box-Muller in double, so results do not depend on float libm details.
      for (int i = 0; i < dim; i += 2) {
        double u1 = (static_cast<double>(s.Next() >> 11) + 1.0) * (1.0 / 9007199254740993.0);
        double u2 = static_cast<double>(s.Next() >> 11) * (1.0 / 9007199254740992.0);
        double r = std::sqrt(-2.0 * std::log(u1));
        double z0 = r * std::cos(2.0 * M_PI * u2);
        double z1 = r * std::sin(2.0 * M_PI * u2);
        row[i] = static_cast<float>(init.a + init.b * z0);
        if (i + 1 < dim) row[i + 1] = static_cast<float>(init.a + init.b * z1);
      }
      return;
    }
  }
}

}  // namespace tessera
