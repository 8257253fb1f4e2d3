// PserverService without a network: a request is refused NOT_SERVING whenever the lease is not
// confirmed alive at that moment, and answered again once it is.
#include "pserver/pserver_service.h"

#include <gtest/gtest.h>

#include <atomic>

#include "tessera/data.pb.h"

namespace tessera {
namespace {

class Capture : public Responder {
 public:
  explicit Capture(wire::DataReply* out) : out_(out) {}
  MutableBuffer Allocate(size_t bytes) override {
    buf_.resize(bytes);
    return {buf_.data(), bytes};
  }
  void Send(std::string_view header, std::span<const ConstBuffer>) override {
    out_->ParseFromArray(header.data(), static_cast<int>(header.size()));
  }

 private:
  wire::DataReply* out_;
  std::string buf_;
};

TEST(PserverServiceTest, RefusesEveryRequestWhileItsLeaseIsNotConfirmedAlive) {
  std::atomic<bool> alive{true};
  PserverServiceOptions o;
  o.index = 0;
  o.epoch = 5;
  o.job.pservers = 1;
  o.job.token = "tok";
  o.slots = SlotMap::RoundRobin(o.job.slots, 1);
  o.lease_alive = [&] { return alive.load(); };
  PserverService service(o);
  auto status = [&] {
    wire::DataRequest req;
    req.set_op(wire::DataRequest::STATUS);
    req.set_job_token("tok");
    std::string h = req.SerializeAsString();
    wire::DataReply reply;
    service.Handle(h, ConstBuffer{nullptr, 0}, std::make_unique<Capture>(&reply));
    return reply;
  };
  EXPECT_EQ(status().code(), 0);
  alive = false;
  auto refused = status();
  EXPECT_NE(refused.code(), 0);
  EXPECT_EQ(refused.reason(), wire::DataReply::NOT_SERVING);
  EXPECT_NE(refused.message().find("lease is not confirmed alive"), std::string::npos) << refused.message();
  alive = true;
  EXPECT_EQ(status().code(), 0);
}

}  // namespace
}  // namespace tessera
