/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the renderer's unit tests share: the templates of the source tree loaded once, a
 * session CA, a valid spec with an agent's contribution, a path language to read the
 * rendered objects (at(), find()) and rows that check one field each (check_row()).
 * Include after <cmocka.h>.
 */
#pragma once

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ca.h"
#include "manifests.h"

/* tests/data/../../manifests: the source tree's templates. */
#define MANIFESTS  UP_TEST_DATA_DIR "/../../manifests"
#define ID	   "0123456789ab"
#define NS	   "agent-uplink-" ID
#define CREATED	   ((time_t)1795942800) /* 2026-11-29T09:00:00Z */
#define EXPIRES	   (CREATED + 86400)
#define SENTINEL   "uplink-sentinel"
#define CLUSTER_IP "10.43.12.34"

static struct up_manifests *tpl;
static struct up_ca *ca;
static json_t *rules;

static const struct up_env agent_env[] = {{"CLAUDE_CONFIG_DIR", "/home/u/.claude"}};
static const struct up_agent_file settings_files[] = {
	{"settings.json", "{\"theme\":\"dark\"}", 16, "/home/u/.claude/settings.json"},
};
static const struct up_agent_file md_files[] = {{"CLAUDE.md", "# sandbox\n", 10, NULL}};
static const struct up_agent_volume agent_volumes[] = {
	{.kind = UP_AGENT_VOL_SECRET,
	 .name = "claude-settings",
	 .files = settings_files,
	 .n_files = 1,
	 .read_only = true},
	{.kind = UP_AGENT_VOL_CONFIGMAP,
	 .name = "claude-md",
	 .files = md_files,
	 .n_files = 1,
	 .mount_path = "/etc/claude-md",
	 .read_only = true},
	{.kind = UP_AGENT_VOL_HOSTPATH,
	 .name = "cwd",
	 .host_path = "/home/u/src/p",
	 .host_path_type = "Directory",
	 .mount_path = "/home/u/src/p"},
	{.kind = UP_AGENT_VOL_EMPTYDIR,
	 .name = "docker-lib",
	 .medium = "Memory",
	 .size_limit = "2Gi",
	 .mount_path = "/var/lib/docker"},
};
static const char *const agent_cmd[] = {"claude", "--allow-dangerously-skip-permissions", NULL};

static inline struct up_session_spec base_spec(void)
{
	return (struct up_session_spec){
		.id = ID,
		.owner = "5f3c2a1b9d8e7f60",
		.created_at = CREATED,
		.expires_at = EXPIRES,
		.cwd = "/home/u/src/p",
		.agent = "claude",
		.mode = "anthropic",
		.uid = 1000,
		.gid = 1001,
		.user = "u",
		.home = "/home/u",
		.agent_image = "localhost:5000/agent-uplink-claude:abc123",
		.mitm_image = "mitmproxy/mitmproxy:12.1.1",
		.rules = rules,
		.ca_cert_pem = ca->cert_pem,
		.ca_key_pem = ca->key_pem,
		.mitm_cluster_ip = CLUSTER_IP,
		.contrib = {.env = agent_env,
			    .n_env = 1,
			    .volumes = agent_volumes,
			    .n_volumes = 4,
			    .command = agent_cmd},
	};
}

static inline int setup(void **state)
{
	char err[512] = "";

	if (up_manifests_load(MANIFESTS, &tpl, err, sizeof(err)) < 0)
		fail_msg("load: %s", err);
	if (up_ca_new(ID, CREATED, EXPIRES, &ca, err, sizeof(err)) < 0)
		fail_msg("ca: %s", err);
	rules = json_loads("{\"version\":1,\"rules\":[{\"name\":\"claude-auth\",\"layer\":\"auth\","
			   "\"hosts\":[\"api\\\\.anthropic\\\\.com\"],\"inject\":{\"headers\":"
			   "{\"Authorization\":\"Bearer " SENTINEL "-oauth\"}}}]}",
			   0, NULL);
	assert_non_null(rules);
	return 0;
}

static inline int teardown(void **state)
{
	tpl = up_manifests_free(tpl);
	ca = up_ca_free(ca);
	json_decref(rules);
	return 0;
}

static inline json_t *render(const struct up_session_spec *s)
{
	json_t *objs = NULL;
	char err[512] = "";

	if (up_manifests_render(tpl, s, &objs, err, sizeof(err)) < 0)
		fail_msg("render: %s", err);
	return objs;
}

/* ---------------------------------------------------------------- paths */

/*
 * "spec.containers[name=main].env[name=HOME].value": keys split on '.', with '~' standing
 * for a '.' inside a key (uplink~dev/session); [N] indexes, [k=v] picks the element whose
 * k is the string v.
 */
static inline json_t *at(json_t *v, const char *path)
{
	char buf[512];

	(void)snprintf(buf, sizeof(buf), "%s", path);
	for (char *t = buf, *next; v && t; t = next) {
		int depth = 0;
		for (next = t; *next && (*next != '.' || depth); next++)
			depth += *next == '[' ? 1 : *next == ']' ? -1 : 0;
		if (*next)
			*next++ = '\0';
		else
			next = NULL;
		char *br = strchr(t, '[');
		if (br != t) {
			if (br)
				*br = '\0';
			for (char *p = t; *p; p++)
				if (*p == '~')
					*p = '.';
			v = json_object_get(v, t);
			if (br)
				*br = '[';
		}
		for (; v && br; br = strchr(br + 1, '[')) {
			char sel[128], *eq;
			(void)snprintf(sel, sizeof(sel), "%.*s", (int)(strchr(br, ']') - br - 1),
				       br + 1);
			if (!(eq = strchr(sel, '='))) {
				v = json_array_get(v, strtoul(sel, NULL, 10));
				continue;
			}
			*eq = '\0';
			json_t *e, *found = NULL;
			size_t i;
			json_array_foreach (v, i, e) {
				const char *s = json_string_value(json_object_get(e, sel));
				if (s && streq(s, eq + 1))
					found = e;
			}
			v = found;
		}
	}
	return v;
}

static inline json_t *find(json_t *objs, const char *kind, const char *name)
{
	json_t *o;
	size_t i;

	json_array_foreach (objs, i, o)
		if (streq(json_string_value(json_object_get(o, "kind")), kind) &&
		    streq(json_string_value(at(o, "metadata.name")), name))
			return o;
	return NULL;
}

enum check { STR, INT, TRUE_, FALSE_, ABSENT, EMPTY, SIZE, NO_PORT_53 };

struct row {
	const char *kind, *name, *path;
	enum check check;
	const char *str;
	long long num;
};

static inline void check_row(json_t *objs, const struct row *w)
{
	json_t *o = find(objs, w->kind, w->name);
	json_t *v = o ? at(o, w->path) : NULL;
	char *dump = NULL;

	if (!o)
		fail_msg("%s/%s not rendered", w->kind, w->name);
	switch (w->check) {
	case STR:
		if (!json_is_string(v) || !streq(json_string_value(v), w->str))
			fail_msg("%s/%s %s: want \"%s\", got %s", w->kind, w->name, w->path, w->str,
				 v ? (dump = json_dumps(v, JSON_ENCODE_ANY)) : "nothing");
		break;
	case INT:
		if (!json_is_integer(v) || json_integer_value(v) != w->num)
			fail_msg("%s/%s %s: want %lld", w->kind, w->name, w->path, w->num);
		break;
	case TRUE_:
	case FALSE_:
		if (!json_is_boolean(v) || json_is_true(v) != (w->check == TRUE_))
			fail_msg("%s/%s %s: want %s", w->kind, w->name, w->path,
				 w->check == TRUE_ ? "true" : "false");
		break;
	case ABSENT:
		if (v)
			fail_msg("%s/%s %s: want absent", w->kind, w->name, w->path);
		break;
	case EMPTY:
		if (!(json_is_object(v) && json_object_size(v) == 0) &&
		    !(json_is_array(v) && json_array_size(v) == 0))
			fail_msg("%s/%s %s: want empty", w->kind, w->name, w->path);
		break;
	case SIZE:
		if ((json_is_array(v) ? json_array_size(v) : json_object_size(v)) != (size_t)w->num)
			fail_msg("%s/%s %s: want %lld entries", w->kind, w->name, w->path, w->num);
		break;
	case NO_PORT_53:
		dump = json_dumps(v, JSON_COMPACT);
		if (strstr(dump, "\"port\":53") || strstr(dump, "kube-dns"))
			fail_msg("%s/%s: DNS is open: %s", w->kind, w->name, dump);
		break;
	}
	free(dump);
}
