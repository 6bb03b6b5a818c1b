/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <time.h>

#include <jansson.h>

#include "util.h"

/*
 * The agents uplink can run. An agent is a const vtable (struct up_agent_impl) with a
 * build context under agents/<context_dir>/ (Dockerfile, entrypoint.sh, its default
 * rules file) and a host-side prepare() that reads the user's configuration and
 * credentials and says what the agent adds to its pod and which auth rules the mitm
 * applies. agents.c lists them.
 *
 * prepare() BLOCKS: it reads files under the user's home and may refresh an OAuth token
 * over HTTPS. The daemon runs it on the libuv thread pool, never on its loop.
 */

/* ---- what an agent adds to its pod (the daemon renders it: daemon/manifests.c) */

struct up_env {
	const char *name;
	const char *value;
};

enum up_agent_volume_kind {
	UP_AGENT_VOL_SECRET,	/* a Secret the renderer creates from `files` */
	UP_AGENT_VOL_CONFIGMAP, /* a ConfigMap the renderer creates from `files` */
	UP_AGENT_VOL_HOSTPATH,	/* a host path (the cwd, ~/.claude/projects/...) */
	UP_AGENT_VOL_EMPTYDIR,	/* scratch space (docker's data root, /run) */
};

/* One key of an agent Secret or ConfigMap. */
struct up_agent_file {
	const char *key; /* a config key: [-._a-zA-Z0-9]+ */
	const char *data;
	size_t len;
	const char
		*mount_path; /* non-NULL: mounted alone here (subPath), e.g. ~/.claude/CLAUDE.md */
};

struct up_agent_volume {
	enum up_agent_volume_kind kind;
	const char *name; /* volume name; also the Secret's/ConfigMap's name (DNS-1123 label) */
	const struct up_agent_file *files; /* SECRET, CONFIGMAP */
	size_t n_files;
	const char *mount_path; /* the whole volume here; NULL when only files are mounted */
	bool read_only;
	const char *host_path;	    /* HOSTPATH */
	const char *host_path_type; /* HOSTPATH: Directory, DirectoryOrCreate, File, ... */
	const char *medium;	    /* EMPTYDIR: NULL or "Memory" */
	const char *size_limit;	    /* EMPTYDIR: NULL or a quantity, "2Gi" */
};

/* What the agent adds to its pod (prepare() fills it; daemon/session-spec.h carries it). */
struct up_agent_contrib {
	const struct up_env *env; /* added after uplink's own; a clash with one is an error */
	size_t n_env;
	const struct up_agent_volume *volumes;
	size_t n_volumes;
	const char *const
		*entrypoint;	    /* NULL-terminated: the container's command; NULL = image's */
	const char *const *command; /* NULL-terminated: what runs under tmux (container args) */
	const char *memory_limit;   /* NULL = UP_AGENT_MEMORY_LIMIT_DEFAULT */
};

/* ---- the agent interface */

/* Bounds of one prepared result (a bug, not a user, exceeds them). */
#define UP_AGENT_MAX_ENV      32
#define UP_AGENT_MAX_VOLUMES  32
#define UP_AGENT_MAX_FILES    32
#define UP_AGENT_MAX_WARNINGS 16
#define UP_AGENT_MAX_PROFILES 16
/* Passthrough arguments (`-- ARGS`): how many, and their total length once quoted. */
#define UP_AGENT_MAX_ARGS     256
#define UP_AGENT_MAX_ARGS_LEN (256 * 1024)

/* What the caller knows about the session and the host user. The strings are borrowed. */
struct up_agent_input {
	const char *mode; /* NULL: the agent's default mode */
	const char *home; /* host home; also the home inside the pod (/home/<user>) */
	uid_t uid;
	gid_t gid;
	const char *user;	 /* host user name */
	const char *cwd;	 /* absolute; mounted at the same path and the agent's cwd */
	const char *const *args; /* passthrough args, NULL-terminated; NULL: none */
	const char *session_id;	 /* 12 hex; NULL with rules_only */
	/* The session's private folder on the host (0700): files the pod mounts read-write
	 * (a sanitized ~/.claude.json). NULL: such files are left out of the contribution. */
	const char *state_dir;
	/* --dry-run: the contribution names the files and folders a run would make (under
	 * state_dir, ~/.claude/projects/<cwd>) but nothing is written or created. */
	bool dry_run;
	/* Tests: prefix for host paths outside home (/etc/claude-code/...). NULL: "". */
	const char *base_dir;
	bool debug;	 /* --debug: the agent's debug output kept on the host */
	bool rules_only; /* only the auth rules and the expiry: no files read or written for the pod
			  */
	time_t now;	 /* 0: time(NULL); tests fix it */
	/* Where an expired OAuth token is refreshed; NULL: the agent's default (tests set it). */
	const char *token_url;
	/* The same for OpenAI's (codex's ChatGPT login); NULL: auth.openai.com. */
	const char *openai_token_url;
	const char *google_token_url; /* UPLINK_GOOGLE_TOKEN_URL (tests), NULL: Google's */
	/* The CA bundle (PEM file) that refresh's HTTPS trusts instead of the system's; NULL:
	 * the system's. */
	const char *ca_bundle;
};

/*
 * What prepare() returns. Every pointer in `contrib` points into storage this result
 * owns; up_agent_prepared_free() wipes (explicit_bzero) and frees all of it.
 */
struct up_agent_prepared {
	struct up_agent_contrib contrib; /* empty with rules_only */
	/*
	 * The auth layer: a rules document ({"rules": [...]}, JSON, which the rules loader
	 * reads as YAML) or NULL for none. Header values may be literal secrets (the OAuth
	 * access token) or placeholders ({{keyring:bedrock:key}}): they only ever go into the
	 * mitm's rules Secret. Load it with up_ruleset_load_agent_prepared().
	 */
	char *auth_rules;
	size_t auth_rules_len;
	/* When the injected credential stops working; 0: it does not expire. To refresh, call
	 * prepare() again with rules_only before then and swap the auth rules in. */
	time_t expires_at;
	/* Sentences for the user, never holding a secret. */
	const char *warnings[UP_AGENT_MAX_WARNINGS];
	size_t n_warnings;
	/* AWS profiles the agent's configuration names (settings.json env.AWS_PROFILE). */
	const char *aws_profiles[UP_AGENT_MAX_PROFILES];
	size_t n_aws_profiles;

	/* private: the storage behind the pointers above */
	struct up_env env_store[UP_AGENT_MAX_ENV];
	struct up_agent_volume vol_store[UP_AGENT_MAX_VOLUMES];
	struct up_agent_file file_store[UP_AGENT_MAX_FILES];
	size_t n_files;
	struct up_agent_blob *blobs; /* every allocation, wiped on free */
	size_t n_blobs, cap_blobs;
};

struct up_agent_mode {
	const char *name;    /* "anthropic" */
	const char *summary; /* one line for `uplink run --help` */
	const char *flag;    /* the `uplink run` flag choosing it: "--anthropic" */
};

/* One line of `uplink doctor` about an agent's host login. */
struct up_agent_check {
	char name[64];	    /* "claude login" */
	const char *status; /* "ok", "warn" (a missing login: the user may not use this agent),
			       "skip" */
	char detail[512];   /* never a secret */
	char fix[512];	    /* the command to run; "" when none is needed */
};

#define UP_AGENT_MAX_CHECKS 8

struct up_agent_parts;

struct up_agent_impl {
	const char *name;	 /* "claude" */
	const char *context_dir; /* build context: agents/<context_dir>/ under the data dir */
	const struct up_agent_mode *modes; /* terminated by { NULL } */
	const char *default_mode;
	const char *default_rules; /* file in the build context, loaded into UP_LAYER_AGENT */
	/* What `kubectl exec -it agent -c main --` runs to reach the agent's tmux session. */
	const char *const *attach_argv;
	/*
	 * Host-side preparation; BLOCKING. 0 with *ret (free it with up_agent_prepared_free()),
	 * or -errno with a sentence in err that names the file or flag and what to do, and
	 * never holds a secret: -ENOENT a missing file or keyring entry, -EINVAL a malformed
	 * one, -EIO a failed refresh, -ENOMEM.
	 */
	int (*prepare)(const struct up_agent_impl *impl, const struct up_agent_input *in,
		       struct up_agent_prepared **ret, char *err, size_t err_len);
	/*
	 * `uplink doctor`'s checks of the host login: BLOCKING (a worker thread), reads only
	 * (never refreshes, never writes), never a secret in the text. in->home and in->now
	 * are set; in->mode is NULL. Returns how many checks it wrote (at most `max`).
	 */
	size_t (*doctor)(const struct up_agent_impl *impl, const struct up_agent_input *in,
			 struct up_agent_check *out, size_t max);
	/* What prepare() is made of when it is up_agent_prepare_parts(); else NULL. */
	const struct up_agent_parts *parts;
};

/* Every agent, NULL-terminated. */
extern const struct up_agent_impl *const up_agents[];
extern const struct up_agent_impl up_agent_claude;
extern const struct up_agent_impl up_agent_codex;
extern const struct up_agent_impl up_agent_gemini;
extern const struct up_agent_impl up_agent_opencode;

const struct up_agent_impl *up_agent_find(const char *name);
/* The mode called `name` (NULL: the default), or NULL. */
const struct up_agent_mode *up_agent_find_mode(const struct up_agent_impl *a, const char *name);
/* "claude (modes anthropic, bedrock)", for messages listing what exists. */
int up_agent_describe_all(char *buf, size_t len);

/*
 * The folder holding the agents' build contexts: <data_dir>/agents when data_dir is set (the
 * daemon passes $UPLINK_DATA_DIR), else <datadir>/uplink/agents when installed, else the
 * source tree's agents/ (running uninstalled from a build folder). Then the build context
 * and the default rules file.
 */
int up_agent_data_dir(const char *data_dir, char *buf, size_t len) _wur_;
/* The folder beside the agents' own that every agent image takes files from (the one
 * entrypoint, the git configuration): <agents>/common. */
#define UP_AGENT_COMMON_DIR "common"
int up_agent_context_path(const struct up_agent_impl *a, const char *data_dir, char *buf,
			  size_t len) _wur_;
int up_agent_rules_path(const struct up_agent_impl *a, const char *data_dir, char *buf,
			size_t len) _wur_;

/*
 * Runs prepare() after checking the mode; an unknown mode is -EINVAL with a sentence
 * naming the modes. in->mode NULL means the default mode.
 */
int up_agent_prepare(const struct up_agent_impl *a, const struct up_agent_input *in,
		     struct up_agent_prepared **ret, char *err, size_t err_len) _wur_;
struct up_agent_prepared *up_agent_prepared_free(struct up_agent_prepared *p);
/* Fills one doctor check; the text is cut to fit. */
void up_agent_check_set(struct up_agent_check *c, const char *name, const char *status,
			const char *fix, const char *fmt, ...) _printf_(5, 6);
void up_agent_prepared_freep(struct up_agent_prepared **p);

/*
 * POSIX shell quoting: bare when every byte is safe ([-A-Za-z0-9_./=:,+@%^]), else in
 * single quotes with each ' written '\''. The empty string is ''. Joined with spaces.
 * Returns 0, -E2BIG past UP_AGENT_MAX_ARGS_LEN, -ENOMEM.
 */
int up_shell_quote_argv(const char *const *argv, char **ret) _wur_;

/* ---- for agent implementations: storage owned by a prepared result */

struct up_agent_prepared *up_agent_prepared_new(void);
/* Takes ownership of `ptr` (len bytes wiped on free); NULL (and ptr freed) on failure. */
void *up_agent_keep(struct up_agent_prepared *p, void *ptr, size_t len);
char *up_agent_strdup(struct up_agent_prepared *p, const char *s);
char *up_agent_memdup(struct up_agent_prepared *p, const void *data, size_t len);
char *up_agent_printf(struct up_agent_prepared *p, const char *fmt, ...) _printf_(2, 3);
int up_agent_add_env(struct up_agent_prepared *p, const char *name, const char *value) _wur_;
/* A volume; the strings are copied. Files go to the volume added last. */
struct up_agent_volume *up_agent_add_volume(struct up_agent_prepared *p,
					    enum up_agent_volume_kind kind, const char *name,
					    const char *mount_path, bool read_only);
int up_agent_add_file(struct up_agent_prepared *p, struct up_agent_volume *v, const char *key,
		      const char *data, size_t len, const char *mount_path) _wur_;
/* A copy of a NULL-terminated argv (the array and its strings), or NULL. */
const char *const *up_agent_copy_argv(struct up_agent_prepared *p, const char *const *argv);
int up_agent_warn(struct up_agent_prepared *p, const char *fmt, ...) _printf_(2, 3);
int up_agent_add_aws_profile(struct up_agent_prepared *p, const char *name) _wur_;

/* ---- rules (daemon/rules-builtin.c) */

/* The daemon's own user (uid, gid, name, home: $HOME, which tests point at a fixture, else
 * the passwd entry), for rules.check, rules.render and doctor; the strings live in buf. */
int up_agent_input_self(struct up_agent_input *in, char *buf, size_t len) _wur_;

struct up_ruleset;
/*
 * Loads an agent's layers: its prepared auth rules (NULL: none) into UP_LAYER_AUTH, and
 * its default rules file into UP_LAYER_AGENT. Problems are appended as the rules loader
 * does; a missing default rules file is one of them.
 */
int up_ruleset_load_agent_prepared(struct up_ruleset *rs, const struct up_agent_impl *a,
				   const struct up_agent_prepared *p, json_t *problems) _wur_;
/*
 * The same for the daemon's own user (rules.check, rules.render): prepare() with
 * rules_only, so BLOCKING. An unknown agent or mode is a problem (-ENOENT); a prepare()
 * failure (missing credentials, a failed refresh) is a sentence in auth_err instead.
 * up_ruleset_load_agent() (rules.h) is this with auth_err appended to the problems.
 */
int up_ruleset_load_agent_auth(struct up_ruleset *rs, const char *agent, const char *mode,
			       json_t *problems, char *auth_err, size_t auth_err_len) _wur_;

/* ---- for agent implementations: shared helpers (agents/agent-util.c) */

/* What every agent image runs: agents/common/entrypoint.sh, installed here. */
#define UP_AGENT_ENTRYPOINT "/usr/local/bin/uplink-entrypoint"

/* Formats into err and returns r. */
int up_agent_failf(char *err, size_t len, int r, const char *fmt, ...) _printf_(4, 5);
/* up_json_wipe() (jsonrpc.h: every string overwritten, they may be secrets), then freed. */
void up_json_wipe_decref(json_t *v);
/* json_object_set_new() of a secret: the string it replaces (a token) is wiped first. */
int up_agent_set_secret(json_t *obj, const char *key, json_t *value);
/*
 * Reads a JSON file under the user's home. 0 with *doc; -ENOENT when missing (err says
 * what to do: `missing_hint`); -EINVAL when it is not a JSON object (err names the line
 * and column, never the text: the file may hold a secret, and says to run `tool` again).
 * `what` is how messages name the file ("~/.claude/settings.json").
 */
int up_agent_read_json(const char *path, const char *what, const char *tool,
		       const char *missing_hint, json_t **doc, char *err, size_t err_len) _wur_;
/* Writes `text` to `path` with up_write_file_atomic() (mode 0600), as the tools do; the
 * _json form writes `doc` with a 2-space indent. */
int up_agent_write_private(const char *path, const char *text, size_t len) _wur_;
int up_agent_write_json(const char *path, const json_t *doc) _wur_;
/*
 * A name (an env variable, a settings key) that looks like it holds a credential: one of
 * its words (split at anything but [A-Za-z0-9] and where lower case turns upper) is
 * TOKEN, SECRET(S), PASSWORD, PASSWD, KEY, APIKEY, CREDENTIAL(S), BEARER, AUTHORIZATION
 * or COOKIE. So ANTHROPIC_API_KEY, apiKey and bearer_token are; MAX_OUTPUT_TOKENS is not.
 */
bool up_agent_secret_name(const char *name);
/* A bearer token as RFC 6750 allows it (token68): nothing a header could misread. */
bool up_agent_is_token(const char *s);
/* The payload of a JWT as a JSON object (a new reference; wipe it), or NULL. No signature is
 * checked: the tokens are the user's own, read to learn when they end and whose they are. */
json_t *up_agent_jwt_claims(const char *jwt);
/* The expiry (the "exp" claim) of a JWT, or 0 when it is not one or has none. */
long long up_agent_jwt_exp(const char *jwt);

/* A token endpoint's answer (at most UP_AGENT_TOKEN_RESPONSE_MAX bytes; wiped when done). */
struct up_agent_body {
	char *buf;
	size_t len;
	bool too_big;
};
/*
 * BLOCKING: POSTs `body` as `content_type` to `url` (UP_AGENT_TOKEN_TIMEOUT_MS), trusting
 * the CAs in `ca` (a PEM file: in->ca_bundle, UPLINK_CA_BUNDLE) or, when NULL, the system's.
 * 0 when it answered 200, the body in *b; else -EIO with why in err (the URL, the status and
 * the OAuth error code, never the body). Call up_agent_body_done() either way.
 */
int up_agent_post(const char *url, const char *ca, const char *content_type, const char *body,
		  struct up_agent_body *b, char *err, size_t len) _wur_;
/* The answer as a JSON object, or NULL. */
json_t *up_agent_body_json(const struct up_agent_body *b);
void up_agent_body_done(struct up_agent_body *b);

/* p->auth_rules from `doc` ({"rules": [...]}); consumes and wipes doc. 0 or -ENOMEM. */
int up_agent_set_auth_rules(struct up_agent_prepared *p, json_t *doc) _wur_;
/* `doc` as the pod gets it (2-space indent), owned by p; consumes and wipes doc. */
const char *up_agent_dump_json(struct up_agent_prepared *p, json_t *doc, size_t *len);
/* A read-only Secret or ConfigMap volume holding one file, mounted at mount_path. */
int up_agent_add_file_volume(struct up_agent_prepared *p, enum up_agent_volume_kind kind,
			     const char *volume, const char *key, const char *data, size_t len,
			     const char *mount_path) _wur_;
int up_agent_add_host_path(struct up_agent_prepared *p, const char *volume, const char *path,
			   const char *type, const char *mount_path, bool rw) _wur_;
/* A memory-backed emptyDir of at most `size` ("2Gi"). */
int up_agent_add_empty_dir(struct up_agent_prepared *p, const char *volume, const char *mount_path,
			   const char *size) _wur_;
/* mkdir -p, 0700; -errno with a sentence naming the path. */
int up_agent_make_dir(const char *path, char *err, size_t err_len) _wur_;
/*
 * The container runs UP_AGENT_ENTRYPOINT, and under tmux `bash -lc 'exec TOOL... ARGS...'`
 * (quoted), with a 4Gi memory limit. `tool` is the agent's own argv (NULL-terminated, at
 * most 15), `args` the passthrough ones. -E2BIG with a sentence past the bounds.
 */
int up_agent_set_command(struct up_agent_prepared *p, const char *const *tool,
			 const char *const *args, char *err, size_t err_len) _wur_;
/* The pod's instructions file (CLAUDE.md, AGENTS.md): the host's (may be NULL) and the
 * sandbox section (the proxy, the 403 JSON, placeholders). Owned by p. */
const char *up_agent_instructions(const char *host, size_t host_len, struct up_agent_prepared *p);

/* ---- for agent implementations: prepare() in parts (agents/agent-util.c) */

/* What `uplink attach` runs in every agent's pod: the entrypoint's --attach. */
extern const char *const up_agent_attach_argv[];

/* What an agent's parts share while its prepare() runs. */
struct up_agent_ctx {
	const struct up_agent_input *in;
	struct up_agent_prepared *p;
	size_t mode;	 /* in->mode's index in the impl's modes (the default's when NULL) */
	const char *dir; /* <home>/<parts->home_dir>, owned by p; NULL without a home_dir */
	const char
		*fake; /* the pod's fake login, owned by p; NULL: none (always with rules_only) */
	size_t fake_len;
	void *state; /* the agent's own (its parts set it; owned by p) */
	char *err;
	size_t err_len;
};

#define UP_AGENT_MAX_MODES 4

/* An agent's prepare() as what differs from the others'. */
struct up_agent_parts {
	const char *home_dir; /* the tool's folder under the home (".claude"); NULL: none */
	/* By mode, in the order of the impl's modes (none NULL): the auth rules and their expiry
	 * into c->p and, unless c->in->rules_only, the pod's fake login into c->fake. */
	int (*auth[UP_AGENT_MAX_MODES])(struct up_agent_ctx *c);
	/* What the pod gets; not called with rules_only. */
	int (*contribution)(struct up_agent_ctx *c);
};

/*
 * A prepare() (struct up_agent_impl) made of impl->parts: a new result, c->dir made, the
 * mode's auth part and, unless in->rules_only, the contribution. A -ENOMEM without a
 * sentence gets "out of memory preparing agent NAME". 0 with *ret, or what a part returned.
 */
int up_agent_prepare_parts(const struct up_agent_impl *impl, const struct up_agent_input *in,
			   struct up_agent_prepared **ret, char *err, size_t err_len) _wur_;

/* A file or folder of the tool's own that the pod shares when it exists on the host. */
struct up_agent_shared {
	const char *name;   /* under the folder; NULL ends a table */
	const char *volume; /* the volume's name */
	bool dir;	    /* a folder (else a regular file) */
	bool rw;
};
/* Each of `shared` that exists under host_dir (as a folder or a regular file, as it says),
 * a host path mounted at the same name under pod_dir (NULL: host_dir). */
int up_agent_add_shared(struct up_agent_prepared *p, const char *host_dir, const char *pod_dir,
			const struct up_agent_shared *shared) _wur_;
/* The cwd, mounted read-write at the same path (volume "workdir"). */
int up_agent_add_workdir(struct up_agent_prepared *p, const struct up_agent_input *in) _wur_;
/*
 * The instructions file (CLAUDE.md, AGENTS.md) as a ConfigMap volume holding `key`:
 * `host_path` (read when it exists; `what` names it in errors) with the sandbox note,
 * mounted at `at` (NULL: host_path).
 */
int up_agent_add_instructions(struct up_agent_prepared *p, const char *host_path, const char *what,
			      const char *volume, const char *key, const char *at, char *err,
			      size_t err_len) _wur_;

/* The end of every agent's pod: docker's data root and /run (in memory), `env` (ends at
 * a NULL name) and the tool run under tmux (`debug_tool` with --debug, when not NULL). */
struct up_agent_pod {
	const struct up_env *env;
	const char *const *tool;
	const char *const *debug_tool;
};
int up_agent_finish_pod(struct up_agent_prepared *p, const struct up_agent_input *in,
			const struct up_agent_pod *pod, char *err, size_t err_len) _wur_;

/* ---- for agent implementations: OAuth logins (agents/agent-auth.c) */

/* Refresh a login's access token when it expires within this many seconds. */
#define UP_AGENT_REFRESH_MARGIN_S 300

/*
 * A token request's body from `fields` (name, value, ..., NULL): a JSON object of those
 * strings in that order (compact), or with `form` name=value pairs joined by '&', each value
 * escaped. It holds a secret: free it with up_free_secret(s, strlen(s)). NULL: no memory.
 */
char *up_agent_token_request(const char *const *fields, bool form);
/* "Bearer <token>", malloc'd; a secret: up_free_secret(s, strlen(s) + 1). NULL: no memory. */
char *up_agent_bearer(const char *token);
/* A placeholder token, `prefix` and 32 random hex digits, owned by p: 0, -EIO or -ENOMEM. */
int up_agent_fake_token(struct up_agent_prepared *p, const char *prefix, const char **out) _wur_;

/* An OAuth refresh as the tools do it: what to send where, and what to do with the answer. */
struct up_agent_refresh {
	const char *path;	 /* the host's login file, written back after */
	const char *what;	 /* how messages name it: "~/.claude/.credentials.json" */
	const char *field;	 /* how they name its refresh token: "claudeAiOauth.refreshToken" */
	const char *written;	 /* what was refreshed: "the refreshed token" */
	const char *refresh;	 /* the refresh token; NULL: there is no usable one */
	const char *url;	 /* NULL or "": default_url */
	const char *default_url; /* the vendor's token endpoint */
	const char *ca;		 /* in->ca_bundle */
	bool form;		 /* the request is a form, else JSON */
	const char *const *request; /* its fields, up_agent_token_request() */
	/* The answer into the login (and its borrowed pointers read again): 0, or -errno with
	 * why in err. */
	int (*take)(void *login, const struct up_agent_body *b, time_t now, char *err, size_t len);
	void *login;
	const json_t *doc; /* the whole file (take() changes it): written back to path */
};
/*
 * BLOCKING: POSTs the refresh grant, take()s the answer and writes the login file back
 * (the old refresh token stops working once used). 0, or -errno with why in err (-EIO: the
 * refresh failed; never a secret).
 */
int up_agent_refresh(const struct up_agent_refresh *rf, time_t now, char *err, size_t len) _wur_;

/* How a failed refresh is told. */
struct up_agent_renewal {
	const char *token;   /* what was not refreshed: "the Claude OAuth token" */
	const char *expired; /* what has expired: "the Claude OAuth token" */
	const char *renew;   /* how the user renews it: "run `claude` on this machine" */
	const char *relogin; /* what to do once it has expired */
};
/*
 * up_agent_refresh() when the token expires within UP_AGENT_REFRESH_MARGIN_S (`left`
 * seconds from `now`). Its failure is a warning in p while the token still works, else -EIO
 * with a sentence in err. 0 otherwise.
 */
int up_agent_renew(struct up_agent_prepared *p, const struct up_agent_refresh *rf,
		   const struct up_agent_renewal *say, long long left, time_t now, char *err,
		   size_t len) _wur_;

/* How `uplink doctor` names an OAuth login's states. */
struct up_agent_login_doctor {
	const char *name;	  /* the check's: "claude login" */
	const char *missing;	  /* "no Claude login" (its file is missing) */
	const char *missing_note; /* after that: "" or " (why else)" */
	const char *missing_fix;
	const char *fix;   /* for a login that does not work */
	const char *login; /* "the Claude login" (it has expired, with no refresh token) */
	const char *token; /* "the token", "the access token" */
};
/* The check of the login in `what`: r is what reading it returned (-ENOENT: missing; else
 * `why` says what is wrong), left the seconds its token lasts, refresh whether it has a
 * refresh token. */
void up_agent_doctor_login(struct up_agent_check *out, const struct up_agent_login_doctor *d,
			   const char *what, int r, const char *why, long long left, bool refresh);

/* An OAuth login kept in a JSON file under the home (Claude Code's, the Gemini CLI's), and
 * how it is refreshed and used. */
struct up_agent_oauth;
struct up_agent_oauth_file {
	const char *file;	  /* under the home: ".claude/.credentials.json" */
	const char *what;	  /* how messages name it: "~/.claude/.credentials.json" */
	const char *tool;	  /* what to run again when it is not JSON: "claude" */
	const char *missing_hint; /* what to do when it is missing */
	const char *object; /* the object holding the fields: "claudeAiOauth"; NULL: the file */
	const char *access, *refresh, *expires; /* the fields; expires: ms since 1970 */
	const char *relogin;			/* what to do when it is unusable */
	/* The refresh: grant_type, refresh_token, client_id and client_secret (when not NULL),
	 * as JSON or a form, to token_url (unless the input names another). take() puts the
	 * answer into the login (a struct up_agent_oauth) and parses it again. */
	const char *token_url, *client_id, *client_secret;
	bool form;
	int (*take)(void *login, const struct up_agent_body *b, time_t now, char *err, size_t len);
	const struct up_agent_renewal *say;
	/* The auth rules injecting `value` ("Bearer <the access token>") into p. */
	int (*rules)(struct up_agent_prepared *p, const char *value);
	/* The pod's fake login, owned by p. */
	int (*fake)(const struct up_agent_oauth *o, time_t now, struct up_agent_prepared *p,
		    const char **out, size_t *out_len);
};
struct up_agent_oauth {
	char *path;		      /* the file's */
	json_t *doc;		      /* the whole file; its strings wiped before it is freed */
	json_t *obj;		      /* the object holding the fields (borrowed) */
	const char *access, *refresh; /* borrowed; refresh NULL when it is not a usable token */
	long long expires_ms;
};
/* Reads and parses the login under `home`: 0, or -errno with why in err (-ENOENT: missing,
 * -EINVAL: unusable; never a secret). Call up_agent_oauth_done() either way. */
int up_agent_oauth_read(const struct up_agent_oauth_file *f, const char *home,
			struct up_agent_oauth *o, char *err, size_t len) _wur_;
/* Reads the fields of o->doc (again, after a refresh changed it): 0 or -EINVAL with why. */
int up_agent_oauth_parse(const struct up_agent_oauth_file *f, struct up_agent_oauth *o, char *err,
			 size_t len) _wur_;
void up_agent_oauth_done(struct up_agent_oauth *o);
/*
 * The auth part of a mode using such a login: read, refreshed near its expiry (at `url`;
 * NULL or "": f->token_url) and written back, its rules and their expiry into c->p and,
 * unless rules_only, the pod's fake login into c->fake.
 */
int up_agent_oauth_login(struct up_agent_ctx *c, const struct up_agent_oauth_file *f,
			 const char *url) _wur_;
/* `uplink doctor`'s check of such a login (read only: never refreshed). */
size_t up_agent_oauth_doctor(const struct up_agent_oauth_file *f,
			     const struct up_agent_login_doctor *d, const struct up_agent_input *in,
			     struct up_agent_check *out, size_t max);
