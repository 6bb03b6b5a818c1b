/* SPDX-License-Identifier: Apache-2.0 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <string.h>

#include "kube.h"

static void test_paths(void **state)
{
	static const struct {
		const char *kind, *ns, *name, *want;
	} cases[] = {
		{"Namespace", NULL, NULL, "/api/v1/namespaces"},
		{"Namespace", NULL, "agent-uplink-0123456789ab",
		 "/api/v1/namespaces/agent-uplink-0123456789ab"},
		{"Namespace", "ignored", "x", "/api/v1/namespaces/x"}, /* cluster-scoped */
		{"Pod", "ns", NULL, "/api/v1/namespaces/ns/pods"},
		{"Pod", NULL, NULL, "/api/v1/pods"},
		{"Pod", "ns", "agent", "/api/v1/namespaces/ns/pods/agent"},
		{"Deployment", "agent-uplink-system", "registry",
		 "/apis/apps/v1/namespaces/agent-uplink-system/deployments/registry"},
		{"NetworkPolicy", "ns", "default-deny",
		 "/apis/networking.k8s.io/v1/namespaces/ns/networkpolicies/default-deny"},
		{"RuntimeClass", NULL, "kata-clh", "/apis/node.k8s.io/v1/runtimeclasses/kata-clh"},
		{"Event", "ns", NULL, "/api/v1/namespaces/ns/events"},
	};
	char buf[256];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(
			up_kube_path(buf, sizeof(buf), cases[i].kind, cases[i].ns, cases[i].name),
			0);
		assert_string_equal(buf, cases[i].want);
	}
}

static void test_paths_refused(void **state)
{
	char buf[256];

	(void)state;
	assert_int_equal(up_kube_path(buf, sizeof(buf), "Widget", NULL, NULL), -EINVAL);
	/* Nothing that could bend the path or add a query. */
	assert_int_equal(up_kube_path(buf, sizeof(buf), "Pod", "ns", "../secrets"), -EINVAL);
	assert_int_equal(up_kube_path(buf, sizeof(buf), "Pod", "ns/x", "a"), -EINVAL);
	assert_int_equal(up_kube_path(buf, sizeof(buf), "Pod", "ns", "a?watch=1"), -EINVAL);
	assert_int_equal(up_kube_path(buf, sizeof(buf), "Pod", "ns", ".."), -EINVAL);
	assert_int_equal(up_kube_path(buf, sizeof(buf), "Pod", "ns", "UPPER"), -EINVAL);
	assert_int_equal(up_kube_path(buf, sizeof(buf), "Pod", "ns", ""), -EINVAL);
	assert_int_equal(up_kube_path(buf, 10, "Pod", "ns", "agent"), -ENAMETOOLONG);
}

static void test_selector_encoding(void **state)
{
	char buf[512];

	(void)state;
	assert_int_equal(up_kube_query(buf, sizeof(buf), "/api/v1/pods", "labelSelector",
				       "managed-by=agent-uplink,tier in (a, b),!legacy",
				       "fieldSelector", NULL, "watch", "1", NULL),
			 0);
	assert_string_equal(buf,
			    "/api/v1/pods?labelSelector=managed-by%3Dagent-uplink%2Ctier%20in%20"
			    "%28a%2C%20b%29%2C%21legacy&watch=1");
	assert_int_equal(up_kube_query(buf, sizeof(buf), "/x?a=1", "b", "c&d=e", NULL), 0);
	assert_string_equal(buf, "/x?a=1&b=c%26d%3De");
	assert_int_equal(up_kube_query(buf, sizeof(buf), "/x", NULL), 0);
	assert_string_equal(buf, "/x");
	assert_int_equal(up_kube_query(buf, 12, "/x", "key", "a long value", NULL), -ENAMETOOLONG);
}

static void test_status_parse(void **state)
{
	static const char notfound[] =
		"{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
		"\"message\":\"namespaces \\\"nope\\\" not found\",\"reason\":\"NotFound\","
		"\"details\":{\"name\":\"nope\",\"kind\":\"namespaces\"},\"code\":404}";
	static const char noreason[] =
		"{\"kind\":\"Status\",\"message\":\"etcd is sad\",\"code\":500}";
	struct up_kube_error e;

	(void)state;
	up_kube_status_parse(notfound, strlen(notfound), 404, "GET", "/api/v1/namespaces/nope",
			     "https://k", &e);
	assert_int_equal(e.code, 404);
	assert_string_equal(e.reason, "NotFound");
	assert_string_equal(e.message, "GET /api/v1/namespaces/nope: namespaces \"nope\" not found "
				       "(NotFound, HTTP 404)");
	up_kube_status_parse(noreason, strlen(noreason), 500, "PATCH", "/p", "https://k", &e);
	assert_string_equal(e.reason, "");
	assert_string_equal(e.message, "PATCH /p: etcd is sad (no reason, HTTP 500)");
	/* A proxy's HTML page, or nothing at all, is not a Status: say what it was. */
	up_kube_status_parse("<html>bad gateway</html>", 24, 502, "GET", "/version", "https://k",
			     &e);
	assert_string_equal(e.message,
			    "GET /version: HTTP 502 from the API server at https://k, with "
			    "24 bytes that are not a Kubernetes Status");
	up_kube_status_parse("", 0, 503, "GET", "/version", "https://k", &e);
	assert_int_equal(e.code, 503);
	assert_non_null(strstr(e.message, "with 0 bytes"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_paths),
		cmocka_unit_test(test_paths_refused),
		cmocka_unit_test(test_selector_encoding),
		cmocka_unit_test(test_status_parse),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
