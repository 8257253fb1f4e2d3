// `tessera certs`: a job's CA and its nodes' certificates for mutual TLS (security/certs.h),
// written to a directory: ca.pem and ca.key once (or a CA given with --ca-cert/--ca-key), then
// NODE.pem and NODE.key per --node. Keys are written mode 0600; nothing existing is overwritten.
#include <cstdio>
#include <filesystem>

#include "cli/commands.h"
#include "cli/etcd_flags.h"
#include "common/files.h"
#include "common/strings.h"
#include "security/certs.h"

namespace tessera::cli {
namespace {

struct CertsFlags {
  std::string job;
  std::string out;
  std::vector<std::string> nodes;  // NAME or NAME=HOST,HOST
  std::string ca_cert, ca_key;
  int days = 365;
};

namespace fs = std::filesystem;

Status WriteNew(const std::string& path, const std::string& data, int mode) {
  if (fs::exists(path)) return Status::AlreadyExists(path + " exists; remove it or write elsewhere (--out)");
  return WriteFileAtomic(path, data, mode);
}

StatusOr<security::Pem> ReadCa(const std::string& cert, const std::string& key) {
  security::Pem ca;
  TESSERA_ASSIGN_OR_RETURN(ca.cert, ReadFile(cert));
  TESSERA_ASSIGN_OR_RETURN(ca.key, ReadFile(key));
  return ca;
}

int RunCerts(const CertsFlags& f) {
  if (Status s = ValidateName(f.job, "job"); !s.ok()) return Fail("certs", s);
  std::error_code ec;
  fs::create_directories(f.out, ec);
  if (ec) return Fail("certs", Status::Unavailable("cannot create " + f.out + ": " + ec.message()));
  security::Pem ca;
  const std::string ca_pem = f.out + "/ca.pem", ca_key = f.out + "/ca.key";
  const bool given = !f.ca_cert.empty() || !f.ca_key.empty();
  if (given && (f.ca_cert.empty() || f.ca_key.empty())) {
    return Fail("certs", Status::InvalidArgument("--ca-cert and --ca-key go together"));
  }
  if (given || (fs::exists(ca_pem) && fs::exists(ca_key))) {
    auto read = ReadCa(given ? f.ca_cert : ca_pem, given ? f.ca_key : ca_key);
    if (!read.ok()) return Fail("certs", read.status());
    ca = *read;
    if (given && !fs::exists(ca_pem)) {
      if (Status s = WriteFileAtomic(ca_pem, ca.cert, 0644); !s.ok()) return Fail("certs", s);
    }
    if (!given) std::printf("using the CA in %s\n", ca_pem.c_str());
  } else {
    auto made = security::MakeJobCa(f.job, f.days);
    if (!made.ok()) return Fail("certs", made.status());
    ca = *made;
    if (Status s = WriteNew(ca_key, ca.key, 0600); !s.ok()) return Fail("certs", s);
    if (Status s = WriteNew(ca_pem, ca.cert, 0644); !s.ok()) return Fail("certs", s);
    std::printf("wrote job %s's CA: %s (give it to every node) and %s (keep it: it signs the nodes)\n",
                f.job.c_str(), ca_pem.c_str(), ca_key.c_str());
  }
  for (const auto& spec : f.nodes) {
    const size_t eq = spec.find('=');
    const std::string name = spec.substr(0, eq);
    if (Status s = ValidateName(name, "node"); !s.ok()) return Fail("certs", s);
    std::vector<std::string> hosts;
    if (eq != std::string::npos) hosts = Split(spec.substr(eq + 1), ',');
    auto node = security::MakeNodeCert(ca, f.job, name, hosts, f.days);
    if (!node.ok()) return Fail("certs", node.status().WithContext("--node " + spec));
    const std::string pem = f.out + "/" + name + ".pem", key = f.out + "/" + name + ".key";
    if (Status s = WriteNew(key, node->key, 0600); !s.ok()) return Fail("certs", s);
    if (Status s = WriteNew(pem, node->cert, 0644); !s.ok()) return Fail("certs", s);
    std::printf("wrote %s and %s: %s%s%s\n", pem.c_str(), key.c_str(), security::JobTlsName(f.job).c_str(),
                hosts.empty() ? "" : ", ", Join(hosts, ", ").c_str());
  }
  return 0;
}

}  // namespace

void RegisterCerts(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<CertsFlags>();
  auto* cmd = app.add_subcommand(
      "certs",
      "Make a job's certificate authority and its nodes' certificates for mutual TLS, in a directory:\n"
      "ca.pem and ca.key (made once, or the CA given with --ca-cert/--ca-key), then NODE.pem and\n"
      "NODE.key for each --node. Every certificate names the job (DNS tessera.JOB) and is good for\n"
      "both ends of a connection. Keys are written mode 0600; nothing existing is overwritten.");
  cmd->add_option("--job", f->job, "the job the certificates are for")->required()->envname("TESSERA_JOB");
  cmd->add_option("--out", f->out, "directory to write to")->required();
  cmd->add_option(
      "--node", f->nodes,
      "a node's certificate: NAME, or NAME=HOST,HOST with the addresses and names it is reached at "
      "(repeat for each node)");
  cmd->add_option("--ca-cert", f->ca_cert, "sign with this CA certificate (PEM) instead of making one");
  cmd->add_option("--ca-key", f->ca_key, "the given CA's private key (PEM)");
  cmd->add_option("--days", f->days, "validity in days")->capture_default_str();
  cmd->callback([f, exit_code] { *exit_code = RunCerts(*f); });
}

}  // namespace tessera::cli
