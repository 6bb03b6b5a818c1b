/* SPDX-License-Identifier: Apache-2.0 */
/* Credentials renewed while a session runs (not yet). */
#include "session-private.h"

void session_refresh_arm(struct up_session *s)
{
	(void)s;
}

void session_refresh_free(struct up_session *s)
{
	(void)s;
}
