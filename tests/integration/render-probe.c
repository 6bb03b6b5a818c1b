/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A test driver for daemon/manifests.c and daemon/ca.c: renders a fixed session (with a
 * freshly minted CA and sentinel secrets in its rules) and prints the objects as one
 * Kubernetes List in JSON, the way --dry-run does. Not installed.
 *
 *   render-probe [--show-secrets] [--allow-dns] [--no-ip] [--ssh] [--system] [--id HEX12]
 *
 * --ssh adds --ssh-key-dir's objects: an ssh-agent holder for one (fake) private key.
 *
 * Templates come from $UPLINK_DATA_DIR/manifests (the tests point it at the source tree).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ca.h"
#include "manifests.h"

static const char rules_text[] =
	"{\"version\":1,\"rules\":["
	"{\"name\":\"claude-auth\",\"layer\":\"auth\",\"source\":\"agent:claude\","
	"\"hosts\":[\"api\\\\.anthropic\\\\.com\"],"
	"\"inject\":{\"headers\":{\"Authorization\":\"Bearer uplink-sentinel-oauth-token\"}}},"
	"{\"name\":\"default-readonly\",\"layer\":\"generic\",\"source\":\"builtin\","
	"\"hosts\":[\".*\"],\"methods\":[\"GET\",\"HEAD\",\"OPTIONS\"]}]}";

static const struct up_env env[] = {{"CLAUDE_CONFIG_DIR", "/home/u/.claude"}};
static const struct up_agent_file settings[] = {
	{"settings.json", "{}", 2, "/home/u/.claude/settings.json"},
};
static const struct up_agent_file creds[] = {
	{".credentials.json", "{\"claudeAiOauth\":{\"accessToken\":\"fake\"}}", 40,
	 "/home/u/.claude/.credentials.json"},
};
static const struct up_agent_volume volumes[] = {
	{.kind = UP_AGENT_VOL_SECRET,
	 .name = "claude-settings",
	 .files = settings,
	 .n_files = 1,
	 .read_only = true},
	{.kind = UP_AGENT_VOL_SECRET,
	 .name = "claude-fake-creds",
	 .files = creds,
	 .n_files = 1,
	 .read_only = true},
	{.kind = UP_AGENT_VOL_HOSTPATH,
	 .name = "cwd",
	 .host_path = "/home/u/src/p",
	 .host_path_type = "Directory",
	 .mount_path = "/home/u/src/p"},
	{.kind = UP_AGENT_VOL_EMPTYDIR,
	 .name = "docker-lib",
	 .medium = "Memory",
	 .size_limit = "2Gi",
	 .mount_path = "/var/lib/docker"},
	{.kind = UP_AGENT_VOL_EMPTYDIR,
	 .name = "run",
	 .medium = "Memory",
	 .size_limit = "64Mi",
	 .mount_path = "/run"},
};
static char ssh_key[] = "-----BEGIN OPENSSH PRIVATE KEY-----\nuplink-sentinel-ssh-key\n"
			"-----END OPENSSH PRIVATE KEY-----\n";
static char ssh_key_name[] = "id_ed25519", ssh_pub_name[] = "id_ed25519.pub";
static char ssh_pub[] =
	"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeFakeFakeFakeFakeFakeFakeFakeFakeFake u@h\n";
static char ssh_config_name[] = "config", ssh_config[] = "Host git.example.com\n\tUser git\n";
static struct up_ssh_file ssh_keys[] = {{ssh_key_name, ssh_key, sizeof(ssh_key) - 1}};
static struct up_ssh_file ssh_pubs[] = {{ssh_config_name, ssh_config, sizeof(ssh_config) - 1},
					{ssh_pub_name, ssh_pub, sizeof(ssh_pub) - 1}};

static const char *const entrypoint[] = {"/usr/local/bin/uplink-entrypoint", NULL};
static const char *const command[] = {"claude", "--allow-dangerously-skip-permissions", NULL};

static int print(json_t *objects, bool show)
{
	json_t *list = up_manifests_list(objects, show);
	char *s = list ? json_dumps(list, JSON_INDENT(2)) : NULL;

	if (!s)
		return 1;
	printf("%s\n", s);
	free(s);
	json_decref(list);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"show-secrets", no_argument, NULL, 's'},
		{"allow-dns", no_argument, NULL, 'd'},
		{"no-ip", no_argument, NULL, 'n'},
		{"system", no_argument, NULL, 'y'},
		{"id", required_argument, NULL, 'i'},
		{"ssh", no_argument, NULL, 'k'},
		{NULL, 0, NULL, 0},
	};
	bool show = false, dns = false, no_ip = false, sys = false, ssh = false;
	struct up_session_extras extras = {
		.mounts = json_array(),
		.ssh_cidrs = json_pack("[s]", "10.0.0.0/8"),
		.ssh = {.keys = ssh_keys, .n_keys = 1, .pub = ssh_pubs, .n_pub = 2},
	};
	const char *id = "0123456789ab";
	struct up_manifests *tpl = NULL;
	struct up_ca *ca = NULL;
	json_t *objects = NULL;
	char err[1024];
	int c, rc;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 's': show = true; break;
		case 'd': dns = true; break;
		case 'n': no_ip = true; break;
		case 'y': sys = true; break;
		case 'i': id = optarg; break;
		case 'k': ssh = true; break;
		default: return 2;
		}
	}
	if (up_manifests_load(NULL, &tpl, err, sizeof(err)) < 0) {
		fprintf(stderr, "render-probe: %s\n", err);
		return 1;
	}
	if (sys) {
		rc = up_manifests_render_system(tpl, NULL, &objects, err, sizeof(err)) < 0;
		goto out;
	}
	time_t now = time(NULL);
	if (up_ca_new("0123456789ab", now, now + 86400, &ca, err, sizeof(err)) < 0) {
		fprintf(stderr, "render-probe: %s\n", err);
		up_manifests_free(tpl);
		return 1;
	}
	json_t *rules = json_loads(rules_text, 0, NULL);
	struct up_session_spec spec = {
		.id = id,
		.owner = "5f3c2a1b9d8e7f60",
		.created_at = now,
		.expires_at = now + 86400,
		.cwd = "/home/u/src/p",
		.agent = "claude",
		.mode = "anthropic",
		.uid = 1000,
		.gid = 1000,
		.user = "u",
		.home = "/home/u",
		.agent_image = "localhost:5000/agent-uplink-claude:0123abcd",
		.mitm_image = "mitmproxy/mitmproxy:12.1.1",
		.asked = {.allow_dns = dns},
		.rules = rules,
		.ca_cert_pem = ca->cert_pem,
		.ca_key_pem = ca->key_pem,
		.mitm_cluster_ip = no_ip ? NULL : "10.43.0.99",
		.ssh_agent_cluster_ip = no_ip || !ssh ? NULL : "10.43.0.98",
		.mitm_runtime_class = ssh ? "kata-clh" : NULL,
		.extras = ssh ? &extras : NULL,
		.contrib = {.env = env,
			    .n_env = 1,
			    .volumes = volumes,
			    .n_volumes = 5,
			    .entrypoint = entrypoint,
			    .command = command},
	};
	rc = up_manifests_render(tpl, &spec, &objects, err, sizeof(err)) < 0;
	json_decref(rules);
out:
	json_decref(extras.mounts);
	json_decref(extras.ssh_cidrs);
	if (rc)
		fprintf(stderr, "render-probe: %s\n", err);
	else
		rc = print(objects, show);
	json_decref(objects);
	up_ca_free(ca);
	up_manifests_free(tpl);
	return rc;
}
