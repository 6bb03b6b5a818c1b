/* SPDX-License-Identifier: Apache-2.0 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <string.h>

#include "cluster-ranges.h"

/* Without the ServiceCIDR API, the range guessed from the kubernetes Service's IP: the /16 of
 * the common defaults inside 10/8 and 172.16/12, the /112 inside fc00::/7, else the IP. */
static void test_guess(void **state)
{
	static const char *const cases[][2] = {
		{"10.43.0.1", "10.43.0.0/16"},	       {"10.96.0.1", "10.96.0.0/16"},
		{"172.20.0.1", "172.20.0.0/16"},       {"172.32.0.1", "172.32.0.1/32"},
		{"192.168.5.1", "192.168.5.1/32"},     {"34.118.224.1", "34.118.224.1/32"},
		{"fd00:10:96::1", "fd00:10:96::/112"}, {"fc00::1", "fc00::/112"},
		{"2001:db8::1", "2001:db8::1/128"},
	};
	char buf[64];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(up_cidr_guess_service_range(cases[i][0], buf, sizeof(buf)), 0);
		assert_string_equal(buf, cases[i][1]);
	}
	assert_int_equal(up_cidr_guess_service_range("10.43.0", buf, sizeof(buf)), -EINVAL);
	assert_int_equal(up_cidr_guess_service_range("10.43.0.1/16", buf, sizeof(buf)), -EINVAL);
	assert_int_equal(up_cidr_guess_service_range("", buf, sizeof(buf)), -EINVAL);
}

/* NULL (no deploy cluster loaded yet) is no range and nothing to wait for. */
static void test_null(void **state)
{
	struct up_waiter *w = (void *)1;

	(void)state;
	up_cluster_ranges_read(NULL);
	assert_null(up_cluster_ranges_cidrs(NULL));
	assert_string_equal(up_cluster_ranges_source(NULL), "");
	assert_int_equal(up_cluster_ranges_wait(NULL, 10, NULL, NULL, &w), 0);
	assert_null(w);
	up_waiter_cancel(NULL);
	up_cluster_ranges_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_guess),
		cmocka_unit_test(test_null),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
