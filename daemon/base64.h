/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stddef.h>

#include "util.h"

/*
 * Decodes base64 (OpenSSL's decoder: white space and line breaks allowed) into a new
 * NUL-terminated buffer of *out_len bytes, which may hold a secret: free it with
 * up_free_secret(). -EINVAL when it is not base64 (nothing is left allocated), -ENOMEM.
 */
int up_base64_decode(const char *in, size_t n, char **out, size_t *out_len) _wur_;

/* `n` bytes as 2n lowercase hex digits and a NUL at out[2n]. */
void up_hex(const void *in, size_t n, char *out);

/* `n` random bytes (getrandom()) as 2n lowercase hex digits and a NUL: ids and tokens. */
int up_random_hex(char *out, size_t n) _wur_;
