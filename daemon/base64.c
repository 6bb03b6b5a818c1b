/* SPDX-License-Identifier: Apache-2.0 */
#include "base64.h"

#include <errno.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "fileio.h"

int up_base64_decode(const char *in, size_t n, char **out, size_t *out_len)
{
	size_t size = n / 4 * 3 + 4;
	EVP_ENCODE_CTX *ctx;
	unsigned char *buf;
	int got = 0, fin = 0;

	if (n > INT_MAX / 2)
		return -EINVAL;
	ctx = EVP_ENCODE_CTX_new();
	buf = malloc(size);
	if (!ctx || !buf) {
		EVP_ENCODE_CTX_free(ctx);
		free(buf);
		return -ENOMEM;
	}
	EVP_DecodeInit(ctx);
	if (EVP_DecodeUpdate(ctx, buf, &got, (const unsigned char *)in, (int)n) < 0 ||
	    EVP_DecodeFinal(ctx, buf + got, &fin) < 0) {
		EVP_ENCODE_CTX_free(ctx);
		up_free_secret((char *)buf, size);
		return -EINVAL;
	}
	EVP_ENCODE_CTX_free(ctx);
	buf[got + fin] = '\0';
	*out = (char *)buf;
	*out_len = (size_t)(got + fin);
	return 0;
}

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
