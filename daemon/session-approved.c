/* SPDX-License-Identifier: Apache-2.0 */
/* Ask mode: the rules the user approved for a session, kept in its rules Secret (session.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bounds.h"
#include "fileio.h"
#include "jsonrpc.h"
#include "log.h"
#include "manifests.h"
#include "rules.h"
#include "session-private.h"
#include "session.h"

struct keeping {
	up_session_kept_fn done;
	void *userdata;
};

/* Says `fmt` in the log (about session `s`) and in `warn`, for whoever approved. */
static void warn_of(struct up_session *s, char *warn, size_t len, const char *fmt, ...)
	_printf_(4, 5);

static void warn_of(struct up_session *s, char *warn, size_t len, const char *fmt, ...)
{
	char own[UP_APPROVED_WARNING_MAX];
	va_list ap;

	if (!warn || !len)
		warn = own, len = sizeof(own);
	va_start(ap, fmt);
	(void)vsnprintf(warn, len, fmt, ap);
	va_end(ap);
	log_warning("Session %s: %s", s->id, warn);
}

static void on_approved_applied(struct up_session *s, const struct up_kube_error *err, json_t *obj,
				void *ud)
{
	struct keeping *k = ud;
	char warn[UP_APPROVED_WARNING_MAX];
	bool failed = err && err->r != -ECANCELED; /* cancelled: the session ends anyway */
	(void)obj;

	if (failed)
		warn_of(s, warn, sizeof(warn),
			"its rules Secret did not take the approved rule (%s): the proxy has it "
			"now, but a restarted mitm pod would ask about it again",
			err->message);
	if (k->done)
		k->done(failed ? warn : NULL, k->userdata);
	free(k);
}

int up_session_add_approved_rule(struct up_session *s, const json_t *rule, char *warn,
				 size_t warn_len, up_session_kept_fn done, void *userdata)
{
	json_t *secret = s->objects
				 ? up_manifests_find(s->objects, "Secret", UP_MANIFEST_RULES_SECRET)
				 : NULL;
	json_t *e, *doc = NULL, *problems = NULL, *rules = NULL;
	struct keeping *k = NULL;
	char *text = NULL;
	size_t i;
	bool said = false;
	int r = 0;

	json_array_foreach (s->approved, i, e)
		if (json_equal(e, (json_t *)rule))
			return 0;
	if (!s->rs || !secret) {
		warn_of(s, warn, warn_len,
			"its rules are not at hand (picked up after a restart of uplinkd): the "
			"approved rule lives in the proxy only, a restarted mitm pod would ask "
			"about it again");
		return -ENOENT;
	}
	if (json_array_size(s->approved) >= UP_MAX_APPROVED_RULES) {
		warn_of(s, warn, warn_len,
			"it has %d approved rules, the most its rules Secret keeps: this one lives "
			"in the proxy only, a restarted mitm pod would ask about it again",
			UP_MAX_APPROVED_RULES);
		return -E2BIG;
	}
	if (!s->approved)
		s->approved = json_array(); /* NULL: out of memory, said below */
	e = s->approved ? json_deep_copy(rule) : NULL;
	if (e && json_object_set_new(e, "layer", json_string("session")) == 0 &&
	    json_object_set_new(e, "source", json_string("ask mode approval")) == 0)
		doc = json_pack("{s:i, s:[O]}", "version", UP_RULES_FORMAT_VERSION, "rules", e);
	problems = json_array();
	r = doc && problems ? up_ruleset_load_json(s->rs, doc, problems) : -ENOMEM;
	said = r == -EINVAL; /* a later -EINVAL (the Secret, the apply) is not the rule's */
	if (said)
		warn_of(s, warn, warn_len,
			"the approved rule does not load (%s): the proxy has it only",
			json_string_value(json_array_get(problems, 0)));
	if (r >= 0)
		r = json_array_append(s->approved, (json_t *)rule) < 0 ? -ENOMEM : 0;
	rules = r >= 0 ? up_ruleset_render(s->rs, true) : NULL;
	text = rules ? json_dumps(rules, JSON_COMPACT) : NULL;
	if (r >= 0 && !text)
		r = -ENOMEM;
	if (r >= 0)
		r = up_manifests_secret_put(secret, "rules.json", text, strlen(text));
	if (r >= 0 && !(k = up_new(struct keeping, .done = done, .userdata = userdata)))
		r = -ENOMEM;
	if (r >= 0)
		r = session_apply_ud(s, secret, on_approved_applied, k);
	if (r >= 0)
		r = 1; /* on_approved_applied() goes on */
	else
		free(k);
	if (r < 0 && !said)
		warn_of(s, warn, warn_len,
			"its rules Secret cannot be rewritten with the approved rule (%s): the "
			"proxy has it now, but a restarted mitm pod would ask about it again",
			strerror(-r));
	if (text)
		up_free_secret(text, strlen(text));
	up_json_wipe(rules);
	json_decref(rules);
	json_decref(problems);
	json_decref(doc);
	json_decref(e);
	return r;
}
