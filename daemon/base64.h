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
