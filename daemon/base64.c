/* SPDX-License-Identifier: Apache-2.0 */
#include "base64.h"

#include <errno.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdlib.h>

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
