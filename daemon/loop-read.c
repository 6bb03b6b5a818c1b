/* SPDX-License-Identifier: Apache-2.0 */
#include "loop-read.h"

void up_loop_read_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	static char slab[UP_LOOP_READ_SIZE];

	(void)h;
	(void)suggested;
	*buf = uv_buf_init(slab, sizeof(slab));
}
