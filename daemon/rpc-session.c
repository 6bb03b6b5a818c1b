/* SPDX-License-Identifier: Apache-2.0 */
/* The session.* methods. Every check of the request happens here, before any slow step. */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agents/agent.h"
#include "aws.h"
#include "bounds.h"
#include "cluster.h"
#include "config-file.h"
#include "duration.h"
#include "jsonrpc.h"
#include "knobs.h"
#include "log.h"
#include "manager.h"
#include "paths.h"
#include "rpc-clean.h"
#include "rpc-logs.h"
#include "rpc-session-observer.h"
#include "rpc.h"
#include "server.h"
#include "session-options.h"
#include "session.h"

/* session.start's parameters: a field for each parameter of session-options.h, and these. */
#define FIELD_BOOL(key)	    bool key;
#define FIELD_STRING(key)   const char *key;
#define FIELD_DURATION(key) const char *key;
#define FIELD_PATH(key)	    const char *key;
#define FIELD_PATHS(key)    json_t *key;
#define FIELD_RULES(key)    json_t *key;
#define FIELD_WORDS(key)    json_t *key;
#define FIELD_ARGS(key)	    json_t *key;
#define FIELD_SPLIT(key)    json_t *key;
#define FIELD_MODE(key)
#define FIELD_LOCAL(key)
struct start_params {
	const char *agent, *cwd;
	const char *kubeconfig_default; /* what kubectl reads where the client runs */
	bool no_notifications;		/* config files: notifications: false */
#define XX(flag, short_name, key, type, where, value, help, label, trust) \
	UP_IF_PARAM_##where(FIELD_##type(key))
	UP_SESSION_OPTIONS(XX)
#undef XX
};

#define ROW(key, type, flags) {#key, type, offsetof(struct start_params, key), flags, NULL},
#define ROW_BOOL(key)	      ROW(key, UP_PARAM_BOOL, 0)
#define ROW_STRING(key)	      ROW(key, UP_PARAM_STRING, UP_PARAM_NULLABLE)
#define ROW_DURATION(key)     ROW_STRING(key)
#define ROW_PATH(key)	      ROW_STRING(key)
#define ROW_PATHS(key)	      ROW(key, UP_PARAM_STRV, UP_PARAM_NULLABLE)
#define ROW_RULES(key)	      ROW_PATHS(key)
#define ROW_WORDS(key)	      ROW_PATHS(key)
#define ROW_ARGS(key)	      ROW_PATHS(key)
#define ROW_SPLIT(key)	      ROW_PATHS(key)
#define ROW_MODE(key)
#define ROW_LOCAL(key)
static const struct up_param start_params[] = {
	{"agent", UP_PARAM_STRING, offsetof(struct start_params, agent), UP_PARAM_MANDATORY, NULL},
	{"cwd", UP_PARAM_STRING, offsetof(struct start_params, cwd), UP_PARAM_MANDATORY, NULL},
	ROW_STRING(kubeconfig_default) ROW_BOOL(no_notifications)
/* A generated row ends with its comma (clang-format would indent the next as a continuation). */
/* clang-format off */
#define XX(flag, short_name, key, type, where, value, help, label, trust) \
	UP_IF_PARAM_##where(ROW_##type(key))
	UP_SESSION_OPTIONS(XX)
#undef XX
	{0},
};
/* clang-format on */

static char *dup_or_null(const char *s)
{
	return s && *s ? strdup(s) : NULL;
}

static bool dns_name(const char *s)
{
	return s && *s && strlen(s) <= 253 &&
	       strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789-.") == strlen(s) && s[0] != '-' &&
	       s[0] != '.';
}

static bool image_ref(const char *s)
{
	return s && *s && strlen(s) <= 512 && !strpbrk(s, " \t\n\"'\\");
}

/* Every PATHS option of session-options.h: its flag and its values. */
#define PATHS_ROW_PATHS(flag, key) {"--" flag, p->key},
#define PATHS_ROW_BOOL(flag, key)
#define PATHS_ROW_STRING(flag, key)
#define PATHS_ROW_DURATION(flag, key)
#define PATHS_ROW_PATH(flag, key)
#define PATHS_ROW_RULES(flag, key)
#define PATHS_ROW_WORDS(flag, key)
#define PATHS_ROW_ARGS(flag, key)
#define PATHS_ROW_SPLIT(flag, key)
#define PATHS_ROW_MODE(flag, key)
#define PATHS_ROW_LOCAL(flag, key)

/* The host paths of the extras: absolute (the client makes them so); the rest on the threadpool. */
static int check_paths(const struct start_params *p, char *why, size_t len)
{
	const struct {
		const char *flag;
		const json_t *list;
	} lists[] = {
#define XX(flag, short_name, key, type, where, value, help, label, trust) \
	UP_IF_PARAM_##where(PATHS_ROW_##type(flag, key))
		UP_SESSION_OPTIONS(XX)
#undef XX
	};
	json_t *v;
	size_t i;

	for (size_t l = 0; l < ELEMENTSOF(lists); l++)
		json_array_foreach (lists[l].list, i, v)
			if (json_string_value(v)[0] != '/' || strlen(json_string_value(v)) >= 4096)
				return snprintf(why, len, "%s: '%s' is not an absolute path",
						lists[l].flag, json_string_value(v)),
				       -EINVAL;
	return 0;
}

/* "/a:/b/c": every element absolute, none empty (the daemon's cwd is not the client's). */
static bool abs_list(const char *s)
{
	if (!*s || strlen(s) >= UP_MAX_KUBECONFIG_PATHS)
		return false;
	for (const char *p = s; p; p = strchr(p, ':') ? strchr(p, ':') + 1 : NULL)
		if (*p != '/')
			return false;
	return true;
}

/* How a message names a value: its flag, or FILE:LINE and key when a config file gave it. */
static const char *named(const json_t *from_files, const char *canon, const char *flag, char *buf,
			 size_t len)
{
	const char *at = json_string_value(json_object_get(from_files, canon));

	if (!at)
		return flag;
	(void)snprintf(buf, len, "%s: %s", at, canon);
	return buf;
}

/* The agent, its mode, the working folder and the --rules paths. */
static int check_who_where(const struct start_params *p, const struct up_sessions *all,
			   const json_t *from, char *why, size_t len)
{
	char at[512]; /* FILE:LINE: key, cut short for a very long path */
	const struct up_agent_impl *a = up_agent_find(p->agent);
	char known[256];
	size_t i;
	json_t *v;

	if (!a) {
		(void)up_agent_describe_all(known, sizeof(known));
		return snprintf(why, len, "unknown agent '%s'; known: %s", p->agent, known),
		       -EINVAL;
	}
	if (p->mode && *p->mode && !up_agent_find_mode(a, p->mode)) {
		const char *src = named(from, "mode", NULL, at, sizeof(at));
		(void)up_agent_describe_all(known, sizeof(known));
		return snprintf(why, len, "%s%sagent %s has no mode '%s'; known: %s",
				src ? src : "", src ? ": " : "", p->agent, p->mode, known),
		       -EINVAL;
	}
	if (!up_path_is_normal_abs(p->cwd))
		return snprintf(why, len,
				"the working folder '%s' must be an absolute, normalised path",
				p->cwd),
		       -EINVAL;
	if (!up_path_under(p->cwd, up_sessions_home(all)) ||
	    !strcmp(p->cwd, up_sessions_home(all)) || !strncmp(up_sessions_home(all), "/", 2))
		return snprintf(why, len,
				"the working folder %.300s is not inside your home %.300s: uplink "
				"mounts "
				"only folders under home into the agent; cd into a project first",
				p->cwd, up_sessions_home(all)),
		       -EINVAL;
	json_array_foreach (p->rules, i, v)
		if (json_string_value(v)[0] != '/')
			return snprintf(why, len, "--rules: '%s' is not an absolute path",
					json_string_value(v)),
			       -EINVAL;
	return 0;
}

static bool runtime_class_ok(const char *s)
{
	return !*s || dns_name(s); /* "": none */
}

/* The RuntimeClasses, images and registry asked for, by flag or config key. */
static int check_names(const struct start_params *p, const json_t *from, char *why, size_t len)
{
	static const char class_what[] = "is not a valid RuntimeClass name",
			  image_what[] = "is not an image reference (or host:port): no spaces, "
					 "quotes or backslashes";
	const struct {
		const char *canon, *flag, *value;
		bool (*ok)(const char *s);
		const char *what;
		int shown; /* how much of a wrong value the message quotes */
	} names[] = {
		{"agent_runtime_class", "--agent-runtime-class", p->agent_runtime_class,
		 runtime_class_ok, class_what, INT_MAX},
		{"mitm_runtime_class", "--mitm-runtime-class", p->mitm_runtime_class,
		 runtime_class_ok, class_what, INT_MAX},
		{"image", "--image", p->image, image_ref, image_what, 200},
		{"mitmproxy_image", "--mitmproxy-image", p->mitmproxy_image, image_ref, image_what,
		 200},
		{"registry_image", "--registry-image", p->registry_image, image_ref, image_what,
		 200},
		{"registry", "--registry", p->registry, image_ref, image_what, 200},
	};
	char at[512];

	for (size_t i = 0; i < ELEMENTSOF(names); i++)
		if (names[i].value && !names[i].ok(names[i].value))
			return snprintf(why, len, "%s: '%.*s' %s",
					named(from, names[i].canon, names[i].flag, at, sizeof(at)),
					names[i].shown, names[i].value, names[i].what),
			       -EINVAL;
	return 0;
}

/* The paths, kubeconfigs, profiles, RuntimeClasses and images asked for. */
static int check_sources(const struct start_params *p, const json_t *from, char *why, size_t len)
{
	int r;

	if ((r = check_paths(p, why, len)) < 0)
		return r;
	if ((p->kubeconfig && *p->kubeconfig && !abs_list(p->kubeconfig)) ||
	    (p->kubeconfig_default && *p->kubeconfig_default && !abs_list(p->kubeconfig_default)))
		return snprintf(why, len,
				"--kubeconfig: '%.300s' is not an absolute path (or a colon "
				"list of them, as $KUBECONFIG, shorter than %d bytes)",
				p->kubeconfig && *p->kubeconfig ? p->kubeconfig
								: p->kubeconfig_default,
				UP_MAX_KUBECONFIG_PATHS),
		       -EINVAL;
	/* The folder itself is read on the threadpool (daemon/ssh-keys.c). */
	if (p->ssh_key_dir && *p->ssh_key_dir &&
	    (p->ssh_key_dir[0] != '/' || strlen(p->ssh_key_dir) >= 4096))
		return snprintf(why, len, "--ssh-key-dir: '%s' is not an absolute path",
				p->ssh_key_dir),
		       -EINVAL;
	if ((r = up_aws_check_profiles(p->aws_profiles, why, len)) < 0)
		return r;
	return check_names(p, from, why, len);
}

/* --ttl and --idle-timeout, into `o`. */
static int check_limits(const struct start_params *p, const json_t *from, struct up_session_opts *o,
			char *why, size_t len)
{
	char at[512], err[256];

	o->ttl_s = UP_SESSION_DEFAULT_TTL_S;
	o->idle_s = UP_SESSION_DEFAULT_IDLE_S;
	if (p->ttl && up_duration_parse(p->ttl, &o->ttl_s, err, sizeof(err)) < 0)
		return snprintf(why, len, "%s: %s", named(from, "ttl", "--ttl", at, sizeof(at)),
				err),
		       -EINVAL;
	if (p->ttl && o->ttl_s < 60)
		return snprintf(why, len, "%s: %s is too short; give at least 1m",
				named(from, "ttl", "--ttl", at, sizeof(at)), p->ttl),
		       -EINVAL;
	if (p->idle_timeout && up_duration_parse(p->idle_timeout, &o->idle_s, err, sizeof(err)) < 0)
		return snprintf(why, len, "%s: %s",
				named(from, "idle_timeout", "--idle-timeout", at, sizeof(at)), err),
		       -EINVAL;
	/* Tests: UPLINK_DEBUG_TIME_DIVISOR=60 makes minutes seconds. */
	const char *div = up_knobs()->time_divisor;
	long d = div ? strtol(div, NULL, 10) : 1;
	if (d > 1) {
		o->ttl_s /= (uint64_t)d;
		o->idle_s /= (uint64_t)d;
	}
	return 0;
}

/* 0, or -EINVAL with a sentence naming the flag (or config line) and the value. */
static int check_start(const struct start_params *p, const struct up_sessions *all,
		       const json_t *from, struct up_session_opts *o, char *why, size_t len)
{
	int r = check_who_where(p, all, from, why, len);

	if (r >= 0)
		r = check_sources(p, from, why, len);
	if (r >= 0)
		r = check_limits(p, from, o, why, len);
	return r;
}

/* A parameter copied into struct up_session_asked, by its type in session-options.h. */
#define COPY_STR(key)                             \
	if (p->key && !(a->key = strdup(p->key))) \
		return -ENOMEM;
#define COPY_LIST(key)                                                  \
	if (!(a->key = p->key ? json_deep_copy(p->key) : json_array())) \
		return -ENOMEM;
#define COPY_BOOL(key)	   a->key = p->key;
#define COPY_STRING(key)   COPY_STR(key)
#define COPY_DURATION(key) COPY_STR(key)
#define COPY_PATH(key)	   COPY_STR(key)
#define COPY_PATHS(key)	   COPY_LIST(key)
#define COPY_RULES(key)	   COPY_LIST(key)
#define COPY_WORDS(key)	   COPY_LIST(key)
#define COPY_ARGS(key)	   COPY_LIST(key)
#define COPY_SPLIT(key)	   COPY_LIST(key)
#define COPY_MODE(key)
#define COPY_LOCAL(key)

/* Every parameter of session-options.h, as given; on failure up_session_opts_done() frees. */
static int copy_asked(const struct start_params *p, struct up_session_asked *a)
{
#define XX(flag, short_name, key, type, where, value, help, label, trust) \
	UP_IF_PARAM_##where(COPY_##type(key))
	UP_SESSION_OPTIONS(XX)
#undef XX
	return 0;
}

/* What the extras derive from the parameters: defaults, and "" as not given. */
static int fill_extra(const struct start_params *p, struct up_session_opts *o)
{
	struct up_session_extra *x = calloc(1, sizeof(*x));

	if (!x)
		return -ENOMEM;
	o->extra = x;
	/* --kubeconfig (or a config file's), else what the client's $KUBECONFIG names */
	x->kubeconfig = dup_or_null(p->kubeconfig && *p->kubeconfig ? p->kubeconfig
								    : p->kubeconfig_default);
	x->aws_profiles = p->aws_profiles ? json_deep_copy(p->aws_profiles) : json_array();
	if (p->ssh_key_dir && *p->ssh_key_dir && !(x->ssh_key_dir = strdup(p->ssh_key_dir)))
		return -ENOMEM;
	return x->aws_profiles ? 0 : -ENOMEM;
}

/* Warnings about what was asked, as progress lines to the client that asked. */
static void warn(struct up_request *req, const char *fmt, ...) _printf_(2, 3);
static void warn(struct up_request *req, const char *fmt, ...)
{
	char msg[1024];

	up_vformat(msg, sizeof(msg), fmt);
	log_warning("session.start: %s", msg);
	if (req->conn)
		(void)up_conn_notify(req->conn, "session.progress",
				     json_pack("{s:s, s:s, s:I, s:I}", "phase", "warning",
					       "message", msg, "done", (json_int_t)0, "total",
					       (json_int_t)0));
}

static void warn_start(struct up_request *req, const struct up_session_opts *o)
{
	const struct up_session_extra *x = o->extra;

	/* Either SSH flag alone is allowed, with a warning: keys but no TCP 22, or 22, no keys. */
	if (json_array_size(x->out.ssh_cidrs) > 0 && !x->ssh_key_dir) {
		char *cidrs = up_json_join(x->out.ssh_cidrs, ", ");
		warn(req, "TCP 22 egress to %s is open but no SSH keys are mounted",
		     cidrs ? cidrs : "?");
		free(cidrs);
	}
	if (x->ssh_key_dir && json_array_size(x->out.ssh_cidrs) == 0)
		warn(req,
		     "--ssh-key-dir without --ssh-cidr: SSH egress stays denied, so the agent has "
		     "keys but can reach nothing on TCP 22");
	if (o->asked.mitm_insecure)
		warn(req,
		     "--mitm-insecure: the mitm does not verify upstream TLS certificates; anyone "
		     "on the path can impersonate the servers the agent talks to");
	if (o->asked.mitm_debug)
		warn(req, "--mitm-debug: the mitm logs request and response headers and bodies, "
			  "including the credentials it injects; its log may hold secrets");
}

static int fill_opts(const struct start_params *p, const struct up_sessions *all,
		     struct up_session_opts *o)
{
	*o = (struct up_session_opts){.ttl_s = o->ttl_s, .idle_s = o->idle_s};
	if (copy_asked(p, &o->asked) < 0)
		return -ENOMEM;
	o->agent = strdup(p->agent);
	o->mode = dup_or_null(p->mode);
	o->cwd = strdup(p->cwd);
	o->mitm_image = dup_or_null(p->mitmproxy_image);
	o->registry_image = dup_or_null(p->registry_image);
	o->image = dup_or_null(p->image);
	o->registry = dup_or_null(p->registry);
	o->user = strdup(up_sessions_user(all));
	o->home = strdup(up_sessions_home(all));
	o->quiet = p->no_notifications;
	return o->agent && o->cwd && o->user && o->home ? fill_extra(p, o) : -ENOMEM;
}

static struct up_sessions *sessions_of(void *userdata)
{
	return up_manager_sessions(userdata);
}

static int start_checked(struct up_request *req, void *params, void *userdata,
			 const json_t *config_rules, const json_t *from_files)
{
	struct up_sessions *all = sessions_of(userdata);
	struct start_params *p = params;
	struct up_session_opts o = {0};
	struct up_session *s;
	char why[1024];
	int r;

	if (up_sessions_templates_error(all)) {
		up_request_errorf(req, UP_ERR_PREREQ_MISSING,
				  "sessions cannot start: %s; reinstall uplink "
				  "(./install.sh) or set UPLINK_DATA_DIR",
				  up_sessions_templates_error(all));
		return 0;
	}
	if (check_start(p, all, from_files, &o, why, sizeof(why)) < 0) {
		up_request_error(req, UP_ERR_INVALID_PARAMS, why);
		return 0;
	}
	r = fill_opts(p, all, &o);
	if (r >= 0)
		r = up_config_add_rules(o.asked.rules, config_rules); /* after the --rules files */
	if (r >= 0 && up_session_extra_check(o.extra, &o.asked, why, sizeof(why)) < 0) {
		up_session_opts_done(&o);
		up_request_error(req, UP_ERR_INVALID_PARAMS, why);
		return 0;
	}
	if (r >= 0)
		warn_start(req, &o);
	json_t *w;
	size_t k;
	json_array_foreach (json_object_get(from_files, "warnings"), k, w)
		warn(req, "%s", json_string_value(w));
	if (r < 0) {
		up_session_opts_done(&o);
		return r;
	}
	r = up_sessions_start(all, &o, &up_rpc_start_observer, req, &s);
	if (r < 0)
		return r;
	up_rpc_start_watch(req, s);
	return 0;
}

/* The config files first (config-file.c, off the loop); flags beat them. */
static int rpc_start(struct up_request *req, void *params, void *userdata)
{
	(void)params;
	return up_config_then(up_manager_loop(userdata), req, start_params,
			      up_sessions_home(sessions_of(userdata)), start_checked, userdata);
}

struct id_params {
	const char *id;
};

static const struct up_param id_params[] = {
	{"id", UP_PARAM_STRING, offsetof(struct id_params, id), UP_PARAM_MANDATORY, NULL},
	{0},
};

static struct up_session *find(struct up_request *req, void *userdata, const char *id)
{
	struct up_session *s = up_sessions_find(sessions_of(userdata), id);

	if (!s)
		up_request_errorf(
			req, UP_ERR_SESSION_NOT_FOUND,
			"no session '%s' (uplink list shows them; ids are 12 hex digits or "
			"the namespace name)",
			id);
	return s;
}

static int rpc_get(struct up_request *req, void *params, void *userdata)
{
	struct up_session *s = find(req, userdata, ((struct id_params *)params)->id);

	if (s)
		up_request_reply(req, up_session_describe(s));
	return 0;
}

static int rpc_stop(struct up_request *req, void *params, void *userdata)
{
	struct up_session *s = find(req, userdata, ((struct id_params *)params)->id);

	if (!s)
		return 0;
	if (up_session_stop(s, "stopped by the user") == -EALREADY) {
		up_request_errorf(req, UP_ERR_SESSION_ENDED, "session %s has already ended (%s)",
				  up_session_id(s),
				  up_session_state_to_name(up_session_get_state(s)));
		return 0;
	}
	up_request_reply(req, up_session_describe(s));
	return 0;
}

static int rpc_attach(struct up_request *req, void *params, void *userdata)
{
	struct up_session *s = find(req, userdata, ((struct id_params *)params)->id);
	char err[256];
	json_t *info;

	if (!s)
		return 0;
	info = up_session_attach_info(s, err, sizeof(err));
	if (!info)
		up_request_error(req, UP_ERR_SESSION_ENDED, err);
	else
		up_request_reply(req, info);
	return 0;
}

/*
 * session.hold: a client that attached keeps this request open; it ends (unanswered)
 * when the client goes, which is how the daemon counts attached clients (--idle-timeout).
 */
struct hold {
	struct up_sessions *all;
	char id[16];
};

static void hold_end(struct up_request *req, void *ud)
{
	struct hold *h = ud;
	struct up_session *s = up_sessions_find(h->all, h->id);

	(void)req;
	if (s)
		up_session_attached(s, -1);
	free(h);
}

static int rpc_hold(struct up_request *req, void *params, void *userdata)
{
	struct up_session *s = find(req, userdata, ((struct id_params *)params)->id);
	struct hold *h;

	if (!s)
		return 0;
	if (up_session_get_state(s) != UP_SESSION_RUNNING) {
		up_request_errorf(req, UP_ERR_SESSION_ENDED, "session %s is %s, not running",
				  up_session_id(s),
				  up_session_state_to_name(up_session_get_state(s)));
		return 0;
	}
	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->all = sessions_of(userdata);
	(void)snprintf(h->id, sizeof(h->id), "%s", up_session_id(s));
	up_session_attached(s, +1);
	up_request_set_cancel(req, hold_end, h);
	return 0;
}

struct extend_params {
	const char *id, *by;
};

static const struct up_param extend_params[] = {
	{"id", UP_PARAM_STRING, offsetof(struct extend_params, id), UP_PARAM_MANDATORY, NULL},
	{"by", UP_PARAM_STRING, offsetof(struct extend_params, by), UP_PARAM_MANDATORY, NULL},
	{0},
};

static int rpc_extend(struct up_request *req, void *params, void *userdata)
{
	struct extend_params *p = params;
	struct up_session *s = find(req, userdata, p->id);
	char err[256];
	uint64_t by;
	int r;

	if (!s)
		return 0;
	if (up_duration_parse(p->by, &by, err, sizeof(err)) < 0 || by == 0) {
		up_request_errorf(req, UP_ERR_INVALID_PARAMS, "%s",
				  by == 0 && !strstr(err, "invalid")
					  ? "the duration must be longer than 0s"
					  : err);
		return 0;
	}
	r = up_session_extend(s, by);
	if (r == -EALREADY) {
		up_request_errorf(req, UP_ERR_SESSION_ENDED, "session %s has already ended (%s)",
				  up_session_id(s),
				  up_session_state_to_name(up_session_get_state(s)));
		return 0;
	}
	if (r < 0) {
		up_request_errorf(req, UP_ERR_INVALID_PARAMS,
				  "cannot push the deadline of session %s "
				  "that far (at most %llu days from its start)",
				  up_session_id(s),
				  (unsigned long long)(UP_MAX_DURATION_S / 86400));
		return 0;
	}
	up_request_reply(req, up_session_describe(s));
	return 0;
}

struct list_params {
	bool all;
	json_t *columns;
};

static const struct up_param list_params[] = {
	{"all", UP_PARAM_BOOL, offsetof(struct list_params, all), 0, NULL},
	{"columns", UP_PARAM_STRV, offsetof(struct list_params, columns), UP_PARAM_NULLABLE, NULL},
	{0},
};

static int rpc_list(struct up_request *req, void *params, void *userdata)
{
	const struct list_params *p = params;
	struct up_sessions *all = sessions_of(userdata);
	struct up_cluster *c = up_sessions_cluster(all, NULL);
	const char *unknown = up_sessions_list_column_check(p->columns);
	json_t *res;
	char why[1536];

	if (json_array_size(p->columns) > UP_MAX_LIST_COLUMNS || unknown) {
		up_request_errorf(
			req, UP_ERR_INVALID_PARAMS,
			"columns: %s%s%s (at most %d of the fields session.list's objects have)",
			unknown ? "no session has a field '" : "too many", unknown ? unknown : "",
			unknown ? "'" : "", UP_MAX_LIST_COLUMNS);
		return 0;
	}
	res = p->columns ? json_pack("{s:O, s:o}", "columns", p->columns, "rows",
				     up_sessions_list(all, p->all, p->columns))
			 : json_pack("{s:o}", "sessions", up_sessions_list(all, p->all, NULL));
	if (!res)
		return -ENOMEM;
	/* Still an answer: our sessions are known from their records; say what may be missing. */
	if (!up_cluster_ready(c)) {
		up_cluster_why_not_ready(c, why, sizeof(why));
		(void)json_object_set_new(
			res, "warning",
			json_sprintf("%s, so this list shows this uplinkd's sessions as last "
				     "recorded and may lack other tools' (FOREIGN) ones; "
				     "uplink status shows the cluster's state, uplink doctor "
				     "checks it",
				     why));
	}
	up_request_reply(req, res);
	return 0;
}

/* A request waiting for its cluster's first sync: answered as soon as it ends. */
struct synced_call {
	struct up_request *req;
	void *params, *userdata;
	up_method_fn fn;
	struct up_waiter *wait;
};

static void synced_cancel(struct up_request *req, void *ud)
{
	struct synced_call *sc = ud;

	(void)req;
	up_waiter_cancel(sc->wait);
	free(sc);
}

static void synced_go(bool closing, void *ud)
{
	struct synced_call *sc = ud;
	struct up_request *req = sc->req;

	up_request_set_cancel(req, NULL, NULL);
	if (closing)
		up_request_error(
			req, UP_ERR_SHUTTING_DOWN,
			"uplinkd is shutting down; run the command again once it has restarted");
	else if (sc->fn(req, sc->params, sc->userdata) < 0)
		up_request_error(req, UP_ERR_INTERNAL_ERROR, NULL);
	free(sc);
}

/*
 * list and clean answer from the cluster's caches: right after uplinkd starts (the first
 * command often is what starts it) they wait for the first list, for at most
 * UP_CLUSTER_SYNC_WAIT_MS, rather than answer from an empty cache.
 */
static int after_first_sync(struct up_request *req, void *params, void *userdata,
			    struct up_cluster *c, up_method_fn fn)
{
	struct synced_call *sc;
	int r;

	if (!up_cluster_first_sync_pending(c))
		return fn(req, params, userdata);
	sc = calloc(1, sizeof(*sc));
	if (!sc)
		return -ENOMEM;
	*sc = (struct synced_call){.req = req, .params = params, .userdata = userdata, .fn = fn};
	r = up_cluster_wait(c, synced_go, sc, &sc->wait);
	if (r < 0) {
		free(sc);
		return r;
	}
	up_request_set_cancel(req, synced_cancel, sc);
	return 0;
}

static int rpc_list_synced(struct up_request *req, void *params, void *userdata)
{
	return after_first_sync(req, params, userdata,
				up_sessions_cluster(sessions_of(userdata), NULL), rpc_list);
}

static int rpc_clean_synced(struct up_request *req, void *params, void *userdata)
{
	const struct up_clean_params *p = params;

	return after_first_sync(req, params, userdata,
				up_sessions_cluster(sessions_of(userdata), p->deploy_context),
				up_rpc_session_clean);
}

/* Every session.* method waits for the records after a restart, so none answers "not found" for a
 * moment. */
static int gate(struct up_request *req, void *params, void *userdata, up_method_fn fn)
{
	struct up_sessions *all = sessions_of(userdata);

	if (up_sessions_loaded(all))
		return fn(req, params, userdata);
	return up_sessions_defer(all, req, params, fn, userdata);
}

#define GATED(fn)                                                                   \
	static int fn##_gated(struct up_request *req, void *params, void *userdata) \
	{                                                                           \
		return gate(req, params, userdata, fn);                             \
	}
GATED(rpc_start)
GATED(rpc_list_synced)
GATED(rpc_get)
GATED(rpc_stop)
GATED(rpc_attach)
GATED(rpc_hold)
GATED(rpc_extend)
GATED(rpc_clean_synced)
GATED(up_rpc_session_logs)
#undef GATED

const struct up_method up_rpc_session_methods[] = {
	{"session.start", start_params, sizeof(struct start_params), rpc_start_gated},
	{"session.list", list_params, sizeof(struct list_params), rpc_list_synced_gated},
	{"session.get", id_params, sizeof(struct id_params), rpc_get_gated},
	{"session.stop", id_params, sizeof(struct id_params), rpc_stop_gated},
	{"session.attach", id_params, sizeof(struct id_params), rpc_attach_gated},
	{"session.hold", id_params, sizeof(struct id_params), rpc_hold_gated},
	{"session.extend", extend_params, sizeof(struct extend_params), rpc_extend_gated},
	{"session.clean", up_clean_params, sizeof(struct up_clean_params), rpc_clean_synced_gated},
	{"session.logs", up_logs_params, sizeof(struct up_logs_params), up_rpc_session_logs_gated},
	{0},
};
