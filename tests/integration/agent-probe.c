/* SPDX-License-Identifier: Apache-2.0 */
/*
 * agent-probe: runs an agent's prepare() (agents/agent.h) as the daemon would on its
 * thread pool and prints the result as one JSON object, secrets included (the tests feed
 * it fixture credentials only):
 *
 *   agent-probe [--agent claude] [--mode M] --home DIR [--cwd DIR] [--state DIR]
 *               [--base DIR] [--now EPOCH] [--rules-only] [--debug] [-- ARGS...]
 *
 * {"ok": true, "auth_rules": "...", "expires_at": N, "warnings": [...], "aws_profiles": [...],
 *  "env": {...}, "volumes": [{"name", "kind", "mount_path", "read_only", "host_path",
 *  "host_path_type", "files": [{"key", "mount_path", "data"}]}], "entrypoint": [...],
 *  "command": [...]} or {"ok": false, "code": -errno, "error": "..."} (exit 1).
 */
#include <curl/curl.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agents/agent.h"
#include "knobs.h"

static json_t *strv(const char *const *v)
{
	json_t *a = json_array();

	for (size_t i = 0; v && v[i]; i++)
		(void)json_array_append_new(a, json_string(v[i]));
	return v ? a : (json_decref(a), json_null());
}

static json_t *volume_json(const struct up_agent_volume *v)
{
	static const char *const kinds[] = {"secret", "configmap", "hostpath", "emptydir"};
	json_t *files = json_array();
	json_t *o = json_pack("{s:s, s:s, s:b}", "name", v->name, "kind", kinds[v->kind],
			      "read_only", v->read_only);

	for (size_t i = 0; i < v->n_files; i++)
		(void)json_array_append_new(files,
					    json_pack("{s:s, s:s?, s:s%}", "key", v->files[i].key,
						      "mount_path", v->files[i].mount_path, "data",
						      v->files[i].data, v->files[i].len));
	(void)json_object_set_new(o, "files", files);
	if (v->mount_path)
		(void)json_object_set_new(o, "mount_path", json_string(v->mount_path));
	if (v->host_path)
		(void)json_object_set_new(o, "host_path", json_string(v->host_path));
	if (v->host_path_type)
		(void)json_object_set_new(o, "host_path_type", json_string(v->host_path_type));
	if (v->medium)
		(void)json_object_set_new(o, "medium", json_string(v->medium));
	if (v->size_limit)
		(void)json_object_set_new(o, "size_limit", json_string(v->size_limit));
	return o;
}

static json_t *result_json(const struct up_agent_prepared *p)
{
	json_t *env = json_object(), *vols = json_array(), *warn = json_array(),
	       *prof = json_array();

	for (size_t i = 0; i < p->contrib.n_env; i++)
		(void)json_object_set_new(env, p->contrib.env[i].name,
					  json_string(p->contrib.env[i].value));
	for (size_t i = 0; i < p->contrib.n_volumes; i++)
		(void)json_array_append_new(vols, volume_json(&p->contrib.volumes[i]));
	for (size_t i = 0; i < p->n_warnings; i++)
		(void)json_array_append_new(warn, json_string(p->warnings[i]));
	for (size_t i = 0; i < p->n_aws_profiles; i++)
		(void)json_array_append_new(prof, json_string(p->aws_profiles[i]));
	return json_pack("{s:b, s:s?, s:I, s:o, s:o, s:o, s:o, s:o, s:o, s:s?}", "ok", 1,
			 "auth_rules", p->auth_rules, "expires_at", (json_int_t)p->expires_at,
			 "warnings", warn, "aws_profiles", prof, "env", env, "volumes", vols,
			 "entrypoint", strv(p->contrib.entrypoint), "command",
			 strv(p->contrib.command), "memory_limit", p->contrib.memory_limit);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"agent", required_argument, NULL, 'a'}, {"mode", required_argument, NULL, 'm'},
		{"home", required_argument, NULL, 'h'},	 {"cwd", required_argument, NULL, 'c'},
		{"state", required_argument, NULL, 's'}, {"base", required_argument, NULL, 'b'},
		{"now", required_argument, NULL, 'n'},	 {"rules-only", no_argument, NULL, 'r'},
		{"debug", no_argument, NULL, 'd'},	 {0},
	};
	struct up_agent_input in = {.uid = getuid(),
				    .gid = getgid(),
				    .user = "probe",
				    .session_id = "0123456789ab",
				    .token_url = up_knobs()->token_url,
				    .ca_bundle = up_knobs()->ca_bundle,
				    .openai_token_url = up_knobs()->openai_token_url,
				    .google_token_url = up_knobs()->google_token_url};
	const char *agent = "claude";
	struct up_agent_prepared *p = NULL;
	const struct up_agent_impl *a;
	char err[2048] = "";
	json_t *out;
	int c, r;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'a': agent = optarg; break;
		case 'm': in.mode = optarg; break;
		case 'h': in.home = optarg; break;
		case 'c': in.cwd = optarg; break;
		case 's': in.state_dir = optarg; break;
		case 'b': in.base_dir = optarg; break;
		case 'n': in.now = (time_t)strtoll(optarg, NULL, 10); break;
		case 'r': in.rules_only = true; break;
		case 'd': in.debug = true; break;
		default: return 2;
		}
	}
	if (!in.cwd)
		in.cwd = in.home;
	in.args = (const char *const *)argv + optind;
	if (!(a = up_agent_find(agent))) {
		fprintf(stderr, "agent-probe: no agent %s\n", agent);
		return 2;
	}
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		return 2;
	r = up_agent_prepare(a, &in, &p, err, sizeof(err));
	out = r < 0 ? json_pack("{s:b, s:i, s:s}", "ok", 0, "code", r, "error", err)
		    : result_json(p);
	if (out)
		(void)json_dumpf(out, stdout, JSON_COMPACT);
	putchar('\n');
	json_decref(out);
	up_agent_prepared_free(p);
	curl_global_cleanup();
	return r < 0 ? 1 : 0;
}
