/* SPDX-License-Identifier: Apache-2.0 */
/* Ask mode: the rules the user approved for a session, kept in its rules Secret (session.h). */
#include <errno.h>
#include <string.h>

#include "bounds.h"
#include "fileio.h"
#include "jsonrpc.h"
#include "log.h"
#include "manifests.h"
#include "rules.h"
#include "session-private.h"
#include "session.h"

static void on_approved_applied(struct up_session *s, const struct up_kube_error *err, json_t *obj)
{
	(void)obj;
	if (err)
		log_warning("Session %s: the rules Secret did not take an approved rule (%s): the "
			    "proxy has it, but a restarted mitm pod would ask about it again",
			    s->id, err->message);
}

int up_session_add_approved_rule(struct up_session *s, const json_t *rule)
{
	json_t *secret = s->objects
				 ? up_manifests_find(s->objects, "Secret", UP_MANIFEST_RULES_SECRET)
				 : NULL;
	json_t *e, *doc = NULL, *problems = NULL, *rules = NULL;
	char *text = NULL;
	size_t i;
	int r = 0;

	json_array_foreach (s->approved, i, e)
		if (json_equal(e, (json_t *)rule))
			return 0;
	if (!s->rs || !secret) {
		log_warning(
			"Session %s: its rules are not at hand (picked up after a restart): the "
			"approved rule lives in the proxy only",
			s->id);
		return -ENOENT;
	}
	if (json_array_size(s->approved) >= UP_MAX_APPROVED_RULES)
		return -E2BIG;
	if (!s->approved && !(s->approved = json_array()))
		return -ENOMEM;
	e = json_deep_copy(rule);
	if (e && json_object_set_new(e, "layer", json_string("session")) == 0 &&
	    json_object_set_new(e, "source", json_string("ask mode approval")) == 0)
		doc = json_pack("{s:i, s:[O]}", "version", UP_RULES_FORMAT_VERSION, "rules", e);
	problems = json_array();
	r = doc && problems ? up_ruleset_load_json(s->rs, doc, problems) : -ENOMEM;
	if (r == -EINVAL)
		log_warning(
			"Session %s: an approved rule does not load (%s): the proxy has it only",
			s->id, json_string_value(json_array_get(problems, 0)));
	if (r >= 0)
		r = json_array_append(s->approved, (json_t *)rule);
	rules = r >= 0 ? up_ruleset_render(s->rs, true) : NULL;
	text = rules ? json_dumps(rules, JSON_COMPACT) : NULL;
	if (r >= 0 && !text)
		r = -ENOMEM;
	if (r >= 0)
		r = up_manifests_secret_put(secret, "rules.json", text, strlen(text));
	if (r >= 0)
		r = session_apply(s, secret, on_approved_applied);
	if (text)
		up_free_secret(text, strlen(text));
	up_json_wipe(rules);
	json_decref(rules);
	json_decref(problems);
	json_decref(doc);
	json_decref(e);
	return r;
}
