/* SPDX-License-Identifier: Apache-2.0 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config-file.h"
#include "jsonrpc.h"
#include "rules.h"
#include "trust.h"

#define KNOWN                                                                                    \
	"known keys: mode, auth_mode, anthropic, bedrock, chatgpt, api_key, google, openai, "    \
	"rules, no_default_rules, allow_exec, "                                                  \
	"deploy_context, agent_runtime_class, mitm_runtime_class, mitmproxy_image, "             \
	"registry_image, "                                                                       \
	"image, registry, ttl, idle_timeout, allow_dns, ask, notifications, args, claude_args, " \
	"add_dir, "                                                                              \
	"mount_rw, mount_ro, ssh_cidr, ssh_key_dir, git_https_rewrite, no_git_identity, "        \
	"mitm_ca_cert, mitm_insecure, mitm_debug, kube_context, kubeconfig, aws_profiles"

#define SHA_OTHER "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

static char root[PATH_MAX];

static void write_file(const char *rel, const char *text)
{
	char path[PATH_MAX + 64];
	FILE *f;

	(void)snprintf(path, sizeof(path), "%s/%s", root, rel);
	f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fputs(text, f) >= 0, 1);
	assert_int_equal(fclose(f), 0);
}

static void mkdir_in(const char *rel)
{
	char path[PATH_MAX + 64];

	(void)snprintf(path, sizeof(path), "%s/%s", root, rel);
	assert_int_equal(mkdir(path, 0700), 0);
}

static int setup_tree(void **state)
{
	(void)state;
	(void)snprintf(root, sizeof(root), "/tmp/test-config-XXXXXX");
	assert_non_null(mkdtemp(root));
	mkdir_in("home");
	mkdir_in("home/proj");
	mkdir_in("home/proj/sub");
	mkdir_in("xdg");
	mkdir_in("xdg/uplink");
	/* above home: never read (it would be an error, and would set the image) */
	write_file(".uplink.yaml", "image: above\nbogus: 1\n");
	write_file("xdg/uplink/config.yaml",
		   "ttl: 9h\nidle_timeout: 5h\nregistry: reg.example:5000\n"
		   "rules: /global.yaml\n");
	write_file("home/.uplink.yaml", "# home\nttl: 2h\nallow_dns: true\nrules:\n  - /a.yaml\n"
					"mode: anthropic\n");
	write_file("home/proj/.agent-uplink.yaml",
		   "ttl: 3h\nimage: example/agent:2\nbedrock: true\n"
		   "anthropic: false\nrules: b.yaml\nclaude_args: --verbose\n");
	write_file("home/proj/sub/.uplink.yaml", "ttl: 1h\n"
						 "rules:\n"
						 "  - name: inline\n"
						 "    hosts: [api\\.example\\.com]\n"
						 "    methods: [POST]\n"
						 "  - ~/c.yaml\n"
						 "notifications: false\n");
	return 0;
}

static int teardown_tree(void **state)
{
	char cmd[PATH_MAX + 16];

	(void)state;
	(void)snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	assert_int_equal(system(cmd), 0);
	return 0;
}

static const char *origin(const struct up_config *c, const char *key)
{
	return json_string_value(json_object_get(c->origins, key));
}

static void load(struct up_config *c, json_t *problems, const char *rel_cwd)
{
	char home[PATH_MAX + 16], xdg[PATH_MAX + 16], cwd[PATH_MAX + 64];

	(void)snprintf(home, sizeof(home), "%s/home", root);
	(void)snprintf(xdg, sizeof(xdg), "%s/xdg", root);
	(void)snprintf(cwd, sizeof(cwd), "%s/%s", root, rel_cwd);
	assert_int_equal(up_config_init_defaults(c), 0);
	assert_int_equal(up_config_load(c, home, xdg, cwd, problems), 0);
}

static void expect_origin(const struct up_config *c, const char *key, const char *rel, int line)
{
	char want[PATH_MAX + 64];

	(void)snprintf(want, sizeof(want), "%s/%s:%d", root, rel, line);
	assert_string_equal(origin(c, key), want);
}

static void test_merge(void **state)
{
	struct up_config c;
	json_t *problems = json_array();
	char want[PATH_MAX + 64];

	(void)state;
	load(&c, problems, "home/proj/sub");
	assert_int_equal(json_array_size(problems), 0);
	/* files, nearest first; the one above home is not read */
	assert_int_equal(json_array_size(c.files), 4);
	(void)snprintf(want, sizeof(want), "%s/home/proj/sub/.uplink.yaml", root);
	assert_string_equal(json_string_value(json_array_get(c.files, 0)), want);
	(void)snprintf(want, sizeof(want), "%s/home/proj/.agent-uplink.yaml", root);
	assert_string_equal(json_string_value(json_array_get(c.files, 1)), want);
	(void)snprintf(want, sizeof(want), "%s/xdg/uplink/config.yaml", root);
	assert_string_equal(json_string_value(json_array_get(c.files, 3)), want);

	/* scalars: the nearest file that sets them */
	assert_string_equal(c.ttl, "1h");
	expect_origin(&c, "ttl", "home/proj/sub/.uplink.yaml", 1);
	assert_string_equal(c.image, "example/agent:2");
	expect_origin(&c, "image", "home/proj/.agent-uplink.yaml", 2);
	assert_string_equal(c.mode,
			    "bedrock"); /* 0.4.1's bedrock: true; anthropic: false is a no-op */
	expect_origin(&c, "mode", "home/proj/.agent-uplink.yaml", 3);
	assert_true(c.allow_dns);
	expect_origin(&c, "allow_dns", "home/.uplink.yaml", 3);
	assert_string_equal(c.idle_timeout, "5h");
	assert_string_equal(c.registry, "reg.example:5000");
	assert_false(c.notifications);
	assert_false(c.allow_exec);
	assert_null(origin(&c, "allow_exec"));

	/* lists add up, nearest file first; paths are made absolute */
	assert_int_equal(json_array_size(c.rules), 5);
	json_t *inline_rule = json_array_get(c.rules, 0);
	assert_true(json_is_object(inline_rule));
	assert_string_equal(
		json_string_value(json_object_get(json_object_get(inline_rule, "rule"), "name")),
		"inline");
	(void)snprintf(want, sizeof(want), "%s/home/proj/sub/.uplink.yaml:3", root);
	assert_string_equal(json_string_value(json_object_get(inline_rule, "source")), want);
	/* a project's rules files are read with it (here they are missing: the session says so) */
	(void)snprintf(want, sizeof(want), "%s/home/c.yaml", root);
	assert_string_equal(json_string_value(json_object_get(json_array_get(c.rules, 1), "path")),
			    want);
	assert_non_null(
		strstr(json_string_value(json_object_get(json_array_get(c.rules, 1), "error")),
		       "cannot read the rules file"));
	(void)snprintf(want, sizeof(want), "%s/home/proj/b.yaml", root);
	assert_string_equal(json_string_value(json_object_get(json_array_get(c.rules, 2), "path")),
			    want);
	assert_string_equal(json_string_value(json_array_get(c.rules, 3)), "/a.yaml");
	assert_string_equal(json_string_value(json_array_get(c.rules, 4)), "/global.yaml");
	assert_int_equal(json_array_size(json_object_get(c.origins, "rules")), 5);
	assert_string_equal(json_string_value(json_array_get(c.args, 0)), "--verbose");

	/* the inline rule loads into the user layer */
	struct up_ruleset *rs = up_ruleset_new();
	assert_int_equal(up_config_load_rules_item(rs, inline_rule, problems), 0);
	assert_int_equal(up_ruleset_count(rs), 1);
	assert_int_equal(up_ruleset_get(rs, 0)->layer, UP_LAYER_USER);
	(void)snprintf(want, sizeof(want), "%s/home/proj/sub/.uplink.yaml:3", root);
	assert_string_equal(up_ruleset_get(rs, 0)->source, want);
	up_ruleset_free(rs);

	up_config_done(&c);
	json_decref(problems);
}

static void test_home_boundary(void **state)
{
	struct up_config c;
	json_t *problems = json_array();

	(void)state;
	/* at home itself: home's file and the global one, never the one above */
	load(&c, problems, "home");
	assert_int_equal(json_array_size(problems), 0);
	assert_int_equal(json_array_size(c.files), 2);
	assert_string_equal(c.ttl, "2h");
	assert_null(c.image);
	up_config_done(&c);
	/* outside home: only the cwd's own file (here, the broken one above home) and the global
	 * one */
	char home[PATH_MAX + 16], want[PATH_MAX + 512];
	(void)snprintf(home, sizeof(home), "%s/home", root);
	assert_int_equal(up_config_init_defaults(&c), 0);
	assert_int_equal(up_config_load(&c, home, NULL, root, problems), -EINVAL);
	assert_int_equal(json_array_size(problems), 1);
	(void)snprintf(want, sizeof(want), "%s/.uplink.yaml:2: unknown key 'bogus'; " KNOWN, root);
	assert_string_equal(json_string_value(json_array_get(problems, 0)), want);
	assert_int_equal(json_array_size(c.files), 1);
	up_config_done(&c);
	json_decref(problems);
}

static void test_show_and_apply(void **state)
{
	struct up_config c;
	json_t *problems = json_array(), *params, *shown, *flags;
	char want[PATH_MAX + 64];

	(void)state;
	load(&c, problems, "home/proj/sub");
	params = json_pack("{s:s, s:s, s:[]}", "agent", "claude", "ttl", "5h", "args");
	json_t *from = json_object();
	assert_int_equal(up_config_apply(&c, params, from), 0);
	assert_string_equal(json_string_value(json_object_get(params, "ttl")),
			    "5h"); /* the flag wins */
	assert_null(json_object_get(from, "ttl"));
	(void)snprintf(want, sizeof(want), "%s/home/proj/.agent-uplink.yaml:2", root);
	assert_string_equal(json_string_value(json_object_get(from, "image")), want);
	json_decref(from);
	assert_true(json_is_true(json_object_get(params, "allow_dns")));
	assert_string_equal(json_string_value(json_object_get(params, "image")), "example/agent:2");
	assert_string_equal(json_string_value(json_object_get(params, "mode")), "bedrock");
	assert_null(json_object_get(params, "allow_exec"));    /* not in any file */
	assert_null(json_object_get(params, "rules"));	       /* rules go their own way */
	assert_null(json_object_get(params, "notifications")); /* not a session.start param */
	assert_int_equal(json_array_size(json_object_get(params, "args")), 1);
	json_decref(params);

	flags = json_pack("{s:s}", "ttl", "5h");
	shown = up_config_show(&c, flags);
	assert_non_null(shown);
	json_t *v = json_object_get(shown, "values");
	assert_string_equal(json_string_value(json_object_get(json_object_get(v, "ttl"), "source")),
			    "flag");
	assert_string_equal(json_string_value(json_object_get(json_object_get(v, "ttl"), "value")),
			    "5h");
	assert_string_equal(
		json_string_value(json_object_get(json_object_get(v, "allow_exec"), "source")),
		"default");
	(void)snprintf(want, sizeof(want), "%s/home/proj/.agent-uplink.yaml:2", root);
	assert_string_equal(
		json_string_value(json_object_get(json_object_get(v, "image"), "source")), want);
	assert_int_equal(json_array_size(json_object_get(json_object_get(v, "rules"), "source")),
			 5);
	json_decref(shown);
	json_decref(flags);
	up_config_done(&c);
	json_decref(problems);
}

/* kube_context adds up (flag first, then nearer files), kubeconfig is a path of the file's. */
static void test_kube_keys(void **state)
{
	const char *near = "kube_context: [a, b]\nkubeconfig: kube/cfg\n";
	const char *far = "kube_context: c\nkubeconfig: ~/.kube/other\n";
	struct up_config c;
	json_t *problems = json_array(), *params;

	(void)state;
	assert_int_equal(up_config_init_defaults(&c), 0);
	assert_int_equal(up_config_parse(&c, "/home/u/p/.uplink.yaml", near, strlen(near),
					 "/home/u", problems),
			 0);
	assert_int_equal(up_config_parse(&c, "/home/u/.config/uplink/config.yaml", far, strlen(far),
					 "/home/u", problems),
			 0);
	assert_string_equal(c.kubeconfig, "/home/u/p/kube/cfg");
	params = json_pack("{s:[s, s]}", "kube_context", "z", "a");
	assert_int_equal(up_config_apply(&c, params, NULL), 0);
	json_t *want = json_pack("[s, s, s, s]", "z", "a", "b", "c");
	assert_true(json_equal(json_object_get(params, "kube_context"), want));
	assert_string_equal(json_string_value(json_object_get(params, "kubeconfig")),
			    "/home/u/p/kube/cfg");
	json_decref(want);
	json_decref(params);
	params = json_pack("{s:s}", "kubeconfig", "/flag");
	assert_int_equal(up_config_apply(&c, params, NULL), 0);
	assert_string_equal(json_string_value(json_object_get(params, "kubeconfig")), "/flag");
	assert_int_equal(json_array_size(json_object_get(params, "kube_context")), 3);
	json_decref(params);
	up_config_done(&c);
	json_decref(problems);
}

/* The lists that add up to their flags, the paths made absolute, notifications: false. */
static void test_lists_add_up(void **state)
{
	static const char text[] =
		"add_dir: [sub, ~/x]\nmount_ro: /etc/y\nssh_cidr:\n  - 10.0.0.0/8\n"
		"ssh_key_dir: keys\nmitm_debug: true\nnotifications: false\n";
	struct up_config c;
	json_t *problems = json_array(), *params, *from = json_object(), *shown, *v;

	(void)state;
	assert_int_equal(up_config_init_defaults(&c), 0);
	assert_int_equal(up_config_parse(&c, "/home/u/p/.uplink.yaml", text, strlen(text),
					 "/home/u", problems),
			 0);
	params = json_pack("{s:[s], s:[s], s:n}", "add_dir", "/home/u/flag", "ssh_cidr", "1.2.3.4",
			   "mount_rw");
	assert_int_equal(up_config_apply(&c, params, from), 0);
	v = json_object_get(params, "add_dir");
	assert_int_equal(json_array_size(v), 3);
	assert_string_equal(json_string_value(json_array_get(v, 0)),
			    "/home/u/flag"); /* the flag's first */
	assert_string_equal(json_string_value(json_array_get(v, 1)), "/home/u/p/sub");
	assert_string_equal(json_string_value(json_array_get(v, 2)), "/home/u/x");
	assert_int_equal(json_array_size(json_object_get(params, "ssh_cidr")), 2);
	assert_string_equal(
		json_string_value(json_array_get(json_object_get(params, "mount_ro"), 0)),
		"/etc/y");
	assert_true(json_is_null(json_object_get(params, "mount_rw"))); /* no file says it */
	assert_string_equal(json_string_value(json_object_get(params, "ssh_key_dir")),
			    "/home/u/p/keys");
	assert_string_equal(json_string_value(json_object_get(from, "ssh_key_dir")),
			    "/home/u/p/.uplink.yaml:5");
	assert_true(json_is_true(json_object_get(params, "mitm_debug")));
	assert_true(json_is_true(json_object_get(params, "no_notifications")));
	shown = up_config_show(&c, params);
	v = json_object_get(json_object_get(shown, "values"), "add_dir");
	assert_int_equal(json_array_size(json_object_get(v, "source")),
			 json_array_size(json_object_get(v, "value")));
	json_decref(shown);
	json_decref(params);
	json_decref(from);
	json_decref(problems);
	up_config_done(&c);
}

static void expect_problem(const char *text, const char *want);

/* aws_profiles: a list (or one name) that adds up: the flags' names, then the files' (nearest
 * first). */
static void test_aws_profiles(void **state)
{
	static const char near[] = "aws_profiles: [dev, prod]\n", far[] = "aws_profiles: shared\n";
	json_t *problems = json_array(), *params, *shown;
	struct up_config c;
	char *got;

	(void)state;
	assert_int_equal(up_config_init_defaults(&c), 0);
	assert_int_equal(
		up_config_parse(&c, "/h/p/.uplink.yaml", near, strlen(near), "/h", problems), 0);
	assert_int_equal(up_config_parse(&c, "/h/.uplink.yaml", far, strlen(far), "/h", problems),
			 0);
	params = json_pack("{s:s, s:[s]}", "agent", "claude", "aws_profiles", "flag");
	assert_int_equal(up_config_apply(&c, params, NULL), 0);
	got = up_json_join(json_object_get(params, "aws_profiles"), " ");
	assert_string_equal(got, "flag dev prod shared");
	free(got);
	json_decref(params);
	params = json_pack("{s:s}", "agent", "claude"); /* no flag */
	assert_int_equal(up_config_apply(&c, params, NULL), 0);
	assert_int_equal(json_array_size(json_object_get(params, "aws_profiles")), 3);
	json_decref(params);
	shown = up_config_show(&c, NULL);
	json_t *v = json_object_get(json_object_get(shown, "values"), "aws_profiles");
	assert_int_equal(json_array_size(json_object_get(v, "value")), 3);
	assert_string_equal(json_string_value(json_array_get(json_object_get(v, "source"), 2)),
			    "/h/.uplink.yaml:1");
	json_decref(shown);
	up_config_done(&c);
	assert_int_equal(json_array_size(problems), 0);
	json_decref(problems);
	expect_problem("aws_profiles: [dev, {a: 1}]\n",
		       "/p/.uplink.yaml:1: 'aws_profiles' items are strings, got a mapping");
}

/* Parses `text` as /p/.uplink.yaml and checks its only problem, in full. */
static void expect_problem(const char *text, const char *want)
{
	struct up_config c;
	json_t *problems = json_array();

	assert_int_equal(up_config_init_defaults(&c), 0);
	assert_int_equal(
		up_config_parse(&c, "/p/.uplink.yaml", text, strlen(text), "/home/u", problems),
		-EINVAL);
	if (json_array_size(problems) != 1)
		fail_msg("%s: %zu problems", text, json_array_size(problems));
	assert_string_equal(json_string_value(json_array_get(problems, 0)), want);
	up_config_done(&c);
	json_decref(problems);
}

static void test_problems(void **state)
{
	(void)state;
	expect_problem("ttl: 1h\nfoo: 1\n", "/p/.uplink.yaml:2: unknown key 'foo'; " KNOWN);
	expect_problem("ttl: 1h\n\nmount_rw_all: /x\n",
		       "/p/.uplink.yaml:3: unknown key 'mount_rw_all'; " KNOWN);
	expect_problem("mount_ro:\n  - [a]\n",
		       "/p/.uplink.yaml:2: 'mount_ro' items are strings, got a list");
	expect_problem("ssh_key_dir: [a]\n",
		       "/p/.uplink.yaml:1: 'ssh_key_dir' expects a string, got a list");
	expect_problem("mitm_debug: on\n",
		       "/p/.uplink.yaml:1: 'mitm_debug' expects a boolean (true/false), got on");
	expect_problem("allow_dns: \"true\"\n",
		       "/p/.uplink.yaml:1: 'allow_dns' expects a boolean (true/false), got 'true'");
	expect_problem("allow_dns: yes\n",
		       "/p/.uplink.yaml:1: 'allow_dns' expects a boolean (true/false), got yes");
	expect_problem("bedrock: 1\n",
		       "/p/.uplink.yaml:1: 'bedrock' expects a boolean (true/false), got 1");
	expect_problem("image:\n  - a\n",
		       "/p/.uplink.yaml:2: 'image' expects a string, got a list");
	expect_problem("image: true\n", "/p/.uplink.yaml:1: 'image' expects a string, got true");
	expect_problem("mode: ~\n", "/p/.uplink.yaml:1: 'mode' expects a string, got null");
	expect_problem("idle_timeout: soon\n",
		       "/p/.uplink.yaml:1: 'idle_timeout': invalid duration 'soon'; "
		       "use forms like 30m, 2h, 1d");
	expect_problem("ttl: 1h\nttl: 2h\n",
		       "/p/.uplink.yaml:2: 'ttl' is set twice in this file; keep one");
	expect_problem("rules:\n  - /a.yaml\n  - true\n",
		       "/p/.uplink.yaml:3: 'rules' items are rules files "
		       "(paths) or inline rules (mappings), got true");
}

static void test_more_problems(void **state)
{
	struct up_config c;
	json_t *problems = json_array();
	const char *text = "ttl: 1h\nrules:\n  - name: bad\n    hosts: []\n";

	(void)state;
	expect_problem(
		"- a\n- b\n",
		"/p/.uplink.yaml:1: expected a YAML mapping at the top level (key: value lines)");
	expect_problem("rules: [[a]]\n",
		       "/p/.uplink.yaml:1: 'rules' items are rules files (paths) or inline "
		       "rules (mappings), got a list");
	expect_problem("ttl: [\n",
		       "/p/.uplink.yaml:2: invalid YAML: did not find expected node content "
		       "while parsing a flow node");
	expect_problem("a: &x 1\nttl: *x\n",
		       "/p/.uplink.yaml:2: YAML aliases (*name) are not supported in "
		       "config files; write the value out");
	/* an inline rule's problem names the config file and the rule's own line */
	assert_int_equal(up_config_init_defaults(&c), 0);
	assert_int_equal(
		up_config_parse(&c, "/p/.uplink.yaml", text, strlen(text), "/home/u", problems),
		-EINVAL);
	assert_int_equal(json_array_size(problems), 1);
	assert_true(!strncmp(json_string_value(json_array_get(problems, 0)),
			     "/p/.uplink.yaml:4:12: rule 'bad': ",
			     strlen("/p/.uplink.yaml:4:12: rule 'bad': ")));
	up_config_done(&c);
	json_decref(problems);
	/* an empty file sets nothing and is fine */
	problems = json_array();
	assert_int_equal(up_config_init_defaults(&c), 0);
	assert_int_equal(up_config_parse(&c, "/p/.uplink.yaml", "", 0, "/home/u", problems), 0);
	assert_int_equal(
		up_config_parse(&c, "/p/.uplink.yaml", "# nothing\n", 10, "/home/u", problems), 0);
	assert_string_equal(c.ttl, "24h");
	assert_null(json_object_get(c.origins, "ttl"));
	up_config_done(&c);
	json_decref(problems);
}

/* What a project's file asks of the trust store, and what the store's answer makes of it. */
static void test_trust_asks(void **state)
{
	struct up_config c;
	json_t *problems = json_array(), *e, *asks, *store;
	char want[PATH_MAX + 64], sha[UP_SHA256_HEX_LEN + 1], *msg;
	const char *rules_text =
		"rules:\n  - name: beacon\n    hosts: [b\\.test]\n    inject:\n"
		"      headers: {X-B: '{{exec:echo hi}}', X-C: \"{{exec:printf \\e[2J}}\"}\n";

	(void)state;
	mkdir_in("home/evil");
	write_file("home/evil/r.yaml", rules_text);
	write_file("home/evil/.uplink.yaml",
		   "ttl: 1h\nmount_ro: [r.yaml]\nmitm_debug: false\nrules:\n"
		   "  - name: t\n    hosts: [t\\.test]\n    inject:\n"
		   "      headers: {X-T: 'Bearer {{keyring:github:git-https}}'}\n"
		   "  - r.yaml\n");
	load(&c, problems, "home/evil");
	assert_int_equal(json_array_size(problems), 0);
	e = json_array_get(c.trust, 0); /* the project's file; then home's (yours) and xdg's */
	(void)snprintf(want, sizeof(want), "%s/home/evil/.uplink.yaml", root);
	assert_string_equal(json_string_value(json_object_get(e, "file")), want);
	assert_true(json_is_true(json_object_get(e, "project")));
	asks = json_object_get(e, "asks");
	assert_int_equal(json_array_size(asks),
			 4); /* mount_ro, the keyring, two execs; not mitm_debug: false */
	/* what the terminal shows holds no control character (an escape could hide the refusal) */
	assert_non_null(strstr(json_string_value(json_object_get(json_array_get(asks, 3), "what")),
			       "runs 'printf ?[2J' on this machine"));
	assert_non_null(strstr(json_string_value(json_object_get(json_array_get(asks, 0), "what")),
			       "mount_ro"));
	assert_non_null(
		strstr(json_string_value(json_object_get(json_array_get(asks, 1), "what")),
		       "service='github' username='git-https', sent in header X-T by rule 't'"));
	(void)snprintf(want, sizeof(want), "%s/home/evil/r.yaml:2", root);
	assert_string_equal(json_string_value(json_object_get(json_array_get(asks, 2), "at")),
			    want);
	/* the rules file was read once: its text is what the session parses, its hash what is
	 * trusted */
	up_sha256_hex(rules_text, strlen(rules_text), sha);
	assert_string_equal(
		json_string_value(json_object_get(
			json_array_get(json_object_get(e, "rules_files"), 0), "sha256")),
		sha);
	assert_string_equal(json_string_value(json_object_get(json_array_get(c.rules, 1), "text")),
			    rules_text);
	assert_int_equal(json_array_size(json_object_get(json_array_get(c.trust, 1), "asks")), 0);

	store = json_object();
	assert_int_equal(up_config_check_trust(&c, store), 0);
	assert_true(up_config_needs_trust(e));
	assert_string_equal(json_string_value(json_object_get(e, "state")), "untrusted");
	assert_string_equal(json_string_value(json_object_get(json_array_get(c.trust, 1), "state")),
			    "yours");
	msg = up_config_untrusted_message(&c);
	(void)snprintf(want, sizeof(want), "  uplink trust %s/home/evil/.uplink.yaml", root);
	assert_non_null(strstr(msg, want));
	free(msg);
	/* the project's file trusted, its rules file at another hash: changed */
	json_object_set_new(store, json_string_value(json_object_get(e, "file")),
			    json_pack("{s:O}", "sha256", json_object_get(e, "sha256")));
	(void)snprintf(want, sizeof(want), "%s/home/evil/r.yaml", root);
	json_object_set_new(store, want, json_pack("{s:s}", "sha256", SHA_OTHER));
	assert_int_equal(up_config_check_trust(&c, store), 0);
	assert_string_equal(json_string_value(json_object_get(e, "state")), "changed");
	json_object_set_new(store, want, json_pack("{s:s}", "sha256", sha));
	assert_int_equal(up_config_check_trust(&c, store), 0);
	assert_string_equal(json_string_value(json_object_get(e, "state")), "trusted");
	assert_false(up_config_needs_trust(e));
	json_decref(store);
	up_config_done(&c);
	json_decref(problems);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_merge),	       cmocka_unit_test(test_home_boundary),
		cmocka_unit_test(test_show_and_apply), cmocka_unit_test(test_lists_add_up),
		cmocka_unit_test(test_kube_keys),      cmocka_unit_test(test_problems),
		cmocka_unit_test(test_more_problems),  cmocka_unit_test(test_aws_profiles),
		cmocka_unit_test(test_trust_asks),
	};

	return cmocka_run_group_tests(tests, setup_tree, teardown_tree);
}
