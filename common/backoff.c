/* SPDX-License-Identifier: Apache-2.0 */
#include "backoff.h"

#include "bounds.h"

uint64_t up_backoff_ms(unsigned attempt, uint64_t base_ms, uint64_t cap_ms, uint32_t rnd,
		       long retry_after_s)
{
	uint64_t d = base_ms;

	/* Bounded so that the jitter arithmetic below cannot overflow. */
	if (cap_ms > UP_BACKOFF_CAP_MAX_MS)
		cap_ms = UP_BACKOFF_CAP_MAX_MS;
	if (d > cap_ms)
		d = cap_ms;
	for (unsigned i = 0; i < attempt && d < cap_ms; i++)
		d *= 2;
	if (d > cap_ms)
		d = cap_ms;
	/* Jitter: d * (0.8 .. 1.2). */
	d = d * 4 / 5 + (d * 2 / 5) * (rnd % 1001) / 1000;
	if (retry_after_s > 0) {
		uint64_t ra = (uint64_t)retry_after_s * 1000;
		if (ra > UP_RETRY_AFTER_MAX_MS)
			ra = UP_RETRY_AFTER_MAX_MS;
		if (ra > d)
			d = ra;
	}
	return d;
}
