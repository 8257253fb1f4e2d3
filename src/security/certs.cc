// Job CA and node certificates (see certs.h), with OpenSSL 3.
#include "security/certs.h"

#include <arpa/inet.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cctype>
#include <memory>

namespace tessera::security {
namespace {

template <typename T, void (*Free)(T*)>
struct Deleter {
  void operator()(T* p) const { Free(p); }
};
using PkeyPtr = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY, EVP_PKEY_free>>;
using X509Ptr = std::unique_ptr<X509, Deleter<X509, X509_free>>;
using BioPtr = std::unique_ptr<BIO, Deleter<BIO, BIO_free_all>>;

Status OpenSslError(const std::string& what) {
  char buf[256] = "unknown error";
  if (unsigned long e = ERR_get_error()) ERR_error_string_n(e, buf, sizeof buf);
  ERR_clear_error();
  return Status::Internal(what + ": " + buf);
}

StatusOr<PkeyPtr> NewKey() {
  PkeyPtr key(EVP_EC_gen("P-256"));
  if (!key) return OpenSslError("making an EC P-256 key");
  return key;
}

std::string ToPem(X509* cert) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_X509(bio.get(), cert);
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

std::string ToPem(EVP_PKEY* key) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr);
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

StatusOr<X509Ptr> ParseCert(const std::string& pem, const std::string& what) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  X509Ptr cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (!cert) {
    ERR_clear_error();
    return Status::InvalidArgument(what + " is not a PEM certificate");
  }
  return cert;
}

StatusOr<PkeyPtr> ParseKey(const std::string& pem, const std::string& what) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  PkeyPtr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  if (!key) {
    ERR_clear_error();
    return Status::InvalidArgument(what + " is not a PEM private key");
  }
  return key;
}

// Adds extension `nid` = `value` (OpenSSL's config syntax) to `cert`, issued by `issuer`.
Status AddExtension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (!ext) return OpenSslError("certificate extension " + value);
  X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  return Status::OK();
}

// A certificate for `key` named `cn`, valid `days` from now, with a random serial.
StatusOr<X509Ptr> NewCert(EVP_PKEY* key, const std::string& cn, int days) {
  if (days < 1 || days > 3650) return Status::InvalidArgument("--days must be between 1 and 3650");
  X509Ptr cert(X509_new());
  X509_set_version(cert.get(), 2);
  unsigned char serial[16];
  RAND_bytes(serial, sizeof serial);
  serial[0] &= 0x7f;  // positive
  BIGNUM* bn = BN_bin2bn(serial, sizeof serial, nullptr);
  BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert.get()));
  BN_free(bn);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);  // an hour of clock skew
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 86400L * days);
  X509_set_pubkey(cert.get(), key);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>("Tessera"), -1,
                             -1, 0);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>(cn.c_str()),
                             -1, -1, 0);
  return cert;
}

bool IsIp(const std::string& h) {
  unsigned char buf[16];
  return inet_pton(AF_INET, h.c_str(), buf) == 1 || inet_pton(AF_INET6, h.c_str(), buf) == 1;
}

bool IsDnsName(const std::string& h) {
  if (h.empty() || h.size() > 253) return false;
  for (char c : h) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '*')) return false;
  }
  return true;
}

}  // namespace

std::string JobTlsName(const std::string& job) { return "tessera." + job; }

StatusOr<Pem> MakeJobCa(const std::string& job, int days) {
  TESSERA_ASSIGN_OR_RETURN(PkeyPtr key, NewKey());
  TESSERA_ASSIGN_OR_RETURN(X509Ptr cert, NewCert(key.get(), "Tessera CA of job " + job, days));
  X509_set_issuer_name(cert.get(), X509_get_subject_name(cert.get()));
  TESSERA_RETURN_IF_ERROR(
      AddExtension(cert.get(), cert.get(), NID_basic_constraints, "critical,CA:TRUE,pathlen:0"));
  TESSERA_RETURN_IF_ERROR(
      AddExtension(cert.get(), cert.get(), NID_key_usage, "critical,keyCertSign,cRLSign"));
  TESSERA_RETURN_IF_ERROR(AddExtension(cert.get(), cert.get(), NID_subject_key_identifier, "hash"));
  if (X509_sign(cert.get(), key.get(), EVP_sha256()) <= 0) return OpenSslError("signing the CA");
  return Pem{ToPem(cert.get()), ToPem(key.get())};
}

StatusOr<Pem> MakeNodeCert(const Pem& ca, const std::string& job, const std::string& node,
                           const std::vector<std::string>& hosts, int days) {
  TESSERA_ASSIGN_OR_RETURN(X509Ptr ca_cert, ParseCert(ca.cert, "the CA certificate"));
  TESSERA_ASSIGN_OR_RETURN(PkeyPtr ca_key, ParseKey(ca.key, "the CA key"));
  if (X509_check_private_key(ca_cert.get(), ca_key.get()) != 1) {
    ERR_clear_error();
    return Status::InvalidArgument("the CA key does not belong to the CA certificate");
  }
  std::string san = "DNS:" + JobTlsName(job);
  if (IsDnsName(node) && node != JobTlsName(job)) san += ",DNS:" + node;
  for (const auto& h : hosts) {
    if (IsIp(h)) {
      san += ",IP:" + h;
    } else if (IsDnsName(h)) {
      san += ",DNS:" + h;
    } else {
      return Status::InvalidArgument("'" + h + "' is neither an IP address nor a host name");
    }
  }
  TESSERA_ASSIGN_OR_RETURN(PkeyPtr key, NewKey());
  TESSERA_ASSIGN_OR_RETURN(X509Ptr cert, NewCert(key.get(), node, days));
  X509_set_issuer_name(cert.get(), X509_get_subject_name(ca_cert.get()));
  TESSERA_RETURN_IF_ERROR(
      AddExtension(cert.get(), ca_cert.get(), NID_basic_constraints, "critical,CA:FALSE"));
  TESSERA_RETURN_IF_ERROR(
      AddExtension(cert.get(), ca_cert.get(), NID_key_usage, "critical,digitalSignature,keyEncipherment"));
  TESSERA_RETURN_IF_ERROR(
      AddExtension(cert.get(), ca_cert.get(), NID_ext_key_usage, "serverAuth,clientAuth"));
  TESSERA_RETURN_IF_ERROR(AddExtension(cert.get(), ca_cert.get(), NID_subject_alt_name, san));
  TESSERA_RETURN_IF_ERROR(
      AddExtension(cert.get(), ca_cert.get(), NID_authority_key_identifier, "keyid:always"));
  if (X509_sign(cert.get(), ca_key.get(), EVP_sha256()) <= 0) return OpenSslError("signing " + node);
  return Pem{ToPem(cert.get()), ToPem(key.get())};
}

StatusOr<std::vector<std::string>> CertNames(const std::string& cert_pem) {
  TESSERA_ASSIGN_OR_RETURN(X509Ptr cert, ParseCert(cert_pem, "the certificate"));
  std::vector<std::string> out;
  auto* names =
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert.get(), NID_subject_alt_name, nullptr, nullptr));
  if (!names) return out;
  for (int i = 0; i < sk_GENERAL_NAME_num(names); ++i) {
    const GENERAL_NAME* g = sk_GENERAL_NAME_value(names, i);
    if (g->type == GEN_DNS) {
      out.push_back("DNS:" + std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(g->d.dNSName)),
                                         static_cast<size_t>(ASN1_STRING_length(g->d.dNSName))));
    } else if (g->type == GEN_IPADD) {
      char text[64] = "";
      const int len = ASN1_STRING_length(g->d.iPAddress);
      inet_ntop(len == 4 ? AF_INET : AF_INET6, ASN1_STRING_get0_data(g->d.iPAddress), text, sizeof text);
      out.push_back(std::string("IP:") + text);
    }
  }
  GENERAL_NAMES_free(names);
  return out;
}

StatusOr<bool> SignedBy(const std::string& cert_pem, const std::string& ca_pem) {
  TESSERA_ASSIGN_OR_RETURN(X509Ptr cert, ParseCert(cert_pem, "the certificate"));
  TESSERA_ASSIGN_OR_RETURN(X509Ptr ca, ParseCert(ca_pem, "the CA certificate"));
  PkeyPtr ca_key(X509_get_pubkey(ca.get()));
  const bool ok = ca_key && X509_verify(cert.get(), ca_key.get()) == 1;
  ERR_clear_error();
  return ok;
}

StatusOr<bool> KeyMatches(const std::string& cert_pem, const std::string& key_pem) {
  TESSERA_ASSIGN_OR_RETURN(X509Ptr cert, ParseCert(cert_pem, "the certificate"));
  TESSERA_ASSIGN_OR_RETURN(PkeyPtr key, ParseKey(key_pem, "the key"));
  const bool ok = X509_check_private_key(cert.get(), key.get()) == 1;
  ERR_clear_error();
  return ok;
}

}  // namespace tessera::security
