/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stddef.h>

#include "util.h"

/* `n` bytes as 2n lowercase hex digits and a NUL at out[2n]. */
void up_hex(const void *in, size_t n, char *out);

/* `n` (at most 64) random bytes from getrandom() as 2n lowercase hex digits and a NUL: ids,
 * tokens, the agents' placeholders. 0 or -errno. */
int up_random_hex(char *out, size_t n) _wur_;
