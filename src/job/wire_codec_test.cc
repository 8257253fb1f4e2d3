// Tests of the wire formats' parsing and codecs: every half-precision value, rounding at every
// midpoint, and the push encoders' error feedback (nothing lost over steps).
#include "job/wire_codec.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "job/wire_format.h"

namespace tessera {
namespace {

TEST(WireFormatTest, ParsesEveryFormatAndSaysWhatIsAccepted) {
  for (const char* text : {"f32", "bf16", "f16", "sign", "topk:0.01", "topk:1"}) {
    auto w = WireFormat::Parse(text);
    ASSERT_TRUE(w.ok()) << text << ": " << w.status();
    EXPECT_EQ(w->ToString(), text);
  }
  EXPECT_EQ(WireFormat::Parse("bfloat16")->kind, WireFormat::Kind::kBf16);
  EXPECT_DOUBLE_EQ(WireFormat::Parse("topk:0.25")->ratio, 0.25);
  EXPECT_EQ(WireFormat::Parse("topk:0.01")->dense_push_coding(), wire::TOP_K);
  EXPECT_EQ(WireFormat::Parse("f16")->dtype(), wire::FLOAT16);
  EXPECT_TRUE(WireFormat::Parse("sign")->error_feedback());
  EXPECT_FALSE(WireFormat::Parse("bf16")->error_feedback());
  for (const char* bad :
       {"", "fp8", "topk", "topk:", "topk:0", "topk:1.5", "topk:abc", "topk:0.1x", "topk:nan"}) {
    auto w = WireFormat::Parse(bad);
    ASSERT_FALSE(w.ok()) << bad;
    EXPECT_NE(w.status().message().find(bad), std::string::npos) << w.status();
  }
  EXPECT_NE(WireFormat::Parse("fp8").status().message().find("bf16"), std::string::npos);
}

// A format for every parameter and others by name; each mistake names the item.
TEST(WireChoiceTest, ParsesAFormatForAllAndOthersByName) {
  auto c = WireChoice::Parse("bf16,emb=f32,fc1.weight=topk:0.01");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->all.kind, WireFormat::Kind::kBf16);
  EXPECT_EQ(c->For("emb").kind, WireFormat::Kind::kF32);
  EXPECT_DOUBLE_EQ(c->For("fc1.weight").ratio, 0.01);
  EXPECT_EQ(c->For("fc2.weight").kind, WireFormat::Kind::kBf16);
  EXPECT_EQ(c->ToString(), "bf16,emb=f32,fc1.weight=topk:0.01");
  EXPECT_EQ(WireChoice::Parse(c->ToString()).value(), *c);
  EXPECT_TRUE(c->error_feedback());
  EXPECT_FALSE(c->plain());
  EXPECT_NE(c->Describe().find("fc1.weight: topk:0.01"), std::string::npos) << c->Describe();
  // Only names: the rest in float32; one format: as before.
  EXPECT_EQ(WireChoice::Parse("emb=bf16")->all.kind, WireFormat::Kind::kF32);
  EXPECT_FALSE(WireChoice::Parse("emb=bf16")->plain());
  EXPECT_TRUE(WireChoice::Parse("f32,emb=f32")->plain());
  EXPECT_EQ(WireChoice::Parse("sign")->ToString(), "sign");
  EXPECT_FALSE(WireChoice::Parse("bf16,emb=f16")->error_feedback());
  for (const auto& [bad, says] :
       {std::pair<const char*, const char*>{"bf16,f16", "item 2 ('f16') names no parameter"},
        {"bf16,=f32", "no parameter name"},
        {"bf16,emb=fp8", "parameter 'emb': wire format 'fp8'"},
        {"bf16,emb=f32,emb=f16", "'emb' is named twice"},
        {"bf16,", "item 2 ('') names no parameter"},
        {"fp8,emb=f32", "wire format 'fp8'"}}) {
    auto w = WireChoice::Parse(bad);
    ASSERT_FALSE(w.ok()) << bad;
    EXPECT_NE(w.status().message().find(says), std::string::npos) << bad << ": " << w.status();
  }
}

TEST(WireCodecTest, EveryHalfValueComesBackAsItself) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float b = FromBfloat16(static_cast<uint16_t>(h));
    const float f = FromFloat16(static_cast<uint16_t>(h));
    if (std::isnan(b)) {
      EXPECT_TRUE(std::isnan(FromBfloat16(ToBfloat16(b)))) << h;
    } else {
      EXPECT_EQ(ToBfloat16(b), h) << h;
    }
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(FromFloat16(ToFloat16(f)))) << h;
    } else {
      EXPECT_EQ(ToFloat16(f), h) << h;
    }
  }
  EXPECT_EQ(ToFloat16(1.0f), 0x3c00);
  EXPECT_EQ(ToFloat16(-2.0f), 0xc000);
  EXPECT_EQ(ToFloat16(65504.0f), 0x7bff);
  EXPECT_EQ(FromFloat16(0x0001), std::ldexp(1.0f, -24));  // the smallest subnormal
  EXPECT_EQ(ToBfloat16(1.0f), 0x3f80);
}

// Between two neighbouring half values: the midpoint goes to the even one, a float above or
// below it to the nearer one. For every positive finite pair of both types.
TEST(WireCodecTest, RoundsToTheNearestHalfAndTiesToEven) {
  struct Type {
    uint16_t (*to)(float);
    float (*from)(uint16_t);
    uint32_t last;  // the largest finite
  };
  for (const Type& t : {Type{ToBfloat16, FromBfloat16, 0x7f7f}, Type{ToFloat16, FromFloat16, 0x7bff}}) {
    for (uint32_t h = 0; h < t.last; ++h) {
      const float lo = t.from(static_cast<uint16_t>(h)), hi = t.from(static_cast<uint16_t>(h + 1));
      const float mid = static_cast<float>((static_cast<double>(lo) + hi) / 2);
      ASSERT_EQ(t.to(mid), (h % 2 == 0) ? h : h + 1) << h;
      ASSERT_EQ(t.to(std::nextafter(mid, lo)), h) << h;
      ASSERT_EQ(t.to(std::nextafter(mid, hi)), h + 1) << h;
      ASSERT_EQ(t.to(-lo), h | 0x8000) << h;
    }
  }
  EXPECT_EQ(ToFloat16(65519.0f), 0x7bff);
  EXPECT_EQ(ToFloat16(65520.0f), 0x7c00);  // infinity: refused as non-finite where it arrives
  EXPECT_EQ(ToFloat16(1e30f), 0x7c00);
  EXPECT_EQ(ToBfloat16(std::bit_cast<float>(0x7f7fffff)), 0x7f80);
  EXPECT_TRUE(std::isnan(FromFloat16(ToFloat16(NAN))));
  EXPECT_TRUE(std::isnan(FromBfloat16(ToBfloat16(NAN))));
}

// The run conversions (vectorized) give the one-value functions' results: for every half value,
// and for a million floats of random bits (NaNs, infinities, subnormals, overflows among them).
TEST(WireCodecTest, RunsConvertAsOneValueAtATime) {
  std::mt19937 rng(3);
  std::vector<float> floats;
  for (uint32_t h = 0; h < 0x10000; ++h) {
    floats.push_back(FromFloat16(static_cast<uint16_t>(h)));
    floats.push_back(FromBfloat16(static_cast<uint16_t>(h)));
  }
  for (int i = 0; i < 1000000; ++i) floats.push_back(std::bit_cast<float>(static_cast<uint32_t>(rng())));
  std::vector<uint16_t> halves(0x10000);
  for (uint32_t h = 0; h < 0x10000; ++h) halves[h] = static_cast<uint16_t>(h);
  for (wire::DType t : {wire::BFLOAT16, wire::FLOAT16}) {
    const bool bf = t == wire::BFLOAT16;
    std::vector<uint16_t> narrow(floats.size());
    NarrowValues(floats, t, narrow.data());
    for (size_t i = 0; i < floats.size(); ++i) {
      const uint16_t one = bf ? ToBfloat16(floats[i]) : ToFloat16(floats[i]);
      if (std::isnan(floats[i])) {
        ASSERT_TRUE(std::isnan(bf ? FromBfloat16(narrow[i]) : FromFloat16(narrow[i]))) << i;
      } else {
        ASSERT_EQ(narrow[i], one) << "type " << t << " float bits " << std::hex
                                  << std::bit_cast<uint32_t>(floats[i]);
      }
    }
    std::vector<float> wide(halves.size());
    WidenValues(halves.data(), halves.size(), t, wide.data());
    for (uint32_t h = 0; h < 0x10000; ++h) {
      const float one = bf ? FromBfloat16(static_cast<uint16_t>(h)) : FromFloat16(static_cast<uint16_t>(h));
      if (std::isnan(one)) {
        ASSERT_TRUE(std::isnan(wide[h])) << h;
      } else {
        ASSERT_EQ(std::memcmp(&wide[h], &one, sizeof one), 0) << "type " << t << " half " << h;
      }
    }
  }
}

TEST(WireCodecTest, PlainHalfValuesTravelAndComeBackRounded) {
  std::vector<float> v = {0.1f, -3.25f, 1e-3f, 12345.678f};
  for (wire::DType t : {wire::FLOAT32, wire::BFLOAT16, wire::FLOAT16}) {
    wire::Segment s;
    s.set_block(0);
    s.set_dtype(t);
    ASSERT_EQ(*SegmentWireBytes(s, v.size()), v.size() * ValueBytes(t));
    std::string bytes(v.size() * ValueBytes(t), '\0');
    NarrowValues(v, t, bytes.data());
    std::vector<float> back(v.size());
    ASSERT_TRUE(DecodeSegment(s, bytes.data(), v.size(), back.data()).ok());
    const double tolerance = t == wire::FLOAT32 ? 0 : t == wire::BFLOAT16 ? 1.0 / 256 : 1.0 / 2048;
    for (size_t i = 0; i < v.size(); ++i)
      EXPECT_NEAR(back[i], v[i], std::fabs(v[i]) * tolerance) << i << " " << t;
  }
}

std::vector<float> Gradient(std::mt19937& rng, size_t n) {
  std::normal_distribution<float> d(0, 1);
  std::vector<float> g(n);
  for (auto& x : g) x = d(rng);
  return g;
}

// What was sent over the steps plus what is kept equals what was computed: error feedback loses
// nothing. Checked for top-k in float32 and bfloat16 values and for signs.
TEST(WireCodecTest, ErrorFeedbackKeepsEverythingNotSent) {
  const size_t n = 1000;
  for (int format = 0; format < 3; ++format) {
    std::mt19937 rng(7 + format);
    wire::Segment s;
    s.set_block(3);
    s.set_param("w");
    s.set_dtype(format == 1 ? wire::BFLOAT16 : wire::FLOAT32);
    s.set_coding(format == 2 ? wire::SIGNS : wire::TOP_K);
    std::vector<float> residual(n, 0.0f);
    std::vector<double> computed(n, 0.0), sent(n, 0.0);
    for (int step = 0; step < 30; ++step) {
      auto g = Gradient(rng, n);
      for (size_t i = 0; i < n; ++i) computed[i] += g[i];
      std::string bytes;
      if (format == 2) {
        EncodeSigns(g.data(), residual.data(), n, &bytes);
      } else {
        s.set_nonzeros(static_cast<int64_t>(EncodeTopK(g.data(), residual.data(), n, 10, s.dtype(), &bytes)));
        ASSERT_EQ(s.nonzeros(), 10);
      }
      ASSERT_EQ(bytes.size(), *SegmentWireBytes(s, n));
      std::vector<float> decoded(n);
      ASSERT_TRUE(DecodeSegment(s, bytes.data(), n, decoded.data()).ok());
      if (format != 2) {
        EXPECT_EQ(std::count(decoded.begin(), decoded.end(), 0.0f), static_cast<long>(n - 10));
      }
      for (size_t i = 0; i < n; ++i) sent[i] += decoded[i];
    }
    for (size_t i = 0; i < n; ++i)
      ASSERT_NEAR(sent[i] + residual[i], computed[i], 1e-3) << format << " " << i;
  }
}

// The signs' encoder and decoder work 32 elements to a word: every size, and the tails after the
// last full word, give the bits of the definition (bit i % 8 of byte i / 8 set where the residual
// is >= 0, -0.0 included), and the values +-scale from them; the scale is the mean magnitude,
// summed in lanes and runs of 1,024 (every tail counted).
TEST(WireCodecTest, SignsAreTheDefinitionsBitsAtEverySize) {
  std::mt19937 rng(11);
  wire::Segment s;
  s.set_block(0);
  s.set_param("w");
  s.set_coding(wire::SIGNS);
  for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{8}, size_t{31}, size_t{32}, size_t{33}, size_t{63},
                   size_t{64}, size_t{65}, size_t{100}, size_t{1031}, size_t{2048}, size_t{3001}}) {
    auto g = Gradient(rng, n);
    if (n > 3) g[3] = -0.0f;
    std::vector<float> residual(n, 0.0f), expect_residual(n);
    std::string bytes;
    EncodeSigns(g.data(), residual.data(), n, &bytes);
    ASSERT_EQ(bytes.size(), sizeof(float) + (n + 7) / 8) << n;
    float scale;
    std::memcpy(&scale, bytes.data(), sizeof scale);
    double mean = 0;
    for (float x : g) mean += std::fabs(x);
    mean = n == 0 ? 0 : mean / static_cast<double>(n);
    ASSERT_NEAR(scale, mean, 1e-6 * mean) << n;
    const auto* bits = reinterpret_cast<const unsigned char*>(bytes.data() + sizeof scale);
    std::vector<float> decoded(n);
    ASSERT_TRUE(DecodeSegment(s, bytes.data(), n, decoded.data()).ok());
    for (size_t i = 0; i < n; ++i) {
      const bool up = g[i] >= 0;  // the residual was zero: it is the gradient
      ASSERT_EQ((bits[i / 8] >> (i % 8)) & 1u, up ? 1u : 0u) << n << " " << i;
      ASSERT_EQ(decoded[i], up ? scale : -scale) << n << " " << i;
      const float left = g[i] - (up ? scale : -scale);
      ASSERT_EQ(residual[i], left) << n << " " << i;
    }
    for (size_t i = n; i < (n + 7) / 8 * 8; ++i)
      ASSERT_EQ((bits[i / 8] >> (i % 8)) & 1u, 0u) << n << " pad " << i;
  }
}

// A block larger than kExactTopKUpTo: the elements sent are those at or above the sample's
// quantile of residual + gradient (at most k, the largest when more), in ascending order, and
// every residual is what was not sent; the tail after the last 16 elements included.
TEST(WireCodecTest, TopKOfALargeBlockSendsWhatReachesTheSamplesQuantile) {
  std::mt19937 rng(5);
  for (size_t k : {size_t{656}, size_t{5}}) {
    const size_t n = 65536 + 5;
    auto g = Gradient(rng, n);
    std::vector<float> residual = Gradient(rng, n), sum(n);
    for (size_t i = 0; i < n; ++i) sum[i] = residual[i] + g[i];
    std::vector<float> sample(kTopKSample);
    const size_t stride = n / kTopKSample;
    for (size_t j = 0; j < kTopKSample; ++j) sample[j] = std::fabs(sum[j * stride + stride / 2]);
    const size_t above = std::max<size_t>(1, (k * kTopKSample + n - 1) / n);
    std::nth_element(sample.begin(), sample.begin() + static_cast<long>(above - 1), sample.end(),
                     std::greater<float>());
    const float threshold = sample[above - 1];
    std::vector<uint32_t> reach;
    for (size_t i = 0; i < n; ++i)
      if (std::fabs(sum[i]) >= threshold) reach.push_back(static_cast<uint32_t>(i));
    std::string bytes;
    const size_t sent = EncodeTopK(g.data(), residual.data(), n, k, wire::FLOAT32, &bytes);
    ASSERT_EQ(sent, std::min(k, reach.size())) << k;
    std::vector<uint32_t> idx(sent);
    std::memcpy(idx.data(), bytes.data(), sent * sizeof(uint32_t));
    ASSERT_TRUE(std::is_sorted(idx.begin(), idx.end()) &&
                std::adjacent_find(idx.begin(), idx.end()) == idx.end());
    float smallest_sent = INFINITY;
    for (uint32_t i : idx) {
      ASSERT_TRUE(std::binary_search(reach.begin(), reach.end(), i)) << i << " is below the quantile";
      smallest_sent = std::min(smallest_sent, std::fabs(sum[i]));
    }
    for (size_t i = 0; i < n; ++i) {
      const bool was_sent = std::binary_search(idx.begin(), idx.end(), static_cast<uint32_t>(i));
      ASSERT_EQ(residual[i], was_sent ? 0.0f : sum[i]) << i;
      if (!was_sent && std::fabs(sum[i]) >= threshold) {
        ASSERT_LE(std::fabs(sum[i]), smallest_sent) << i;
      }
    }
    if (reach.size() <= k) {
      EXPECT_EQ(idx, reach);
    }
  }
}

TEST(WireCodecTest, TopKSendsTheLargestMagnitudesInOrderOfIndex) {
  std::vector<float> g = {0.1f, -5.0f, 0.2f, 3.0f, -0.3f, 4.0f};
  std::vector<float> residual(g.size(), 0.0f);
  residual[2] = 10.0f;  // kept from before: now the largest
  std::string bytes;
  ASSERT_EQ(EncodeTopK(g.data(), residual.data(), g.size(), 3, wire::FLOAT32, &bytes), 3u);
  uint32_t idx[3];
  float val[3];
  std::memcpy(idx, bytes.data(), sizeof idx);
  std::memcpy(val, bytes.data() + sizeof idx, sizeof val);
  EXPECT_EQ(std::vector<uint32_t>(idx, idx + 3), (std::vector<uint32_t>{1, 2, 5}));
  EXPECT_EQ(std::vector<float>(val, val + 3), (std::vector<float>{-5.0f, 10.2f, 4.0f}));
  EXPECT_EQ(residual, (std::vector<float>{0.1f, 0.0f, 0.0f, 3.0f, -0.3f, 0.0f}));
  EXPECT_EQ(TopKCount(0.01, 65536), 656u);
  EXPECT_EQ(TopKCount(0.01, 5), 1u);
  EXPECT_EQ(TopKCount(1, 5), 5u);
}

TEST(WireCodecTest, AMalformedSegmentIsRefusedNamingIt) {
  wire::Segment s;
  s.set_param("w");
  s.set_block(2);
  s.set_coding(wire::TOP_K);
  s.set_nonzeros(2);
  uint32_t idx[2] = {5, 5};
  float val[2] = {1, 2};
  std::string bytes(reinterpret_cast<char*>(idx), sizeof idx);
  bytes.append(reinterpret_cast<char*>(val), sizeof val);
  std::vector<float> out(10);
  Status st = DecodeSegment(s, bytes.data(), 10, out.data());
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("'w' block 2"), std::string::npos) << st;
  EXPECT_NE(st.message().find("not above"), std::string::npos) << st;
  idx[1] = 10;
  bytes.replace(0, sizeof idx, reinterpret_cast<char*>(idx), sizeof idx);
  st = DecodeSegment(s, bytes.data(), 10, out.data());
  EXPECT_NE(st.message().find("past the block's 10 elements"), std::string::npos) << st;
  s.set_nonzeros(11);
  EXPECT_FALSE(SegmentWireBytes(s, 10).ok());
  s.set_block(-1);
  s.set_nonzeros(1);
  EXPECT_NE(SegmentWireBytes(s, 10).status().message().find("dense blocks only"), std::string::npos);
  s.set_coding(wire::PLAIN);
  s.set_dtype(wire::INT32);
  EXPECT_NE(SegmentWireBytes(s, 10).status().message().find("INT32"), std::string::npos);
  s.set_dtype(static_cast<wire::DType>(77));
  EXPECT_FALSE(SegmentWireBytes(s, 10).ok());
  s.set_dtype(wire::FLOAT32);
  s.set_coding(static_cast<wire::Coding>(9));
  EXPECT_FALSE(SegmentWireBytes(s, 10).ok());
}

}  // namespace
}  // namespace tessera
