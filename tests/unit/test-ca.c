/* SPDX-License-Identifier: Apache-2.0 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <openssl/bio.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "bounds.h"
#include "ca.h"

#define NOW ((time_t)1795000000) /* 2026-11-17 */
#define DAY 86400

static struct up_ca *mint(const char *id, time_t expires)
{
	struct up_ca *ca = NULL;
	char err[256] = "";

	if (up_ca_new(id, NOW, expires, &ca, err, sizeof(err)) < 0)
		fail_msg("up_ca_new: %s", err);
	return ca;
}

static X509 *cert_of(const struct up_ca *ca)
{
	BIO *b = BIO_new_mem_buf(ca->cert_pem, (int)ca->cert_len);
	X509 *x = PEM_read_bio_X509(b, NULL, NULL, NULL);

	BIO_free(b);
	assert_non_null(x);
	return x;
}

static EVP_PKEY *key_of(const struct up_ca *ca)
{
	BIO *b = BIO_new_mem_buf(ca->key_pem, (int)ca->key_len);
	EVP_PKEY *k = PEM_read_bio_PrivateKey(b, NULL, NULL, NULL);

	BIO_free(b);
	assert_non_null(k);
	return k;
}

static time_t asn1_time(const ASN1_TIME *t)
{
	struct tm tm;

	assert_int_equal(ASN1_TIME_to_tm(t, &tm), 1);
	return timegm(&tm);
}

static void test_extensions(void **state)
{
	struct up_ca *ca = mint("0123456789ab", NOW + DAY);
	X509 *x = cert_of(ca);
	int crit = -1;

	/* basicConstraints CA:TRUE, critical */
	BASIC_CONSTRAINTS *bc = X509_get_ext_d2i(x, NID_basic_constraints, &crit, NULL);
	assert_non_null(bc);
	assert_true(bc->ca);
	assert_int_equal(crit, 1);
	BASIC_CONSTRAINTS_free(bc);
	/* keyUsage exactly keyCertSign + cRLSign, critical */
	ASN1_BIT_STRING *ku = X509_get_ext_d2i(x, NID_key_usage, &crit, NULL);
	assert_non_null(ku);
	assert_int_equal(crit, 1);
	ASN1_BIT_STRING_free(ku);
	assert_int_equal(X509_get_key_usage(x), KU_KEY_CERT_SIGN | KU_CRL_SIGN);
	assert_true(X509_check_ca(x) >= 1);
	/* subjectKeyIdentifier present, not critical */
	ASN1_OCTET_STRING *ski = X509_get_ext_d2i(x, NID_subject_key_identifier, &crit, NULL);
	assert_non_null(ski);
	assert_int_equal(crit, 0);
	assert_true(ASN1_STRING_length(ski) > 0);
	ASN1_OCTET_STRING_free(ski);
	assert_int_equal(X509_get_version(x), X509_VERSION_3);
	X509_free(x);
	up_ca_free(ca);
}

static void test_subject_names_the_session(void **state)
{
	struct up_ca *ca = mint("deadbeef0042", NOW + DAY);
	X509 *x = cert_of(ca);
	char cn[128] = "";

	assert_true(X509_NAME_get_text_by_NID(X509_get_subject_name(x), NID_commonName, cn,
					      sizeof(cn)) > 0);
	assert_string_equal(cn, "uplink session deadbeef0042");
	assert_int_equal(X509_NAME_cmp(X509_get_subject_name(x), X509_get_issuer_name(x)), 0);
	X509_free(x);
	up_ca_free(ca);
}

static void test_validity(void **state)
{
	time_t expires = NOW + 7 * DAY;
	struct up_ca *ca = mint("0123456789ab", expires);
	X509 *x = cert_of(ca);

	assert_int_equal(asn1_time(X509_get0_notBefore(x)), NOW - UP_CA_BACKDATE_S);
	assert_int_equal(asn1_time(X509_get0_notAfter(x)), expires + UP_CA_EXPIRY_MARGIN_S);
	assert_int_equal(ca->not_before, NOW - UP_CA_BACKDATE_S);
	assert_int_equal(ca->not_after, expires + UP_CA_EXPIRY_MARGIN_S);
	X509_free(x);
	up_ca_free(ca);
}

static void test_key_is_p256_and_signs_the_cert(void **state)
{
	struct up_ca *ca = mint("0123456789ab", NOW + DAY);
	X509 *x = cert_of(ca);
	EVP_PKEY *k = key_of(ca);
	char group[32] = "";

	assert_true(EVP_PKEY_is_a(k, "EC"));
	assert_int_equal(EVP_PKEY_get_utf8_string_param(k, OSSL_PKEY_PARAM_GROUP_NAME, group,
							sizeof(group), NULL),
			 1);
	assert_string_equal(group, "prime256v1");
	assert_int_equal(X509_check_private_key(x, k), 1);
	assert_int_equal(X509_verify(x, k), 1); /* self-signed with this key */
	assert_non_null(strstr(ca->key_pem, "-----BEGIN PRIVATE KEY-----"));
	assert_null(strstr(ca->cert_pem, "PRIVATE KEY"));
	EVP_PKEY_free(k);
	X509_free(x);
	up_ca_free(ca);
}

/* The CA is a trust anchor for a chain check at a time inside its validity. */
static void test_verifies_as_root(void **state)
{
	struct up_ca *ca = mint("0123456789ab", NOW + DAY);
	X509 *x = cert_of(ca);
	X509_STORE *st = X509_STORE_new();
	X509_STORE_CTX *ctx = X509_STORE_CTX_new();

	assert_int_equal(X509_STORE_add_cert(st, x), 1);
	assert_int_equal(X509_STORE_CTX_init(ctx, st, x, NULL), 1);
	X509_STORE_CTX_set_time(ctx, 0, NOW);
	assert_int_equal(X509_verify_cert(ctx), 1);
	X509_STORE_CTX_cleanup(ctx);
	/* past expiry + margin */
	assert_int_equal(X509_STORE_CTX_init(ctx, st, x, NULL), 1);
	X509_STORE_CTX_set_time(ctx, 0, NOW + 2 * DAY);
	assert_int_equal(X509_verify_cert(ctx), 0);
	assert_int_equal(X509_STORE_CTX_get_error(ctx), X509_V_ERR_CERT_HAS_EXPIRED);
	X509_STORE_CTX_free(ctx);
	X509_STORE_free(st);
	X509_free(x);
	up_ca_free(ca);
}

static void test_two_sessions_two_keys(void **state)
{
	struct up_ca *a = mint("0123456789ab", NOW + DAY), *b = mint("0123456789ab", NOW + DAY);
	EVP_PKEY *ka = key_of(a), *kb = key_of(b);
	X509 *xa = cert_of(a), *xb = cert_of(b);

	assert_int_not_equal(EVP_PKEY_eq(ka, kb), 1);
	assert_string_not_equal(a->key_pem, b->key_pem);
	assert_int_not_equal(
		ASN1_INTEGER_cmp(X509_get0_serialNumber(xa), X509_get0_serialNumber(xb)), 0);
	assert_int_equal(ASN1_STRING_type(X509_get0_serialNumber(xa)), V_ASN1_INTEGER); /* > 0 */
	X509_free(xa);
	X509_free(xb);
	EVP_PKEY_free(ka);
	EVP_PKEY_free(kb);
	up_ca_free(a);
	up_ca_free(b);
}

static void refused(const char *id, time_t expires, const char *want)
{
	struct up_ca *ca = NULL;
	char err[256] = "";

	assert_int_equal(up_ca_new(id, NOW, expires, &ca, err, sizeof(err)), -EINVAL);
	assert_null(ca);
	assert_non_null(strstr(err, want));
}

static void test_bad_input_refused(void **state)
{
	refused("0123456789AB", NOW + DAY, "not 12 lowercase hex digits");
	refused("0123456789a", NOW + DAY, "'0123456789a' is not 12 lowercase hex digits");
	refused("0123456789abc", NOW + DAY, "not 12 lowercase hex digits");
	refused("01234567/9ab", NOW + DAY, "not 12 lowercase hex digits");
	refused(NULL, NOW + DAY, "(null)");
	refused("0123456789ab", NOW, "must be in the future");
	refused("0123456789ab", NOW - DAY, "must be in the future");
	refused("0123456789ab", NOW + UP_CA_MAX_LIFETIME_S + 1, "at most 366 days");
}

static void test_mitmproxy_pem_is_key_then_cert(void **state)
{
	struct up_ca *ca = mint("0123456789ab", NOW + DAY);
	char *pem = NULL;
	size_t len = 0;

	assert_int_equal(up_ca_mitmproxy_pem(ca->cert_pem, ca->key_pem, &pem, &len), 0);
	assert_int_equal(len, ca->key_len + ca->cert_len);
	assert_memory_equal(pem, ca->key_pem, ca->key_len);
	assert_string_equal(pem + ca->key_len, ca->cert_pem);
	free(pem);
	up_ca_free(ca);
}

static void test_dhparam(void **state)
{
	char *pem = NULL;
	size_t len = 0;

	assert_int_equal(up_ca_dhparam_pem(&pem, &len), 0);
	assert_true(startswith(pem, "-----BEGIN DH PARAMETERS-----\n"));
	BIO *b = BIO_new_mem_buf(pem, (int)len);
	EVP_PKEY *p = PEM_read_bio_Parameters(b, NULL);
	assert_non_null(p);
	assert_int_equal(EVP_PKEY_get_bits(p), 2048);
	EVP_PKEY_free(p);
	BIO_free(b);
	free(pem);
}

static void test_free_null(void **state)
{
	assert_null(up_ca_free(NULL));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_extensions),
		cmocka_unit_test(test_subject_names_the_session),
		cmocka_unit_test(test_validity),
		cmocka_unit_test(test_key_is_p256_and_signs_the_cert),
		cmocka_unit_test(test_verifies_as_root),
		cmocka_unit_test(test_two_sessions_two_keys),
		cmocka_unit_test(test_bad_input_refused),
		cmocka_unit_test(test_mitmproxy_pem_is_key_then_cert),
		cmocka_unit_test(test_dhparam),
		cmocka_unit_test(test_free_null),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
