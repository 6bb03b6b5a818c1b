/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>

/*
 * A local k3s pulls the agent images from localhost:5000 over plain HTTP only when its
 * registries.yaml has a mirror for it. One check, for `uplink doctor` (rpc-doctor.c) and
 * for a session before it builds (image-registry.c), each wording its own message.
 * Reads a file: call it on the threadpool.
 */

#define UP_K3S_REGISTRIES_PATH "/etc/rancher/k3s/registries.yaml"
/* What the file must say; the messages quote it. */
#define UP_K3S_REGISTRIES_YAML \
	"mirrors:\n  \"localhost:5000\":\n    endpoint:\n      - \"http://localhost:5000\"\n"

enum up_k3s_verdict {
	UP_K3S_SKIPPED,	   /* not a local k3s and no $UPLINK_K3S_REGISTRIES: nothing to check */
	UP_K3S_OK,	   /* the mirror is there */
	UP_K3S_MISSING,	   /* the file does not exist */
	UP_K3S_UNREADABLE, /* `err` says why */
	UP_K3S_INVALID,	   /* not YAML: `yaml_error` says why */
	UP_K3S_NO_MIRROR,  /* YAML without mirrors."localhost:5000" */
};

struct up_k3s_check {
	enum up_k3s_verdict verdict;
	const char *path; /* the file checked: $UPLINK_K3S_REGISTRIES or the default */
	int err;	  /* UP_K3S_UNREADABLE: the -errno */
	char yaml_error[256];
};

/* Whether a kubeconfig server is a k3s on this machine (its API listens on 6443). */
bool up_k3s_is_local(const char *server);
/* Checks the registries.yaml when `server` is a local k3s or the knob names a file. */
void up_k3s_registries_check(const char *server, struct up_k3s_check *c);
