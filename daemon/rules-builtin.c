/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The agents' layers of the rules: the auth rules an agent's prepare() makes (the
 * anthropic OAuth rule needs the host's credentials, so this blocks: callers run it on
 * the thread pool) and the default rules file of its build context,
 * agents/<name>/default-rules.yaml under the data folder.
 */
#include <errno.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agents/agent.h"
#include "knobs.h"
#include "rules.h"

int up_ruleset_load_agent_prepared(struct up_ruleset *rs, const struct up_agent_impl *a,
				   const struct up_agent_prepared *p, json_t *problems)
{
	char path[PATH_MAX], label[256];
	int r = 0;

	if (p && p->auth_rules) {
		(void)snprintf(label, sizeof(label), "agent:%s:auth", a->name);
		r = up_ruleset_load_string(rs, UP_LAYER_AUTH, label, p->auth_rules,
					   p->auth_rules_len, problems);
		if (r < 0)
			return r;
	}
	if (up_agent_rules_path(a, up_knobs()->data_dir, path, sizeof(path)) < 0) {
		(void)json_array_append_new(
			problems,
			json_sprintf("agent %s: the path of its default rules is too long",
				     a->name));
		return -ENAMETOOLONG;
	}
	(void)snprintf(label, sizeof(label), "agents/%s/%s", a->context_dir, a->default_rules);
	return up_ruleset_load_file(rs, UP_LAYER_AGENT, path, label, problems);
}

int up_agent_input_self(struct up_agent_input *in, char *buf, size_t len)
{
	struct passwd pw, *res = NULL;
	const char *home = up_knobs()->home;

	if (getpwuid_r(getuid(), &pw, buf, len, &res) != 0 || !res)
		return -ENOENT;
	in->uid = pw.pw_uid;
	in->gid = pw.pw_gid;
	in->user = pw.pw_name;
	in->home = home && home[0] == '/' ? home : pw.pw_dir;
	return 0;
}

int up_ruleset_load_agent_auth(struct up_ruleset *rs, const char *agent, const char *mode,
			       json_t *problems, char *auth_err, size_t auth_err_len)
{
	_cleanup_(up_agent_prepared_freep) struct up_agent_prepared *p = NULL;
	const struct up_agent_impl *a = up_agent_find(agent);
	struct up_agent_input in = {.mode = mode,
				    .rules_only = true,
				    .token_url = up_knobs()->token_url,
				    .ca_bundle = up_knobs()->ca_bundle,
				    .openai_token_url = up_knobs()->openai_token_url,
				    .google_token_url = up_knobs()->google_token_url};
	char known[256], pwbuf[4096];
	int r;

	auth_err[0] = '\0';
	if (!a || !up_agent_find_mode(a, mode)) {
		(void)up_agent_describe_all(known, sizeof(known));
		(void)json_array_append_new(
			problems,
			a ? json_sprintf("agent %s has no mode '%s'; known: %s", agent, mode, known)
			  : json_sprintf("unknown agent '%s'; known: %s", agent, known));
		return -ENOENT;
	}
	if (up_agent_input_self(&in, pwbuf, sizeof(pwbuf)) < 0) {
		(void)snprintf(auth_err, auth_err_len, "uid %u has no passwd entry",
			       (unsigned)getuid());
		return -ENOENT;
	}
	r = up_agent_prepare(a, &in, &p, auth_err, auth_err_len);
	if (r < 0)
		return r;
	return up_ruleset_load_agent_prepared(rs, a, p, problems);
}

int up_ruleset_load_agent(struct up_ruleset *rs, const char *agent, const char *mode,
			  json_t *problems)
{
	char err[1024];
	int r = up_ruleset_load_agent_auth(rs, agent, mode, problems, err, sizeof(err));

	if (r < 0 && *err)
		(void)json_array_append_new(problems, json_string(err));
	return r;
}
