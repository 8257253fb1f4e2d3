// `tessera local`'s preflight checks of a run's options, in the words of its flags, before
// anything starts (the ones that need no data set).
#include "local/preflight.h"

#include <gtest/gtest.h>

namespace tessera::local {
namespace {

LocalOptions Mlp() {
  LocalOptions o;
  o.spec.model = "mlp";
  o.spec.dataset = "d";
  return o;
}

std::string Refusal(const LocalOptions& o) {
  Status s = CheckLocalOptions(o);
  EXPECT_FALSE(s.ok());
  return s.message();
}

TEST(PreflightTest, ATrainerIsABuiltInModelOrACommandNeverBoth) {
  LocalOptions o = Mlp();
  o.spec.command = {"/bin/sh", "-c", "python3 t.py"};
  EXPECT_NE(Refusal(o).find("give either --model NAME"), std::string::npos);
  o.spec.model.clear();
  o.spec.command.clear();
  EXPECT_NE(Refusal(o).find("give either --model NAME"), std::string::npos);
}

TEST(PreflightTest, TlsIsRefusedWithWhy) {
  LocalOptions o = Mlp();
  o.spec.tls_dir = "/etc/t";
  EXPECT_NE(Refusal(o).find("tessera launch"), std::string::npos);
}

TEST(PreflightTest, CountsAreNamedByTheirFlags) {
  LocalOptions o = Mlp();
  o.spec.trainers_max = 2;
  o.spec.trainers_min = 3;
  EXPECT_EQ(Refusal(o), "--min-trainers must be 1..2, not 3");
  o.spec.trainers_min = 2;
  o.spec.masters = 0;
  EXPECT_EQ(Refusal(o), "--standby-masters must be 0..10, not -1");
  o.spec.masters = 1;
  o.spec.lease_ttl = 0;
  EXPECT_EQ(Refusal(o), "--lease-ttl must be 1..3600, not 0");
  o.spec.lease_ttl = 10;
  o.secure_etcd = true;
  o.spec.etcd_endpoints = {"127.0.0.1:2379"};
  EXPECT_NE(Refusal(o).find("--secure-etcd secures the etcd `tessera local` starts"), std::string::npos);
}

}  // namespace
}  // namespace tessera::local
