/* SPDX-License-Identifier: Apache-2.0 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "config.h"
#include "knobs.h"
#include "log.h"
#include "manager.h"
#include "protocol.h"

static void notify_stopping(int *unused)
{
	(void)unused;
	(void)sd_notify(0, "STOPPING=1");
}

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: uplinkd [--debug] [--version] [--help] [--help-env]\n"
		"\n"
		"The uplink daemon. It is normally started by systemd through uplinkd.socket\n"
		"(systemctl --user start uplinkd.socket). Started by hand, it binds its socket at\n"
		"$" UP_SOCKET_ENV " or $XDG_RUNTIME_DIR/uplink/uplinkd.sock.\n"
		"\n"
		"  -d, --debug    log debug messages (also: UPLINK_DEBUG=1)\n"
		"  -V, --version  print the version and exit\n"
		"  -h, --help     print this help and exit\n"
		"      --help-env print the environment variables the daemon reads and exit\n"
		"\n"
		"Exit status: 0 after a clean stop, 1 on a start-up failure, 2 on bad usage.\n");
}

/* One line a knob: name, kind, type, default, meaning, tab-separated (a test reads it). */
static void help_env(void)
{
	for (unsigned i = 0; i < up_knob_count; i++) {
		const struct up_knob *k = &up_knob_table[i];
		printf("%s\t%s\t%s\t%s\t%s\n", k->name, up_knob_kind_name(k->kind), k->type,
		       k->dflt, k->meaning);
	}
}

static int parse_args(int argc, char **argv)
{
	static const struct option opts[] = {
		{"debug", no_argument, NULL, 'd'},
		{"version", no_argument, NULL, 'V'},
		{"help", no_argument, NULL, 'h'},
		{"help-env", no_argument, NULL, 'E'},
		{0},
	};
	int c;

	while ((c = getopt_long(argc, argv, "dVh", opts, NULL)) != -1) {
		switch (c) {
		case 'd': log_set_level(LOG_DEBUG); break;
		case 'V':
			printf("uplinkd %s (protocol %d)\n", UPLINK_VERSION, UP_PROTOCOL_VERSION);
			return 0;
		case 'h': usage(stdout); return 0;
		case 'E': help_env(); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "uplinkd: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return 2;
	}
	return -1;
}

int main(int argc, char **argv)
{
	_cleanup_(notify_stopping) int stopping = 0;
	_cleanup_(up_manager_freep) struct up_manager *m = NULL;
	const char *dbg;
	int r;

	(void)stopping;
	up_knobs_load(); /* before any thread: the environment is read here only */
	dbg = up_knobs()->debug;
	log_init("uplinkd", dbg && *dbg && strcmp(dbg, "0") ? LOG_DEBUG : LOG_INFO, 1);
	r = parse_args(argc, argv);
	if (r >= 0)
		return r;
	r = up_manager_new(&m);
	if (r < 0) {
		log_error_errno(r, "Cannot set up the daemon");
		return EXIT_FAILURE;
	}
	r = up_manager_start(m);
	if (r < 0)
		return EXIT_FAILURE;
	return up_manager_run(m);
}
