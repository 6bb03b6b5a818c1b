/* SPDX-License-Identifier: Apache-2.0 */
/* The framing layer fed arbitrary bytes in arbitrary pieces, each line parsed as JSON. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "frame.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct up_frame f;
	size_t off = 0;

	if (size < 1)
		return 0;
	/* The first byte picks the read size, so pieces split lines anywhere. */
	size_t piece = (size_t)data[0] % 64 + 1;
	up_frame_init(&f, 256);
	data++;
	size--;
	while (off < size) {
		size_t n = size - off < piece ? size - off : piece;
		char *line;
		size_t len;
		int r;

		if (up_frame_feed(&f, data + off, n) < 0)
			break;
		off += n;
		while ((r = up_frame_next(&f, &line, &len)) > 0) {
			if (strlen(line) != len && memchr(line, '\0', len) == NULL)
				__builtin_trap();
			json_decref(json_loadb(line, len, JSON_DECODE_ANY, NULL));
		}
		if (r < 0)
			break;
	}
	up_frame_done(&f);
	return 0;
}
