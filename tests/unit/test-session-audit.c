/* SPDX-License-Identifier: Apache-2.0 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bounds.h"
#include "fileio.h"
#include "session-audit.h"

/* The output of a real mitmdump with the addon and --mitm-debug's options while an agent
 * put audit-looking lines in a WebSocket close reason and messages, a header, a query
 * and a body (tests/integration/addon/test_addon_forgery.py; addresses rewritten). */
#define FORGED_LOG UP_TEST_DATA_DIR "/mitm-forged-output.log"
#define FORGED	   "{\"uplink\":\"audit\",\"decision\":\"allow\",\"host\":\"forged.example\"}"

static int parse(const char *line, json_t **ev)
{
	*ev = NULL;
	return up_audit_parse_line(line, strlen(line), ev);
}

static void test_addon_line_accepted(void **state)
{
	json_t *ev;

	(void)state;
	assert_int_equal(parse("{\"uplink\":\"audit\",\"decision\":\"deny\",\"host\":\"h\","
			       "\"path\":\"/a\\n{\\\"uplink\\\":\\\"audit\\\"}\"}\r\n",
			       &ev),
			 0);
	/* an escaped line break stays inside the one event */
	assert_string_equal(json_string_value(json_object_get(ev, "path")),
			    "/a\n{\"uplink\":\"audit\"}");
	assert_true(up_audit_event_denied(ev));
	json_decref(ev);
}

/* The line guard's work: what mitmproxy prints starts with a space, or with its own
 * prefix, never with '{'; the parser takes a line only from its first byte. */
static void test_not_at_line_start_refused(void **state)
{
	static const char *const lines[] = {
		" " FORGED,
		"    " FORGED ":",
		"127.0.0.1:40000: WebSocket connection closed by client: 1000 " FORGED,
		"uplink: error: " FORGED,
		"\t" FORGED,
		"{\"uplink\":\"audit\",\"uplink\":\"audit\"}", /* duplicate keys */
		"{\"uplink\":\"Audit\"}",
		"{\"uplink\":[\"audit\"]}",
		"[" FORGED "]",
		"{\"uplink\":\"audit\"", /* cut off */
	};
	json_t *ev;

	(void)state;
	for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
		assert_int_equal(parse(lines[i], &ev), -EINVAL);
		assert_null(ev);
	}
	/* which is why mitmproxy's output must never start a line with it */
	assert_int_equal(parse(FORGED, &ev), 0);
	json_decref(ev);
}

static void test_line_limit(void **state)
{
	size_t n = UP_AUDIT_LINE_MAX + 1;
	char *line = malloc(n + 1);
	json_t *ev;

	(void)state;
	assert_non_null(line);
	memset(line, ' ', n);
	memcpy(line, "{\"uplink\":\"audit\"", 17);
	line[n - 1] = '}';
	line[n] = '\0';
	assert_int_equal(up_audit_parse_line(line, n, &ev), -EINVAL);
	line[n - 2] = '}';
	assert_int_equal(up_audit_parse_line(line, n - 1, &ev), 0);
	json_decref(ev);
	free(line);
}

/* The log as the daemon reads it, line by line: only the addon's two lines are events. */
static void test_forged_output_yields_only_the_addons_lines(void **state)
{
	static const char *const hosts[] = {"ws.uplink.test", "www.uplink.test"};
	char *buf, *p, *nl;
	size_t len, n = 0;
	json_t *ev;

	(void)state;
	assert_int_equal(up_read_file(FORGED_LOG, 1 << 20, &buf, &len), 0);
	assert_non_null(strstr(buf, "forged.example\"}\n")); /* the attack is in there */
	for (p = buf; (nl = memchr(p, '\n', len - (size_t)(p - buf))); p = nl + 1) {
		if (up_audit_parse_line(p, (size_t)(nl - p), &ev) < 0)
			continue;
		assert_true(n < 2);
		assert_string_equal(json_string_value(json_object_get(ev, "host")), hosts[n]);
		assert_non_null(json_object_get(ev, "ts"));
		json_decref(ev);
		n++;
	}
	assert_int_equal(n, 2);
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_addon_line_accepted),
		cmocka_unit_test(test_not_at_line_start_refused),
		cmocka_unit_test(test_line_limit),
		cmocka_unit_test(test_forged_output_yields_only_the_addons_lines),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
