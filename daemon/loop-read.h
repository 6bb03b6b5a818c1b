/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <uv.h>

/*
 * The uv_alloc_cb of every stream the daemon reads (clients' sockets, children's pipes): one
 * static buffer. The loop reads one stream at a time and each read callback copies what it
 * keeps before the next read, so they can all share it.
 */
#define UP_LOOP_READ_SIZE 65536
void up_loop_read_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
