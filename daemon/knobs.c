/* SPDX-License-Identifier: Apache-2.0 */
#include "knobs.h"

#include <stdbool.h>
#include <stdlib.h>

#include "bounds.h"
#include "kubeconfig.h"	   /* UP_DEFAULT_DEPLOY_CONTEXT */
#include "session-state.h" /* UP_MACHINE_ID_PATH */

const struct up_knob up_knob_table[] = {
#define UP_KNOB_ROW(field, name, kind, type, dflt, meaning) \
	{name, UP_KNOB_##kind, type, dflt, meaning},
	UP_KNOBS(UP_KNOB_ROW)
#undef UP_KNOB_ROW
};

const unsigned up_knob_count = sizeof(up_knob_table) / sizeof(up_knob_table[0]);

static struct up_knobs knobs;
static bool loaded;

void up_knobs_load(void)
{
#define UP_KNOB_READ(field, name, kind, type, dflt, meaning) knobs.field = getenv(name);
	UP_KNOBS(UP_KNOB_READ)
#undef UP_KNOB_READ
	loaded = true;
}

const struct up_knobs *up_knobs(void)
{
	if (!loaded)
		up_knobs_load();
	return &knobs;
}

const char *up_knob_kind_name(enum up_knob_kind k)
{
	static const char *const names[] = {
		[UP_KNOB_USER] = "user",
		[UP_KNOB_TEST] = "test",
		[UP_KNOB_SYSTEM] = "system",
	};
	return names[k];
}
