/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "util.h"

/*
 * Durations as agent-uplink 0.4.1 writes them for `clean --older-than`, and as uplink
 * takes them for --ttl, --idle-timeout and `extend`: an integer, optional blanks, one
 * unit of s, m, h or d; blanks around the whole are trimmed. "90s", "30m", "2h", "1d",
 * " 2 h " are durations; "", "5", "10x", "h", "1.5h", "-5m", "+5m", "2H" are not. Nothing
 * above UP_MAX_DURATION_S is accepted.
 */

/* "3650d" fits, and so does any formatted duration, sign included. */
#define UP_DURATION_FORMAT_MAX 32

/*
 * Parses `text` into seconds. Returns 0, or -EINVAL with `err` holding a sentence
 * that quotes `text` and shows the accepted forms, or -ERANGE (too long) with a
 * sentence that names the limit. Pure; never logs.
 */
int up_duration_parse(const char *text, uint64_t *ret, char *err, size_t err_len) _wur_;

/*
 * Formats seconds as `uplink list` shows AGE and EXPIRES (the forms of agent-uplink
 * 0.4.1's `list`, with the minutes and hours of the compound forms zero-padded): under a
 * minute "42s", under an hour "17m", under a day "2h05m", else "3d04h". Integer division,
 * never rounded up. A negative value gets a leading '-'. Returns the length written, or
 * -ENOBUFS when `len` is too small (UP_DURATION_FORMAT_MAX always suffices).
 */
int up_duration_format(int64_t seconds, char *buf, size_t len) _wur_;
