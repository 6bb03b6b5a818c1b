/* SPDX-License-Identifier: Apache-2.0 */
/*
 * --ssh-key-dir (docs/architecture.md, "What a session borrows from the host"): which files
 * of the folder go to the ssh-agent holder pod (private keys), which to the agent's ~/.ssh
 * (the public halves, derived with ssh-keygen, certificates and the config), and which stay
 * home.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "session-spec.h"
#include "util.h"

enum up_ssh_class {
	UP_SSH_IGNORE,	/* other *.pub (re-derived), known_hosts, anything else */
	UP_SSH_CERT,	/* *-cert.pub: the agent's ~/.ssh */
	UP_SSH_PRIVATE, /* content holds "PRIVATE KEY-----" (even named config or *-cert.pub) */
	UP_SSH_CONFIG,	/* "config": the agent's ~/.ssh */
};

/*
 * What a regular file of the folder is, by its name and content. Other *.pub files stay home,
 * whatever they hold; for everything else the content is looked at first, so a private key
 * never reaches the agent's ~/.ssh under the name of a certificate or of the config.
 */
enum up_ssh_class up_ssh_classify(const char *name, const char *data, size_t len);

/* A name that can be a Secret key and a file in ~/.ssh: [-._a-zA-Z0-9]+, not "." or "..". */
bool up_ssh_name_ok(const char *name);

/* From what ssh-keygen printed on failure, the line that says why (no prompt, no banner). */
void up_ssh_keygen_reason(const char *out, char *buf, size_t len);

/*
 * Threadpool only (reads the folder, runs `ssh-keygen -y` per key without a terminal or an
 * askpass). `dir` is absolute. Regular files, in name order. 0 with `*k` filled (no private
 * keys: all empty, and *no_keys set); -EINVAL with the sentence for the user in `why`; -ENOMEM.
 * `uid` is the host uid the holder pod runs as: 0 with keys is refused.
 */
int up_ssh_keys_load(const char *dir, uid_t uid, struct up_ssh_keys *k, bool *no_keys, char *why,
		     size_t len) _wur_;
void up_ssh_keys_done(struct up_ssh_keys *k);
