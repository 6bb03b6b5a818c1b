/* SPDX-License-Identifier: Apache-2.0 */
#include "duration.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "bounds.h"

static const struct {
	char unit;
	uint64_t seconds;
} units[] = {
	{'s', 1},
	{'m', 60},
	{'h', 3600},
	{'d', 86400},
};

/* Python's \s and str.strip() for ASCII: space, \t, \n, \v, \f, \r. */
static int blank(char c)
{
	return c == ' ' || (c >= '\t' && c <= '\r');
}

static int digit(char c)
{
	return c >= '0' && c <= '9';
}

static uint64_t unit_seconds(char c)
{
	for (size_t i = 0; i < ELEMENTSOF(units); i++)
		if (units[i].unit == c)
			return units[i].seconds;
	return 0;
}

static int invalid(const char *text, char *err, size_t err_len)
{
	(void)snprintf(err, err_len, "invalid duration '%s'; use forms like 30m, 2h, 1d", text);
	return -EINVAL;
}

int up_duration_parse(const char *text, uint64_t *ret, char *err, size_t err_len)
{
	const char *p;
	uint64_t n = 0, mult;
	int too_big = 0;

	if (!text)
		text = "";
	p = text;
	while (blank(*p))
		p++;
	if (!digit(*p))
		return invalid(text, err, err_len);
	for (; digit(*p); p++) {
		/* Keep scanning past the limit so "1.5h" stays a syntax error, not a range one. */
		if (n > UP_MAX_DURATION_S)
			too_big = 1;
		else
			n = n * 10 + (uint64_t)(*p - '0');
	}
	while (blank(*p))
		p++;
	mult = unit_seconds(*p);
	if (mult == 0)
		return invalid(text, err, err_len);
	for (p++; blank(*p); p++)
		;
	if (*p)
		return invalid(text, err, err_len);
	if (too_big || n > UP_MAX_DURATION_S / mult) {
		(void)snprintf(err, err_len,
			       "invalid duration '%s'; the longest accepted is %" PRIu64 "d", text,
			       (uint64_t)UP_MAX_DURATION_S / 86400);
		return -ERANGE;
	}
	*ret = n * mult;
	return 0;
}

int up_duration_format(int64_t seconds, char *buf, size_t len)
{
	const char *sign = seconds < 0 ? "-" : "";
	/* Through uint64_t so that INT64_MIN negates without overflow. */
	uint64_t s = seconds < 0 ? 0 - (uint64_t)seconds : (uint64_t)seconds;
	int n;

	if (s < 60)
		n = snprintf(buf, len, "%s%" PRIu64 "s", sign, s);
	else if (s < 3600)
		n = snprintf(buf, len, "%s%" PRIu64 "m", sign, s / 60);
	else if (s < 86400)
		n = snprintf(buf, len, "%s%" PRIu64 "h%02" PRIu64 "m", sign, s / 3600,
			     s % 3600 / 60);
	else
		n = snprintf(buf, len, "%s%" PRIu64 "d%02" PRIu64 "h", sign, s / 86400,
			     s % 86400 / 3600);
	if (n < 0 || (size_t)n >= len)
		return -ENOBUFS;
	return n;
}
