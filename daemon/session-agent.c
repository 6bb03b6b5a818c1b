/* SPDX-License-Identifier: Apache-2.0 */
/* The agent's part of a session (agents/agent.h), run on the threadpool. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "agents/agent.h"
#include "knobs.h"
#include "rules.h"
#include "session-private.h"
#include "store.h"

struct session_agent {
	const struct up_agent_impl *impl;
	struct up_agent_prepared *p;
	const char **args;
};

int session_agent_prepare(struct up_session *s, char *err, size_t len)
{
	struct session_agent *a = calloc(1, sizeof(*a));
	char dir[4096];
	size_t n = json_array_size(s->o.asked.args), i;
	json_t *v;
	int r;

	if (!a)
		return -ENOMEM;
	s->agent = a;
	a->impl = up_agent_find(s->o.agent);
	if (!a->impl) {
		char known[256];
		(void)up_agent_describe_all(known, sizeof(known));
		(void)snprintf(err, len, "unknown agent '%s'; known: %s", s->o.agent, known);
		return -EINVAL;
	}
	a->args = calloc(n + 1, sizeof(char *));
	if (!a->args)
		return -ENOMEM;
	json_array_foreach (s->o.asked.args, i, v)
		a->args[i] = json_string_value(v);
	r = up_store_session_dir(s->all->store, s->id, dir, sizeof(dir));
	if (r >= 0 && !s->o.asked.dry_run && mkdir(dir, 0700) < 0 && errno != EEXIST)
		r = -errno;
	if (r < 0) {
		(void)snprintf(err, len, "cannot create the session folder %s: %s", dir,
			       strerror(-r));
		return r;
	}
	uid_t uid;
	gid_t gid;
	session_host_ids(&uid, &gid);
	struct up_agent_input in = {
		.mode = s->o.mode,
		.home = s->o.home,
		.uid = uid,
		.gid = gid,
		.user = s->o.user,
		.cwd = s->o.cwd,
		.args = a->args,
		.session_id = s->id,
		.state_dir = dir,
		.dry_run = s->o.asked.dry_run,
		.debug = s->o.asked.debug,
		.token_url = up_knobs()->token_url,
		.ca_bundle = up_knobs()->ca_bundle,
		.openai_token_url = up_knobs()->openai_token_url,
		.google_token_url = up_knobs()->google_token_url,
	};
	return up_agent_prepare(a->impl, &in, &a->p, err, len);
}

int session_agent_rules(struct up_session *s, json_t *problems)
{
	return up_ruleset_load_agent_prepared(s->rs, s->agent->impl, s->agent->p, problems);
}

const struct up_agent_contrib *session_agent_contrib(const struct up_session *s)
{
	return s->agent && s->agent->p ? &s->agent->p->contrib : NULL;
}

int session_agent_context(const struct up_session *s, char *buf, size_t len, const char **name)
{
	const struct up_agent_impl *impl = s->agent ? s->agent->impl : up_agent_find(s->o.agent);

	if (!impl)
		return -ENOENT;
	*name = impl->context_dir;
	return up_agent_data_dir(up_knobs()->data_dir, buf, len);
}

const char *const *session_agent_attach_argv(const struct up_session *s)
{
	const struct up_agent_impl *impl = s->agent ? s->agent->impl : up_agent_find(s->o.agent);

	return impl ? impl->attach_argv : NULL;
}

void session_agent_free(struct up_session *s)
{
	if (!s->agent)
		return;
	up_agent_prepared_free(s->agent->p);
	free(s->agent->args);
	free(s->agent);
	s->agent = NULL;
}

int session_agent_warnings(const struct up_session *s, json_t *warnings)
{
	const struct up_agent_prepared *p = s->agent ? s->agent->p : NULL;

	for (size_t i = 0; p && i < p->n_warnings; i++)
		if (json_array_append_new(warnings, json_string(p->warnings[i])) < 0)
			return -ENOMEM;
	return 0;
}

size_t session_agent_aws_profiles(const struct up_session *s, const char *const **ret)
{
	if (!s->agent || !s->agent->p) {
		*ret = NULL;
		return 0;
	}
	*ret = s->agent->p->aws_profiles;
	return s->agent->p->n_aws_profiles;
}

time_t session_agent_expires_at(const struct up_session *s)
{
	return s->agent && s->agent->p ? s->agent->p->expires_at : 0;
}
