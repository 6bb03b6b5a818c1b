/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "kubeconfig.h"
#include "util.h"

/* What an exec credential plugin handed back. Secrets are wiped on free. */
struct up_exec_cred {
	char *token;
	char *cert_pem;
	size_t cert_len;
	char *key_pem;
	size_t key_len;
	int64_t expiry_ms; /* wall clock, ms since the epoch; 0: never expires */
};

struct up_exec_cred *up_exec_cred_free(struct up_exec_cred *c);

/*
 * Parses an ExecCredential as the plugin printed it. Pure; `err` says what is wrong
 * without quoting the document (it holds a secret).
 */
int up_exec_cred_parse(const char *text, size_t len, const char *api_version,
		       struct up_exec_cred **ret, char *err, size_t err_len) _wur_;

/* Parses an RFC 3339 time ("2026-11-29T10:00:00Z", fractions and offsets too) into ms. */
int up_parse_rfc3339(const char *s, int64_t *ms) _wur_;

/*
 * Runs the plugin off the loop (uv_spawn) with KUBERNETES_EXEC_INFO set, its output
 * bounded and a timeout. Exactly one callback: r == 0 and a credential (the callee
 * takes it), or r < 0 and a sentence that names the plugin and says what to do.
 */
typedef void (*up_exec_cred_fn)(int r, const char *error, struct up_exec_cred *cred, void *ud);
int up_kube_exec_run(uv_loop_t *loop, const struct up_kube_context *ctx, up_exec_cred_fn cb,
		     void *ud) _wur_;
