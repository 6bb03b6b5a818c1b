/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * Config files: $XDG_CONFIG_HOME/uplink/config.yaml (default ~/.config) and the
 * .uplink.yaml (or 0.4.1's .agent-uplink.yaml) files from a session's cwd up to home,
 * never above it. Nearest first: a scalar comes from the nearest file that sets it,
 * lists add up (nearest file's items first), flags given to session.start beat files.
 * Every problem reads "FILE:LINE: what". (Named config-file.h: "config.h" is meson's.)
 *
 * Keys are a table (key -> parser -> offsetof); 0.4.1's names map onto ours:
 * auth_mode, anthropic: true, bedrock: true -> mode; claude_args -> args.
 */
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "session-options.h"
#include "util.h"

struct up_request;
struct up_param;
struct up_ruleset;

#define UP_CONFIG_FILE	   ".uplink.yaml"
#define UP_CONFIG_FILE_OLD ".agent-uplink.yaml"

/* A field for each config key of session-options.h that is not a list adding up. */
#define UP_CONFIG_FIELD_BOOL(key)     bool key;
#define UP_CONFIG_FIELD_STRING(key)   char *key;
#define UP_CONFIG_FIELD_DURATION(key) char *key;
#define UP_CONFIG_FIELD_PATH(key)     char *key; /* made absolute against the file's folder */
#define UP_CONFIG_FIELD_PATHS(key)
#define UP_CONFIG_FIELD_RULES(key)
#define UP_CONFIG_FIELD_WORDS(key)
#define UP_CONFIG_FIELD_SPLIT(key)
#define UP_CONFIG_FIELD_ARGS(key)
#define UP_CONFIG_FIELD_MODE(key)
struct up_config {
#define XX(flag, short_name, key, type, where, value, help, label, trust) \
	UP_IF_CONFIG_##where(UP_CONFIG_FIELD_##type(key))
	UP_SESSION_OPTIONS(XX)
#undef XX
	/*
	 * The rules items, nearest file first: absolute paths (strings) and inline rules
	 * ({"file", "source": "FILE:LINE", "text": a rules document, "rule": the rule as JSON}).
	 */
	json_t *rules;
	json_t *args;	 /* passthrough arguments (claude_args) */
	json_t *lists;	 /* canonical key -> array: the lists that add up to the flag's (add_dir...)
			  */
	json_t *origins; /* canonical key -> "FILE:LINE" (lists: an array, one per item) */
	json_t *project; /* the keys a project's file set that widen the agent's reach -> FILE:LINE
			  */
	json_t *files;	 /* the files read, nearest first */
	/*
	 * What each file read asks of the trust store (trust.h), nearest first:
	 * {"file", "sha256" (of the bytes parsed), "project": a project's file (between the cwd
	 * and home), "asks": [{"at": "FILE:LINE", "what": a sentence}], "rules_files":
	 * [{"file", "sha256"}] (the rules files a project's file names, read with it)}. A
	 * project's file whose asks are not empty is taken only when the store trusts it, and
	 * its rules files, at these hashes.
	 */
	json_t *trust;
};

/*
 * What a rules set asks for that only a trusted file may: each keyring or exec placeholder of
 * its headers and each l4_forward rule, appended to `asks` as {"at": the rule's FILE:LINE,
 * "what"}. 0 or -ENOMEM.
 */
int up_config_rules_asks(const struct up_ruleset *rs, json_t *asks) _wur_;

/*
 * After up_config_parse() of a project's file: reads each rules file it named (items from
 * `first` on), once, into an inline item {"file", "path", "source", "text"} (or {"error"} when
 * it cannot be read), adding its hash to the file's "rules_files" and its asks to the file's.
 * Blocking. 0 or -ENOMEM.
 */
int up_config_read_rules_files(struct up_config *c, size_t first) _wur_;

/*
 * Sets each c->trust entry's "state" from the store's files (up_trust_load()): "yours" (not a
 * project's), "not needed" (asks nothing), "trusted", "changed" or "untrusted"; and
 * "trusted_at" when the store knows the file. 0 or -ENOMEM.
 */
int up_config_check_trust(struct up_config *c, const json_t *store) _wur_;
/* Whether an entry so checked must be trusted before it is taken ("changed", "untrusted"). */
bool up_config_needs_trust(const json_t *entry);
/* The refusal for untrusted entries: each file, what it asks for, the command; NULL on OOM. */
char *up_config_untrusted_message(const struct up_config *c);

/* True for a config file's path that a project brings: .uplink.yaml (or the old name) not in home.
 */
bool up_config_is_project_file(const char *path, const char *home);

/* The defaults: what a session gets with no file and no flag. */
int up_config_init_defaults(struct up_config *c) _wur_;
void up_config_done(struct up_config *c);

/*
 * Adds one file's text (read as `path`) under the rules above: keys already set by a
 * nearer file are kept, lists are appended to. `home` expands "~/" in paths. Problems
 * go to `problems`; returns 0, -EINVAL (problems) or -ENOMEM.
 */
int up_config_parse(struct up_config *c, const char *path, const char *text, size_t len,
		    const char *home, json_t *problems) _wur_;

/*
 * Reads every file for `cwd` (blocking: the daemon calls it on the thread pool).
 * `config_home` is $XDG_CONFIG_HOME or NULL (then home/.config).
 */
int up_config_load(struct up_config *c, const char *home, const char *config_home, const char *cwd,
		   json_t *problems) _wur_;

/* {"files": [...], "values": {KEY: {"value", "source"}}}; source is FILE:LINE, "default" or "flag".
 */
json_t *up_config_show(const struct up_config *c, const json_t *flags);

/*
 * Fills session.start params from the files: a key the request lacks (or sends as null
 * or false) takes the file's value; lists such as add_dir add the files' items after the
 * flag's; `notifications: false` becomes "no_notifications": true. Rules are not touched
 * (see up_config_add_rules()). `from_files` (may be NULL) gets canonical key -> "FILE:LINE"
 * for each scalar a file supplied, so later checks can name the line instead of a flag.
 */
int up_config_apply(const struct up_config *c, json_t *params, json_t *from_files) _wur_;

/*
 * Loads one item of a session's rules list into the user layer: a path (a rules file)
 * or an inline config rule, whose problems name its config file and line.
 */
int up_config_load_rules_item(struct up_ruleset *rs, const json_t *item, json_t *problems) _wur_;

/*
 * session.start's first step: loads the config for the request's "cwd" on the thread
 * pool, fills the request's params from it (flags win), dispatches them again into the
 * request's params struct with `table`, and calls `cont` with the config's rules items
 * (to append after the request's own). A broken file answers the request with every
 * problem instead.
 */
typedef int (*up_config_cont_fn)(struct up_request *req, void *params, void *userdata,
				 const json_t *config_rules, const json_t *from_files);
/* config.show's reading: off the loop; broken files answer the request; `done` gets the rest. */
int up_config_show_for(uv_loop_t *loop, struct up_request *req, const char *home, const char *cwd,
		       void (*done)(struct up_request *req, struct up_config *c, void *ud)) _wur_;
/*
 * config.trust (the cwd's project files, or `files`: paths of project files), config.untrust
 * (`files`) and config.trusted: the trust store's methods, off the loop; the job answers
 * the request.
 */
enum up_config_trust_op {
	UP_TRUST_ADD,
	UP_TRUST_REMOVE,
	UP_TRUST_LIST,
};
int up_config_trust_for(uv_loop_t *loop, struct up_request *req, enum up_config_trust_op op,
			const char *home, const char *cwd, const json_t *files) _wur_;
int up_config_then(uv_loop_t *loop, struct up_request *req, const struct up_param *table,
		   const char *home, up_config_cont_fn cont, void *userdata) _wur_;

/* Appends the config's rules items to a session's list (after the --rules files). */
int up_config_add_rules(json_t *rules, const json_t *config_rules) _wur_;

/* Adds rules file `path` (a user's own: no trust) to c's rules, shown as from `origin`. */
int up_config_add_rules_file(struct up_config *c, const char *path, const char *origin) _wur_;
