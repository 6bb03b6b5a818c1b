/* SPDX-License-Identifier: Apache-2.0 */
#include "hex.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>

void up_hex(const void *in, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";
	const unsigned char *b = in;

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[b[i] >> 4];
		out[2 * i + 1] = digits[b[i] & 0xf];
	}
	out[2 * n] = '\0';
}

int up_random_hex(char *out, size_t n)
{
	unsigned char b[64];
	size_t got = 0;

	if (n > sizeof(b))
		return -EINVAL;
	while (got < n) {
		ssize_t k = getrandom(b + got, n - got, 0);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		got += (size_t)k;
	}
	up_hex(b, n, out);
	explicit_bzero(b, sizeof(b));
	return 0;
}
