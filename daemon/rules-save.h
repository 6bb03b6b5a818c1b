/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * Saving an approval's rule to a rules file ("Always" in ask mode: uplink approve --save).
 * The rule (approvals.h's up_approval_rule(): name, hosts, methods, paths, strings and lists
 * of strings) goes in as the last item of the file's top-level block list `rules:`, after a
 * comment saying when and from which session; the rest of the file is left byte for byte.
 *
 * The default file is the user's own, <config>/uplink/rules.yaml ($XDG_CONFIG_HOME, default
 * ~/.config), which every session loads after ~/.config/uplink/config.yaml. Any other file
 * inside a project (a folder from the file's up to / holding .git, .uplink.yaml or
 * .agent-uplink.yaml) is written only when the trust store holds it as it is now, and is
 * recorded there again as written: the user trusted what was there and chose what was added.
 */
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "util.h"

#define UP_RULES_SAVE_FILE "rules.yaml"

/* <config_home>/uplink/rules.yaml, or <home>/.config/uplink/rules.yaml. -ENOENT: neither. */
int up_rules_save_default(const char *home, const char *config_home, char *buf, size_t len) _wur_;

/*
 * The text of rules file `old` (`old_len` bytes; NULL: no file yet) with `rule` appended,
 * each line of `comment` (control characters shown as '?') before it. `label` names the file
 * in `err`. Checked: the old text is a valid rules file, the new one holds exactly one more
 * rule, and that rule reads back as `rule`. *out (NUL-terminated, freed by the caller),
 * *line: the 1-based line of the rule's "- ". 0, -EINVAL (a sentence in `err`), -ENOMEM.
 */
int up_rules_save_text(const char *old, size_t old_len, const char *label, const json_t *rule,
		       const char *comment, char **out, size_t *out_len, size_t *line, char *err,
		       size_t err_len) _wur_;

/* Whether `path` lies in a project (see above): not under `own_dir` and below a folder with
 * .git, .uplink.yaml or .agent-uplink.yaml. Blocking (stat). */
bool up_rules_save_in_project(const char *path, const char *own_dir);

struct up_rules_save {
	const char *path;      /* absolute, normal */
	const char *own_dir;   /* <config>/uplink: never a project file */
	const char *trust_dir; /* the trust store's folder */
	const json_t *rule;
	const char *comment;
	long long now; /* for the trust store */
	/* out */
	size_t line;
	bool trusted; /* a project file the store held, recorded again */
	int e;	      /* UP_ERR_* of the failure */
	char err[1024];
};

/*
 * The whole save, blocking (the daemon runs it on its thread pool; one at a time within the
 * process): refuses a symlink, a folder, a project file the store does not trust as it is,
 * a file that cannot take the rule; creates the default file's folder; writes atomically,
 * keeping the old file's mode. 0 or -errno with s->err and s->e set.
 */
int up_rules_save(struct up_rules_save *s) _wur_;
