/* SPDX-License-Identifier: Apache-2.0 */
/* What the extras of `uplink run` add to the pods (mounts, git, AWS, CAs, SSH ranges),
 * and the mitm's own egress and flags. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ca.h"
#include "fileio.h"
#include "manifests.h"
#include "knobs.h"
#include "manifests-fixture.h"

/* ---------------------------------------------------------------- uplink run's extras */

#define CA_PEM	"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
#define GIT_INC "[user]\n\tname = \"u\"\n"
#define AWS_INI "[dev]\naws_access_key_id = AKIAEF260E9AA3C673AF\naws_secret_access_key = x\n\n"
#define AWS_MAP                                                                             \
	"{\"AKIAEF260E9AA3C673AF\": {\"access_key_id\": \"ASIA1\", \"secret_access_key\": " \
	"\"s1\"}}"

static struct up_session_extras *extras_new(void)
{
	static struct up_session_extras x;

	x = (struct up_session_extras){
		.mounts = json_pack("[{s:s, s:b, s:b}, {s:s, s:b, s:b}]", "path", "/home/u/src/q",
				    "dir", 1, "read_only", 0, "path", "/home/u/.npmrc", "dir", 0,
				    "read_only", 1),
		.ssh_cidrs = json_pack("[s, s]", "10.1.0.0/16", "2001:db8::/32"),
		.gitconfig = strdup(GIT_INC),
		.mitm_ca_pem = strdup(CA_PEM),
		.aws_ini = strdup(AWS_INI),
		.aws_creds_json = strdup(AWS_MAP),
	};
	return &x;
}

static void extras_done(struct up_session_extras *x)
{
	json_decref(x->mounts);
	json_decref(x->ssh_cidrs);
	free(x->gitconfig);
	free(x->mitm_ca_pem);
	free(x->aws_ini);
	free(x->aws_creds_json);
}

#define A "containers[name=main]."
#define M "containers[name=mitm]."
static const struct row extras_rows[] = {
	/* --add-dir / --mount-rw / --mount-ro: hostPath at the same path, readOnly explicit */
	{"Pod", "agent", "spec.volumes[name=mount-0].hostPath.path", STR, "/home/u/src/q", 0},
	{"Pod", "agent", "spec.volumes[name=mount-0].hostPath.type", STR, "Directory", 0},
	{"Pod", "agent", "spec." A "volumeMounts[name=mount-0].mountPath", STR, "/home/u/src/q", 0},
	{"Pod", "agent", "spec." A "volumeMounts[name=mount-0].readOnly", FALSE_, NULL, 0},
	{"Pod", "agent", "spec.volumes[name=mount-1].hostPath.type", STR, "File", 0},
	{"Pod", "agent", "spec." A "volumeMounts[name=mount-1].mountPath", STR, "/home/u/.npmrc",
	 0},
	{"Pod", "agent", "spec." A "volumeMounts[name=mount-1].readOnly", TRUE_, NULL, 0},
	/* --ssh-cidr: one more egress rule, TCP 22 to exactly those blocks; still no DNS */
	{"NetworkPolicy", "agent-egress", "spec.egress", SIZE, NULL, 2},
	{"NetworkPolicy", "agent-egress", "spec.egress[1].to", SIZE, NULL, 2},
	{"NetworkPolicy", "agent-egress", "spec.egress[1].to[0].ipBlock.cidr", STR, "10.1.0.0/16",
	 0},
	{"NetworkPolicy", "agent-egress", "spec.egress[1].to[1].ipBlock.cidr", STR, "2001:db8::/32",
	 0},
	{"NetworkPolicy", "agent-egress", "spec.egress[1].to[0].ipBlock.except", ABSENT, NULL, 0},
	{"NetworkPolicy", "agent-egress", "spec.egress[1].ports", SIZE, NULL, 1},
	{"NetworkPolicy", "agent-egress", "spec.egress[1].ports[0].port", INT, NULL, 22},
	{"NetworkPolicy", "agent-egress", "spec.egress[1].ports[0].protocol", STR, "TCP", 0},
	{"NetworkPolicy", "agent-egress", "spec", NO_PORT_53, NULL, 0},
	/* git: the overlay Secret at the image's include path, read-only */
	{"Secret", "git-config", "data", SIZE, NULL, 1},
	{"Pod", "agent", "spec.volumes[name=git-config].secret.secretName", STR, "git-config", 0},
	{"Pod", "agent", "spec." A "volumeMounts[name=git-config].mountPath", STR,
	 "/etc/gitconfig.d/agent-uplink.inc", 0},
	{"Pod", "agent", "spec." A "volumeMounts[name=git-config].subPath", STR, "agent-uplink.inc",
	 0},
	{"Pod", "agent", "spec." A "volumeMounts[name=git-config].readOnly", TRUE_, NULL, 0},
	/* mitm: the extra CAs next to the public roots, insecure and debug options */
	{"Secret", "upstream-ca", "data", SIZE, NULL, 1},
	{"Pod", "mitm", "spec.volumes[name=upstream-ca].secret.secretName", STR, "upstream-ca", 0},
	{"Pod", "mitm", "spec." M "volumeMounts[name=upstream-ca].mountPath", STR, "/upstream-ca",
	 0},
	{"Pod", "mitm", "spec." M "volumeMounts[name=upstream-ca].readOnly", TRUE_, NULL, 0},
	{"Pod", "agent", "spec.volumes[name=upstream-ca]", ABSENT, NULL, 0},
	{"Pod", "mitm", "spec.volumes[name=git-config]", ABSENT, NULL, 0},
	/* --aws-profiles: the dummies for the agent (no secret: a ConfigMap), the real keys
	 * mounted whole in the mitm only (so that a renewal reaches the file) */
	{"ConfigMap", "agent-aws-creds", "data.credentials", STR, AWS_INI, 0},
	{"Pod", "agent", "spec.volumes[name=agent-aws-creds].configMap.name", STR,
	 "agent-aws-creds", 0},
	{"Pod", "agent", "spec." A "volumeMounts[name=agent-aws-creds].mountPath", STR,
	 "/home/u/.aws/credentials", 0},
	{"Pod", "agent", "spec." A "volumeMounts[name=agent-aws-creds].subPath", STR, "credentials",
	 0},
	{"Pod", "agent", "spec." A "volumeMounts[name=agent-aws-creds].readOnly", TRUE_, NULL, 0},
	{"Pod", "agent", "spec.volumes[name=aws-sigv4-creds]", ABSENT, NULL, 0},
	{"Secret", "aws-sigv4-creds", "data", SIZE, NULL, 1},
	{"Pod", "mitm", "spec.volumes[name=aws-sigv4-creds].secret.secretName", STR,
	 "aws-sigv4-creds", 0},
	{"Pod", "mitm", "spec." M "volumeMounts[name=aws-sigv4-creds].mountPath", STR, "/aws-creds",
	 0},
	{"Pod", "mitm", "spec." M "volumeMounts[name=aws-sigv4-creds].subPath", ABSENT, NULL, 0},
	{"Pod", "mitm", "spec.volumes[name=agent-aws-creds]", ABSENT, NULL, 0},
};
#undef A
#undef M

static bool has_arg(json_t *objs, const char *arg)
{
	json_t *args = at(find(objs, "Pod", "mitm"), "spec.containers[name=mitm].args"), *v;
	size_t i;

	json_array_foreach (args, i, v)
		if (streq(json_string_value(v), arg))
			return i > 0 &&
			       streq(json_string_value(json_array_get(args, i - 1)), "--set");
	return false;
}

static bool in_list(json_t *list, const char *s)
{
	json_t *v;
	size_t i;

	json_array_foreach (list, i, v)
		if (streq(json_string_value(v), s))
			return true;
	return false;
}

/* Metadata services and special-purpose ranges are out of the mitm's reach; private ones
 * (API servers, corporate hosts) are not. */
static void test_mitm_egress_excludes_special_ranges(void **state)
{
	static const char *const out4[] = {
		"0.0.0.0/8",	  "127.0.0.0/8",  "169.254.0.0/16", "100.100.100.200/32",
		"192.0.0.0/24",	  "192.0.2.0/24", "198.18.0.0/15",  "198.51.100.0/24",
		"203.0.113.0/24", "224.0.0.0/4",  "240.0.0.0/4"};
	static const char *const out6[] = {"::1/128",  "fe80::/10",	"fd00:ec2::254/128",
					   "ff00::/8", "2001:db8::/32", "::ffff:0:0/96",
					   "100::/64"};
	static const char *const open[] = {"10.0.0.0/8",    "172.16.0.0/12", "192.168.0.0/16",
					   "100.64.0.0/10", "fc00::/7",	     "fd00::/8",
					   "64:ff9b::/96"};
	struct up_session_spec s = base_spec();
	json_t *objs = render(&s), *np = find(objs, "NetworkPolicy", "mitm-policy");
	json_t *v4 = at(np, "spec.egress[0].to[0].ipBlock.except");
	json_t *v6 = at(np, "spec.egress[0].to[1].ipBlock.except");

	(void)state;
	for (size_t i = 0; i < sizeof(out4) / sizeof(out4[0]); i++)
		assert_true(in_list(v4, out4[i]));
	for (size_t i = 0; i < sizeof(out6) / sizeof(out6[0]); i++)
		assert_true(in_list(v6, out6[i]));
	for (size_t i = 0; i < sizeof(open) / sizeof(open[0]); i++)
		assert_false(in_list(v4, open[i]) || in_list(v6, open[i]));
	json_decref(objs);
}

static size_t count_prefix(json_t *objs, const char *prefix)
{
	json_t *args = at(find(objs, "Pod", "mitm"), "spec.containers[name=mitm].args"), *v;
	size_t i, n = 0;

	json_array_foreach (args, i, v)
		n += strncmp(json_string_value(v), prefix, strlen(prefix)) == 0;
	return n;
}

/* The mitm decides before connecting, serves no onboarding app and prints no flow (the
 * audit lines share its log); --mitm-debug replaces those values, never repeats them
 * (mitmdump refuses an option given twice). */
static void test_mitm_quiet_and_lazy(void **state)
{
	struct up_session_spec s = base_spec();
	struct up_session_extras *x = extras_new();
	json_t *objs = render(&s);

	(void)state;
	assert_true(has_arg(objs, "connection_strategy=lazy"));
	assert_true(has_arg(objs, "upstream_cert=false"));
	assert_true(has_arg(objs, "onboarding=false"));
	assert_true(has_arg(objs, "flow_detail=0"));
	assert_true(has_arg(objs, "termlog_verbosity=error"));
	json_decref(objs);
	s.asked.mitm_insecure = s.asked.mitm_debug = true; /* as uplink run's flags */
	s.extras = x;
	objs = render(&s);
	assert_true(has_arg(objs, "flow_detail=3") && has_arg(objs, "termlog_verbosity=debug"));
	assert_int_equal(count_prefix(objs, "flow_detail="), 1);
	assert_int_equal(count_prefix(objs, "termlog_verbosity="), 1);
	json_decref(objs);
	extras_done(x);
}

/* The cluster's Service ranges (daemon/cluster-ranges.h) become uplink_refuse_cidrs, once
 * and normalised; unknown ones set nothing; a value that is no CIDR is refused. */
static void test_mitm_refuse_cidrs(void **state)
{
	struct up_session_spec s = base_spec();
	json_t *cidrs = json_pack("[s, s]", "10.43.0.0/16", "fd00:43::/112");
	json_t *objs = render(&s);
	char err[512] = "";

	(void)state;
	assert_int_equal(count_prefix(objs, "uplink_refuse_cidrs="), 0);
	json_decref(objs);
	s.refuse_cidrs = cidrs;
	objs = render(&s);
	assert_true(has_arg(objs, "uplink_refuse_cidrs=10.43.0.0/16,fd00:43::/112"));
	assert_int_equal(count_prefix(objs, "uplink_refuse_cidrs="), 1);
	json_decref(objs);
	objs = NULL;
	assert_int_equal(json_array_append_new(cidrs, json_string("10.0.0.0/8,--x")), 0);
	assert_int_equal(up_manifests_render(tpl, &s, &objs, err, sizeof(err)), -EINVAL);
	assert_null(objs);
	assert_string_equal(err, "refuse_cidrs[2] is not one of up to 16 CIDRs");
	json_decref(cidrs);
}

static void test_extras_table(void **state)
{
	struct up_session_spec s = base_spec();
	struct up_session_extras *x = extras_new();
	json_t *objs;

	s.extras = x;
	s.asked.mitm_insecure = s.asked.mitm_debug = true;
	objs = render(&s);
	for (size_t i = 0; i < sizeof(extras_rows) / sizeof(extras_rows[0]); i++)
		check_row(objs, &extras_rows[i]);
	assert_true(has_arg(objs, "uplink_extra_ca=/upstream-ca/bundle.pem"));
	assert_true(has_arg(objs, "ssl_insecure=true"));
	assert_true(has_arg(objs, "termlog_verbosity=debug"));
	assert_true(has_arg(objs, "flow_detail=3"));
	assert_true(has_arg(objs, "uplink_aws_creds=/aws-creds/creds.json"));
	/* a renewal: the Secret found and its key replaced */
	json_t *sec = up_manifests_find(objs, "Secret", "aws-sigv4-creds");
	assert_ptr_equal(sec, find(objs, "Secret", "aws-sigv4-creds"));
	assert_null(up_manifests_find(objs, "ConfigMap", "aws-sigv4-creds"));
	assert_int_equal(up_manifests_secret_put(sec, "creds.json", "{}", 2), 0);
	assert_string_equal(json_string_value(at(sec, "data.creds~json")), "e30=");
	json_decref(objs);
	/* none of it without the flags */
	s.asked.mitm_insecure = s.asked.mitm_debug = false;
	free(x->mitm_ca_pem);
	x->mitm_ca_pem = NULL;
	objs = render(&s);
	assert_false(has_arg(objs, "ssl_insecure=true"));
	assert_false(has_arg(objs, "flow_detail=3"));
	assert_false(has_arg(objs, "uplink_extra_ca=/upstream-ca/bundle.pem"));
	assert_null(find(objs, "Secret", "upstream-ca"));
	json_decref(objs);
	/* no profiles, no AWS objects */
	free(x->aws_ini);
	free(x->aws_creds_json);
	x->aws_ini = x->aws_creds_json = NULL;
	objs = render(&s);
	assert_null(find(objs, "Secret", "aws-sigv4-creds"));
	assert_null(find(objs, "ConfigMap", "agent-aws-creds"));
	assert_false(has_arg(objs, "uplink_aws_creds=/aws-creds/creds.json"));
	json_decref(objs);
	extras_done(x);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_extras_table),
		cmocka_unit_test(test_mitm_egress_excludes_special_ranges),
		cmocka_unit_test(test_mitm_quiet_and_lazy),
		cmocka_unit_test(test_mitm_refuse_cidrs),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
