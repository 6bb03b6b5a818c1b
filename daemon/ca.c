/* SPDX-License-Identifier: Apache-2.0 */
/* The per-session mitm CA, minted in memory with OpenSSL 3's EVP API. */
#include <errno.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "bounds.h"
#include "ca.h"
#include "fileio.h"

/* OpenSSL's reason for the last failure, as a sentence ending: "what: reason". */
static int ssl_fail(char *err, size_t len, const char *what)
{
	unsigned long e = ERR_get_error();
	char reason[256] = "unknown error";

	if (e)
		ERR_error_string_n(e, reason, sizeof(reason));
	ERR_clear_error();
	if (err && len)
		(void)snprintf(err, len, "%s: %s", what, reason);
	return -EIO;
}

/* Copies a memory BIO into a NUL-terminated malloc'd buffer. */
static int bio_take(BIO *b, char **ret, size_t *len)
{
	char *data = NULL;
	long n = BIO_get_mem_data(b, &data);

	if (n <= 0 || !data)
		return -EIO;
	char *p = malloc((size_t)n + 1);
	if (!p)
		return -ENOMEM;
	memcpy(p, data, (size_t)n);
	p[n] = '\0';
	*ret = p;
	*len = (size_t)n;
	return 0;
}

static int add_ext(X509 *x, X509V3_CTX *ctx, int nid, const char *value)
{
	X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, ctx, nid, value);
	int ok = ext && X509_add_ext(x, ext, -1) == 1;

	X509_EXTENSION_free(ext);
	return ok ? 0 : -EIO;
}

/* A random positive 127-bit serial number, as RFC 5280 asks (at most 20 octets). */
static int set_serial(X509 *x)
{
	BIGNUM *bn = BN_new();
	int ok = bn && BN_rand(bn, 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) == 1 &&
		 BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) != NULL;

	BN_free(bn);
	return ok ? 0 : -EIO;
}

static int set_name(X509 *x, const char *session_id)
{
	X509_NAME *n = X509_get_subject_name(x);
	char cn[64];

	(void)snprintf(cn, sizeof(cn), "uplink session %s", session_id);
	if (X509_NAME_add_entry_by_txt(n, "O", MBSTRING_UTF8, (const unsigned char *)"uplink", -1,
				       -1, 0) != 1 ||
	    X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_UTF8, (const unsigned char *)cn, -1, -1,
				       0) != 1 ||
	    X509_set_issuer_name(x, n) != 1)
		return -EIO;
	return 0;
}

static int build_cert(X509 *x, EVP_PKEY *key, const struct up_ca *ca, const char *session_id)
{
	X509V3_CTX ctx;

	if (X509_set_version(x, X509_VERSION_3) != 1 || set_serial(x) < 0 ||
	    !ASN1_TIME_set(X509_getm_notBefore(x), ca->not_before) ||
	    !ASN1_TIME_set(X509_getm_notAfter(x), ca->not_after) || set_name(x, session_id) < 0 ||
	    X509_set_pubkey(x, key) != 1)
		return -EIO;
	X509V3_set_ctx(&ctx, x, x, NULL, NULL, 0);
	if (add_ext(x, &ctx, NID_basic_constraints, "critical,CA:TRUE") < 0 ||
	    add_ext(x, &ctx, NID_key_usage, "critical,keyCertSign,cRLSign") < 0 ||
	    add_ext(x, &ctx, NID_subject_key_identifier, "hash") < 0 ||
	    add_ext(x, &ctx, NID_authority_key_identifier, "keyid:always") < 0)
		return -EIO;
	return X509_sign(x, key, EVP_sha256()) > 0 ? 0 : -EIO;
}

static int write_pems(struct up_ca *ca, X509 *x, EVP_PKEY *key)
{
	BIO *cb = BIO_new(BIO_s_mem());
	BIO *kb = BIO_new(BIO_s_secmem()); /* cleared when freed */
	int r = -EIO;

	if (cb && kb && PEM_write_bio_X509(cb, x) == 1 &&
	    PEM_write_bio_PrivateKey(kb, key, NULL, NULL, 0, NULL, NULL) == 1) {
		r = bio_take(cb, &ca->cert_pem, &ca->cert_len);
		if (r == 0)
			r = bio_take(kb, &ca->key_pem, &ca->key_len);
	}
	BIO_free(cb);
	BIO_free(kb);
	return r;
}

static bool valid_id(const char *id)
{
	if (!id || strlen(id) != 12)
		return false;
	for (const char *p = id; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return false;
	return true;
}

int up_ca_new(const char *session_id, time_t now, time_t expires_at, struct up_ca **ret, char *err,
	      size_t err_len)
{
	_cleanup_(up_ca_freep) struct up_ca *ca = NULL;
	EVP_PKEY *key = NULL;
	X509 *x = NULL;
	int r;

	if (!valid_id(session_id))
		return snprintf(err, err_len, "session id '%s' is not 12 lowercase hex digits",
				session_id ? session_id : "(null)"),
		       -EINVAL;
	if (expires_at <= now || expires_at - now > UP_CA_MAX_LIFETIME_S)
		return snprintf(err, err_len,
				"session expiry must be in the future and at most %d days away",
				UP_CA_MAX_LIFETIME_S / 86400),
		       -EINVAL;
	ca = calloc(1, sizeof(*ca));
	if (!ca)
		return -ENOMEM;
	ca->not_before = now - UP_CA_BACKDATE_S;
	ca->not_after = expires_at + UP_CA_EXPIRY_MARGIN_S;
	key = EVP_EC_gen("P-256");
	if (!key)
		return ssl_fail(err, err_len, "cannot generate the session CA key");
	x = X509_new();
	r = x ? build_cert(x, key, ca, session_id) : -ENOMEM;
	if (r < 0)
		r = ssl_fail(err, err_len, "cannot build the session CA certificate");
	else if ((r = write_pems(ca, x, key)) < 0)
		r = ssl_fail(err, err_len, "cannot encode the session CA");
	X509_free(x);
	EVP_PKEY_free(key);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(ca);
	return 0;
}

struct up_ca *up_ca_free(struct up_ca *ca)
{
	if (!ca)
		return NULL;
	free(ca->cert_pem);
	up_free_secret(ca->key_pem, ca->key_len);
	free(ca);
	return NULL;
}

UP_DEFINE_FREEP(struct up_ca, up_ca_free)

int up_ca_mitmproxy_pem(const char *cert_pem, const char *key_pem, char **ret, size_t *len)
{
	size_t kl = strlen(key_pem), cl = strlen(cert_pem);
	char *p = malloc(kl + cl + 1);

	if (!p)
		return -ENOMEM;
	memcpy(p, key_pem, kl);
	memcpy(p + kl, cert_pem, cl + 1);
	*ret = p;
	*len = kl + cl;
	return 0;
}

int up_ca_dhparam_pem(char **ret, size_t *len)
{
	EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, "DH", NULL);
	EVP_PKEY *params = NULL;
	BIO *b = BIO_new(BIO_s_mem());
	int r = -EIO;

	if (ctx && b && EVP_PKEY_paramgen_init(ctx) == 1 &&
	    EVP_PKEY_CTX_set_group_name(ctx, "ffdhe2048") == 1 &&
	    EVP_PKEY_paramgen(ctx, &params) == 1 && PEM_write_bio_Parameters(b, params) == 1)
		r = bio_take(b, ret, len);
	ERR_clear_error();
	BIO_free(b);
	EVP_PKEY_free(params);
	EVP_PKEY_CTX_free(ctx);
	return r;
}
