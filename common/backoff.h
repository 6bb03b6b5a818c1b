/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdint.h>

/*
 * Capped exponential backoff with jitter: attempt 0 waits about `base_ms`, each
 * further attempt twice as long, never more than `cap_ms`; the result is spread by
 * +-20% using `rnd` (any 32-bit random value) so that many clients do not retry in
 * step. A server's Retry-After (seconds, or < 0 for none) wins when it is longer.
 */
uint64_t up_backoff_ms(unsigned attempt, uint64_t base_ms, uint64_t cap_ms, uint32_t rnd,
		       long retry_after_s);
