/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "bounds.h"
#include "client.h"

/*
 * The shell completion model, read from the command table (up_commands): each command's
 * options, which of them take a value and what kind, and its positional arguments. The
 * scripts are printed from it, so they follow the table.
 */

/* What a value is completed from. */
enum comp_kind {
	COMP_NONE,    /* nothing to offer (a duration, an image reference...) */
	COMP_FILE,    /* file names */
	COMP_DIR,     /* folder names */
	COMP_SESSION, /* the daemon's session ids, asked at completion time */
	COMP_AGENT,   /* the agents uplinkd knows */
	COMP_CONTEXT, /* kubeconfig contexts */
	COMP_CHOICE,  /* a fixed list, `choices` (comma-separated) */
};

struct comp_value {
	enum comp_kind kind;
	char choices[UP_MAX_COMPLETION_WORD];
};

struct comp_opt {
	char name[UP_MAX_COMPLETION_WORD]; /* "--rules", "-o" */
	bool takes_value;
	struct comp_value value;
};

struct comp_cmd {
	const struct up_command *cmd;
	char first[UP_MAX_COMPLETION_WORD]; /* "rules" of "rules check" */
	char sub[UP_MAX_COMPLETION_WORD];   /* "check", or "" */
	struct comp_opt opts[UP_MAX_COMPLETION_OPTS];
	size_t n_opts;
	struct comp_value pos[UP_MAX_COMPLETION_POS];
	size_t n_pos;
	bool pos_repeats; /* the last positional may be given again (SESSION...) */
};

/* The agents uplinkd knows (agents/agents.c; tests/integration/test_completion.py checks). */
extern const char *const up_completion_agents[];

/* Reads `cmd`'s usage and help into `out`; -E2BIG when it has more than the bounds allow. */
int comp_cmd_read(const struct up_command *cmd, struct comp_cmd *out);
const char *comp_kind_name(enum comp_kind k);

/* Helpers of the printers: a value kind as the scripts spell it (file, dir, session, agent,
 * context, none, or the choices a,b,c); the distinct first words; the second words of one. */
const char *comp_kind_word(const struct comp_value *v);
void comp_print_first_words(FILE *f, const struct comp_cmd *cmds, size_t n);
void comp_print_subs_of(FILE *f, const struct comp_cmd *cmds, size_t n, const char *first);
bool comp_has_subs(const struct comp_cmd *cmds, size_t n, const char *first);

/*
 * How bash's and zsh's scripts spell the model (completion-bash.c prints either): a header,
 * the command words (words_open ... words_close), a `case`
 * of the commands with subcommands (subs_head, then per command sub_open NAME sub_mid SUBS
 * sub_close), a `case` arm per command (spec_open WORDS opts OPTIONS vals VALUES pos
 * POSITIONALS rep REPEATS' ;;) ending in spec_default, then the fixed engine.
 */
struct comp_syntax {
	const char *head, *words_open, *words_close;
	const char *subs_head, *sub_open, *sub_mid, *sub_close;
	const char *spec_open, *opts, *vals, *pos, *rep, *spec_default;
	const char *engine;
};
/* zsh's header and engine (completion-shells.c), for comp_print_zsh(). */
extern const char comp_zsh_head[], comp_zsh_engine[];

/* The scripts, from every command in the table. */
int comp_print_bash(FILE *f, const struct comp_cmd *cmds, size_t n);
int comp_print_zsh(FILE *f, const struct comp_cmd *cmds, size_t n);
int comp_print_fish(FILE *f, const struct comp_cmd *cmds, size_t n);
