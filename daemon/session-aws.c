/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A session's AWS profiles (daemon/aws.h; docs/architecture.md, "What a session borrows from
 * the host"), on the threadpool while PREPARING: --aws-profiles in order, then the agent's
 * own, each once; the agent's dummy INI; the real credentials exported on the host for the
 * mitm's Secret.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agents/agent.h"
#include "aws.h"
#include "rules.h"
#include "session-private.h"

static int merge_agent_profiles(struct up_session *s, json_t *list)
{
	const char *const *names;
	size_t n = session_agent_aws_profiles(s, &names);
	json_t *v;
	size_t j;

	for (size_t i = 0; i < n; i++) {
		bool seen = false;
		json_array_foreach (list, j, v)
			seen = seen || streq(json_string_value(v), names[i]);
		if (!seen && json_array_append_new(list, json_string(names[i])) < 0)
			return -ENOMEM;
	}
	return 0;
}

/* Flags first (checked on the loop), de-duplicated keeping the first. */
static json_t *dedup(const json_t *given)
{
	json_t *out = json_array(), *v, *w;
	size_t i, j;

	json_array_foreach (given, i, v) {
		bool seen = false;
		json_array_foreach (out, j, w)
			seen = seen || json_equal(v, w);
		if (out && !seen && json_array_append(out, v) < 0)
			return json_decref(out), NULL;
	}
	return out;
}

int session_aws_prepare(struct up_session *s)
{
	struct up_session_extra *x = s->o.extra;
	char why[1024] = "";
	json_t *all;
	int r;

	if (!x)
		return 0;
	all = dedup(x->aws_profiles);
	r = all ? merge_agent_profiles(s, all) : -ENOMEM;
	if (r >= 0)
		r = up_aws_check_profiles(all, why, sizeof(why)); /* the agent's names too */
	if (r >= 0) {
		json_decref(x->aws_profiles);
		x->aws_profiles = TAKE_PTR(all);
	}
	json_decref(all);
	if (r >= 0 && json_array_size(x->aws_profiles) == 0)
		return 0;
	if (r >= 0 && !(x->out.aws_ini = up_aws_dummy_ini(x->aws_profiles)))
		r = -ENOMEM;
	if (r >= 0)
		r = up_aws_export_all(x->aws_profiles, &x->out.aws_creds_json, &x->aws_expires_at,
				      why, sizeof(why));
	if (r < 0) {
		s->prep_e = r == -ENOMEM ? UP_ERR_INTERNAL_ERROR : UP_ERR_PREREQ_MISSING;
		if (!why[0])
			(void)snprintf(why, sizeof(why), "cannot prepare the AWS profiles: %s",
				       strerror(-r));
		s->prep_error = strdup(why);
	}
	return r;
}

void session_aws_warn_rules(struct up_session *s, json_t *warnings)
{
	const struct up_session_extra *x = s->o.extra;
	const struct up_rule *r;

	/* The mitm signs what the rules let through, under rules naming AWS hosts; uplink adds no
	 * rule of its own for AWS. */
	if (!x || json_array_size(x->aws_profiles) == 0)
		return;
	r = up_ruleset_match(s->rs, "POST", "sts.amazonaws.com", "/");
	if (r && up_rule_aws_sign(r))
		return;
	(void)json_array_append_new(warnings,
				    json_string("AWS profiles are set up, but no rule re-signs "
						"POST to AWS (sts.amazonaws.com): the "
						"proxy refuses requests made with the dummy keys "
						"under the read-only catch-all, so "
						"add a rules file naming the AWS hosts the agent "
						"needs (examples/rules/aws.yaml)"));
}
