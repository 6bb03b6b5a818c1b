/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The rules parser fed arbitrary YAML: it must never crash, leak or hang, and what it
 * accepts must render, read back and match without trouble.
 */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "rules.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct up_ruleset *rs, *back;
	json_t *problems, *doc;
	const struct up_rule *rule;

	if (size > 64 * 1024)
		return 0;
	rs = up_ruleset_new();
	problems = json_array();
	if (up_ruleset_load_string(rs, UP_LAYER_USER, "fuzz.yaml", (const char *)data, size,
				   problems) == 0 &&
	    up_ruleset_finish(rs, size % 2, problems) == 0) {
		(void)up_ruleset_evaluate(rs, "GET", true, "api.example.com", 0, "/v1/x?y=z",
					  &rule);
		(void)up_ruleset_evaluate(rs, "POST", false, "10.1.2.3", 0, "/", &rule);
		doc = up_ruleset_render(rs, true);
		back = up_ruleset_new();
		if (doc && up_ruleset_load_json(back, doc, problems) != 0)
			__builtin_trap(); /* what we render, we must read */
		up_ruleset_free(back);
		json_decref(doc);
	}
	json_decref(problems);
	up_ruleset_free(rs);
	return 0;
}
