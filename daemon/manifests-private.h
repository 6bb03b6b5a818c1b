/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/* What manifests.c and manifests-check.c share: object names and small predicates. */
#include <stdbool.h>
#include <stddef.h>

#include "kube-expose.h"
#include "manifests.h"
#include "util.h"

/* The session's own objects beyond the agent's (struct up_session_extras). */
#define GIT_SECRET "git-config"
#define GIT_KEY "agent-uplink.inc"
#define GIT_INCLUDE "/etc/gitconfig.d/agent-uplink.inc" /* agents/claude/gitconfig includes it */
#define UPSTREAM_CA_SECRET "upstream-ca"
#define UPSTREAM_CA_DIR "/upstream-ca"
#define MOUNT_PREFIX "mount-"
#define SSH_SOCK_VOLUME "ssh-sock" /* the relay's socket, shared with the main container */
#define SSH_SOCK_DIR "/ssh-agent"  /* manifests/ssh-agent-relay.yaml */
#define SSH_AUTH_SOCK SSH_SOCK_DIR "/agent.sock"
/* --aws-profiles: the agent's dummy keys (a ConfigMap: they hold no secret, so --dry-run and
 * kubectl show them), and the mitm's real ones (a Secret mounted whole, so that Kubernetes
 * updates the file when a refresh patches it). */
#define AWS_AGENT_CONFIGMAP "agent-aws-creds"
#define AWS_AGENT_KEY "credentials"
#define AWS_MITM_SECRET UP_MANIFEST_AWS_SECRET
#define AWS_MITM_KEY UP_MANIFEST_AWS_KEY
#define AWS_MITM_DIR "/aws-creds"

int manifests_failf(char *err, size_t len, const char *fmt, ...) _printf_(3, 4);
bool manifests_is_ip(const char *s);
/* Refuses a spec that does not hold up, with a sentence naming the field (manifests-check.c). */
int manifests_check_spec(const struct up_session_spec *s, char *err, size_t len) _wur_;

static inline bool manifests_has_kube(const struct up_session_extras *x)
{
	return x && x->kube && x->kube->n > 0;
}

static inline bool manifests_has_kube_certs(const struct up_session_extras *x)
{
	for (size_t i = 0; manifests_has_kube(x) && i < x->kube->n; i++)
		if (x->kube->ctx[i].client_pem)
			return true;
	return false;
}

static inline bool manifests_has_ssh(const struct up_session_spec *s)
{
	return s->extras && s->extras->ssh.n_keys > 0;
}
