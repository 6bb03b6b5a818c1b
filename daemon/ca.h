/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stddef.h>
#include <time.h>

#include "util.h"

/*
 * A per-session certificate authority for the session's mitm, minted in memory with
 * OpenSSL: an EC P-256 key and a self-signed CA certificate (CN "uplink session <id>",
 * basicConstraints CA:TRUE and keyUsage keyCertSign+cRLSign, both critical, and a
 * subjectKeyIdentifier), valid from UP_CA_BACKDATE_S before now until
 * UP_CA_EXPIRY_MARGIN_S after the session expires. mitmproxy (8.1 and 12) signs its
 * leaf certificates with this key. Nothing is written to disk: the key leaves this
 * struct only for the mitm pod's Secret.
 */
struct up_ca {
	char *cert_pem; /* owned, NUL-terminated: the public certificate */
	size_t cert_len;
	char *key_pem; /* owned, NUL-terminated, PKCS#8 unencrypted; wiped on free */
	size_t key_len;
	time_t not_before, not_after;
};

/* `session_id` is named in the subject; `expires_at` is the session's expiry. */
int up_ca_new(const char *session_id, time_t now, time_t expires_at, struct up_ca **ret, char *err,
	      size_t err_len) _wur_;
struct up_ca *up_ca_free(struct up_ca *ca);
void up_ca_freep(struct up_ca **ca);

/* mitmproxy's confdir file mitmproxy-ca.pem: the key, then the certificate. Wiped with
 * up_free_secret(). */
int up_ca_mitmproxy_pem(const char *cert_pem, const char *key_pem, char **ret, size_t *len) _wur_;

/*
 * mitmproxy-dhparam.pem: the RFC 7919 ffdhe2048 group as PKCS#3 "DH PARAMETERS". mitmproxy
 * writes this file into its confdir when it is missing, which a read-only Secret mount
 * does not allow, so the daemon ships it. Caller frees.
 */
int up_ca_dhparam_pem(char **ret, size_t *len) _wur_;
