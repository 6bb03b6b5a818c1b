/* SPDX-License-Identifier: Apache-2.0 */
/* Session records as jansson objects: building, checking, reading and changing one. */
#include "store.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "bounds.h"

static const struct field {
	const char *key;
	json_type type;
	bool nullable;
	bool nonempty;
} fields[] = {
	{"version", JSON_INTEGER, false, false},       {"id", JSON_STRING, false, true},
	{"namespace", JSON_STRING, false, true},       {"state", JSON_STRING, false, true},
	{"reason", JSON_STRING, false, false},	       {"agent", JSON_STRING, false, true},
	{"mode", JSON_STRING, false, false},	       {"cwd", JSON_STRING, false, true},
	{"deploy_context", JSON_STRING, false, false}, {"created_at", JSON_INTEGER, false, false},
	{"expires_at", JSON_INTEGER, false, false},    {"idle_timeout", JSON_INTEGER, false, false},
	{"updated_at", JSON_INTEGER, false, false},    {"exit_code", JSON_INTEGER, true, false},
};

json_t *up_record_new(const char *id, const char *agent, const char *mode, const char *cwd,
		      const char *deploy_context, int64_t now, uint64_t ttl, uint64_t idle_timeout)
{
	char ns[UP_NAMESPACE_MAX];

	if (!up_session_id_valid(id) || !agent || !cwd || ttl > UP_MAX_DURATION_S ||
	    idle_timeout > UP_MAX_DURATION_S)
		return NULL;
	(void)snprintf(ns, sizeof(ns), UP_SESSION_NS_PREFIX "%s", id);
	return json_pack("{s:i, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:n}",
			 "version", UP_RECORD_VERSION, "id", id, "namespace", ns, "state",
			 up_session_state_to_name(UP_SESSION_PREPARING), "reason", "", "agent",
			 agent, "mode", mode ? mode : "", "cwd", cwd, "deploy_context",
			 deploy_context ? deploy_context : "", "created_at", (json_int_t)now,
			 "expires_at", (json_int_t)(now + (int64_t)ttl), "idle_timeout",
			 (json_int_t)idle_timeout, "updated_at", (json_int_t)now, "exit_code");
}

static const char *type_name(json_type t)
{
	return t == JSON_STRING ? "a string" : "an integer";
}

static int check_renewal(const json_t *rec, char *err, size_t err_len);

static int check_fields(const json_t *rec, char *err, size_t err_len)
{
	for (size_t i = 0; i < ELEMENTSOF(fields); i++) {
		const struct field *f = &fields[i];
		json_t *v = json_object_get(rec, f->key);

		if (!v) {
			(void)snprintf(err, err_len, "it lacks the key '%s'", f->key);
			return -EINVAL;
		}
		if (json_is_null(v) && f->nullable)
			continue;
		if (json_typeof(v) != f->type) {
			(void)snprintf(err, err_len, "its '%s' is not %s%s", f->key,
				       type_name(f->type), f->nullable ? " or null" : "");
			return -EINVAL;
		}
		if (f->nonempty && !*json_string_value(v)) {
			(void)snprintf(err, err_len, "its '%s' is empty", f->key);
			return -EINVAL;
		}
	}
	return 0;
}

int up_record_check(const json_t *rec, const char *file_id, char *err, size_t err_len)
{
	const char *id, *ns, *state;
	json_int_t version, code;
	int r;

	if (!json_is_object(rec)) {
		(void)snprintf(err, err_len, "it is not a JSON object");
		return -EINVAL;
	}
	r = check_fields(rec, err, err_len);
	if (r < 0)
		return r;
	version = json_integer_value(json_object_get(rec, "version"));
	id = up_record_id(rec);
	ns = up_record_namespace(rec);
	state = json_string_value(json_object_get(rec, "state"));
	code = json_integer_value(json_object_get(rec, "exit_code"));
	if (version != UP_RECORD_VERSION)
		(void)snprintf(err, err_len, "its version %" JSON_INTEGER_FORMAT " is not %d",
			       version, UP_RECORD_VERSION);
	else if (!up_session_id_valid(id))
		(void)snprintf(err, err_len, "its id '%.64s' is not 12 lowercase hex digits", id);
	else if (file_id && !streq(id, file_id))
		(void)snprintf(err, err_len, "it holds id '%s', but its file is named '%.64s.json'",
			       id, file_id);
	else if (!startswith(ns, UP_SESSION_NS_PREFIX) ||
		 !streq(ns + strlen(UP_SESSION_NS_PREFIX), id))
		(void)snprintf(err, err_len,
			       "its namespace '%.80s' is not '" UP_SESSION_NS_PREFIX "%s'", ns, id);
	else if (up_session_state_from_name(state) < 0)
		(void)snprintf(err, err_len, "its state '%.64s' is not a session state", state);
	else if (up_record_idle_timeout(rec) < 0)
		(void)snprintf(err, err_len, "its idle_timeout is negative");
	else if (code < INT_MIN || code > INT_MAX)
		(void)snprintf(err, err_len,
			       "its exit_code %" JSON_INTEGER_FORMAT " is out of range", code);
	else
		return check_renewal(rec, err, err_len);
	return -EINVAL;
}

/* The optional flags: `key`: true, absent when false. */
static int set_flag(json_t *rec, const char *key, bool on)
{
	if (on)
		return json_object_set_new(rec, key, json_true()) < 0 ? -ENOMEM : 0;
	(void)json_object_del(rec, key);
	return 0;
}

bool up_record_quiet(const json_t *rec)
{
	return json_is_true(json_object_get(rec, "quiet"));
}

int up_record_set_quiet(json_t *rec, bool quiet)
{
	return set_flag(rec, "quiet", quiet);
}

bool up_record_ask(const json_t *rec)
{
	return json_is_true(json_object_get(rec, "ask"));
}

int up_record_set_ask(json_t *rec, bool ask)
{
	return set_flag(rec, "ask", ask);
}

static const char *get_str(const json_t *rec, const char *key)
{
	return json_string_value(json_object_get(rec, key));
}

static int64_t get_int(const json_t *rec, const char *key)
{
	return (int64_t)json_integer_value(json_object_get(rec, key));
}

const char *up_record_id(const json_t *rec)
{
	return get_str(rec, "id");
}

const char *up_record_namespace(const json_t *rec)
{
	return get_str(rec, "namespace");
}

enum up_session_state up_record_state(const json_t *rec)
{
	return up_session_state_from_name(get_str(rec, "state"));
}

const char *up_record_reason(const json_t *rec)
{
	return get_str(rec, "reason");
}

const char *up_record_agent(const json_t *rec)
{
	return get_str(rec, "agent");
}

const char *up_record_mode(const json_t *rec)
{
	return get_str(rec, "mode");
}

const char *up_record_cwd(const json_t *rec)
{
	return get_str(rec, "cwd");
}

const char *up_record_deploy_context(const json_t *rec)
{
	return get_str(rec, "deploy_context");
}

int64_t up_record_created_at(const json_t *rec)
{
	return get_int(rec, "created_at");
}

int64_t up_record_expires_at(const json_t *rec)
{
	return get_int(rec, "expires_at");
}

int64_t up_record_idle_timeout(const json_t *rec)
{
	return get_int(rec, "idle_timeout");
}

int64_t up_record_updated_at(const json_t *rec)
{
	return get_int(rec, "updated_at");
}

bool up_record_exit_code(const json_t *rec, int *ret)
{
	json_t *v = json_object_get(rec, "exit_code");

	if (!json_is_integer(v))
		return false;
	*ret = (int)json_integer_value(v);
	return true;
}

static int set_int(json_t *rec, const char *key, int64_t v)
{
	return json_object_set_new(rec, key, json_integer((json_int_t)v)) < 0 ? -ENOMEM : 0;
}

int up_record_set_state(json_t *rec, enum up_session_state to, const char *reason, int64_t now)
{
	json_t *name, *why;

	if (!up_session_state_can_move(up_record_state(rec), to))
		return -EINVAL;
	name = json_string(up_session_state_to_name(to));
	why = json_string(reason ? reason : "");
	if (!name || !why || json_object_set_new(rec, "state", name) < 0) {
		json_decref(why);
		return -ENOMEM;
	}
	if (json_object_set_new(rec, "reason", why) < 0)
		return -ENOMEM;
	return set_int(rec, "updated_at", now);
}

int up_record_set_exit_code(json_t *rec, int exit_code, int64_t now)
{
	int r = set_int(rec, "exit_code", exit_code);

	return r < 0 ? r : set_int(rec, "updated_at", now);
}

int up_record_set_expires_at(json_t *rec, int64_t expires_at, int64_t now)
{
	int r = set_int(rec, "expires_at", expires_at);

	return r < 0 ? r : set_int(rec, "updated_at", now);
}

/* ---- what an adopting daemon needs to go on renewing credentials ---- */

static const char *const renewal_ints[] = {"aws_expires_at", "login_expires_at", "exec_refresh_s"};

static int check_renewal(const json_t *rec, char *err, size_t err_len)
{
	json_t *p = json_object_get(rec, "aws_profiles"), *v;
	size_t i;

	if (p && (!json_is_array(p) || json_array_size(p) > UP_MAX_AWS_PROFILES)) {
		(void)snprintf(err, err_len,
			       "its 'aws_profiles' is not an array of at most %d names",
			       UP_MAX_AWS_PROFILES);
		return -EINVAL;
	}
	json_array_foreach (p, i, v)
		if (!json_is_string(v) || !*json_string_value(v)) {
			(void)snprintf(err, err_len,
				       "its 'aws_profiles' holds something not a name");
			return -EINVAL;
		}
	for (i = 0; i < ELEMENTSOF(renewal_ints); i++) {
		v = json_object_get(rec, renewal_ints[i]);
		if (v && (!json_is_integer(v) || json_integer_value(v) < 0)) {
			(void)snprintf(err, err_len, "its '%s' is not a non-negative integer",
				       renewal_ints[i]);
			return -EINVAL;
		}
	}
	return 0;
}

int up_record_set_renewal(json_t *rec, const json_t *aws_profiles, int64_t aws_expires_at,
			  int64_t login_expires_at, uint64_t exec_refresh_s)
{
	json_t *p = aws_profiles ? json_deep_copy(aws_profiles) : json_array();

	if (!p || json_object_set_new(rec, "aws_profiles", p) < 0)
		return -ENOMEM;
	if (set_int(rec, "aws_expires_at", aws_expires_at > 0 ? aws_expires_at : 0) < 0 ||
	    set_int(rec, "login_expires_at", login_expires_at > 0 ? login_expires_at : 0) < 0 ||
	    set_int(rec, "exec_refresh_s",
		    exec_refresh_s <= INT64_MAX ? (int64_t)exec_refresh_s : 0) < 0)
		return -ENOMEM;
	return 0;
}

int up_record_set_aws_expires_at(json_t *rec, int64_t expires_at)
{
	return set_int(rec, "aws_expires_at", expires_at > 0 ? expires_at : 0);
}

int up_record_set_login_expires_at(json_t *rec, int64_t expires_at)
{
	return set_int(rec, "login_expires_at", expires_at > 0 ? expires_at : 0);
}

const json_t *up_record_aws_profiles(const json_t *rec)
{
	json_t *p = json_object_get(rec, "aws_profiles");

	return json_array_size(p) ? p : NULL;
}

bool up_record_has_renewal(const json_t *rec)
{
	return json_object_get(rec, "login_expires_at") != NULL;
}

int64_t up_record_aws_expires_at(const json_t *rec)
{
	return get_int(rec, "aws_expires_at");
}

int64_t up_record_login_expires_at(const json_t *rec)
{
	return get_int(rec, "login_expires_at");
}

uint64_t up_record_exec_refresh_s(const json_t *rec)
{
	return (uint64_t)get_int(rec, "exec_refresh_s");
}
